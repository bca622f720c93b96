"""Prolog/Epilog wall time under a job burst on the test cluster, ours against a no-op hook in the
same burst (issue 12, target 2: ours adds <= 0.2 s at p95). Run as root, holding the cluster lock:

    flock /var/lock/slurm-energy-cluster.lock /opt/slurm-energy/venv/bin/python benchmarks/hook_burst.py \\
        [--jobs 300] [--python VENV/bin/python] [--out FILE]

What it does (3-6 minutes for 300 jobs on the 2-node, 2-CPU-per-node cluster):

* writes under ``$L/hookbench/``: ``ours/{prolog,epilog}`` (the cluster's installed hooks, or with
  ``--python`` the hooks ``slurm-energy install`` of that interpreter writes: its package, its
  sampler and finalizer), ``noop/{prolog,epilog}`` (the same scripts, the same ``cd /`` and
  ``timeout -s KILL 1.9`` guard, with the Python command replaced by ``/bin/true``), and two bash
  dispatchers that run ``ours`` for even job ids and ``noop`` for odd ones, logging each run's
  wall time (bash ``$EPOCHREALTIME`` before and after the hook script: what slurmd waits for, less
  the dispatcher's own start);
* points slurm.conf's Prolog=/Epilog= at the dispatchers (``scontrol reconfigure``), submits one
  array of ``--jobs`` tasks (``sleep 1``, 100 MB, as alice), waits for the queue to empty, and puts
  slurm.conf back (also on errors and Ctrl-C); ours use ``$L/hookbench/site.yaml``, the cluster's
  with the spools, store and logs under ``$L/hookbench/`` (other tests read the cluster's store);
* waits (up to 20 min) for the burst's finalizers, which run niced and 2 at a time, so the next
  user of the cluster finds the machine idle;
* prints p50 / p95 / max of both, what ours adds (ours - noop at each percentile), and each hook's
  median CPU time (bash ``times``: the hook script and what it waited for, not the detached sampler
  or finalizer), which does not depend on the machine's load as the wall time does.

Both kinds run interleaved in one burst, so both see the same load: the other jobs' hooks, the
samplers and finalizers that the even jobs start, slurmd and slurmctld, anything else on the machine.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTCLUSTER = REPO / "scripts" / "testcluster.sh"
HOOKS = ("prolog", "epilog")

DISPATCH = """#!/bin/bash
# benchmarks/hook_burst.py: even job ids run slurm-energy's hook, odd ones the no-op; wall time logged
t0=$EPOCHREALTIME
case ${{SLURM_JOB_ID:-1}} in *[02468]) k=ours ;; *) k=noop ;; esac
{d}/$k/{which}
t1=$EPOCHREALTIME
times >{d}/cpu/${{SLURM_JOB_ID:-0}}.{which}  # a builtin, no fork: 2nd line = the hook's CPU (user, sys)
echo "$k {which} ${{SLURM_JOB_ID:-?}} $t0 $t1" >>{d}/times.log
exit 0
"""


def cluster_dir() -> Path:
    mark = Path("/run/slurm-energy-testcluster")
    return Path(os.environ.get("L") or (mark.read_text().strip() if mark.exists() else "/var/tmp/slurm-energy-cluster"))


def tc(*args: str, user: str = "root", check: bool = True) -> subprocess.CompletedProcess:
    """A Slurm command for the running cluster's version (scripts/testcluster.sh exec)."""
    return subprocess.run(["bash", str(TESTCLUSTER), "exec", "-u", user, "-C", "/", "--", *args],
                          capture_output=True, text=True, check=check)


def noop_text(hook_text: str) -> str:
    """The hook script with its Python command replaced by /bin/true (same shell, cd, guard)."""
    out, n = re.subn(r'(timeout -s KILL [0-9.]+ )"\$PY"[^<\n]*<', r"\1/bin/true <", hook_text)
    if n != 1:
        raise SystemExit("hook_burst: cannot find the hook's \"$PY\" ... command line to replace")
    return out


def bench_site(L: Path, d: Path) -> Path:
    """The cluster's site.yaml with its spools, store, logs and textfile dir under ``d``: the burst's
    records and files stay out of the cluster's (other tests read its store)."""
    text = (L / "etc" / "site.yaml").read_text()
    for sub in ("spool", "lib", "log", "textfile"):  # spool covers spool2 and spool/results
        text = text.replace(f"{L}/{sub}", f"{d}/{sub}")
    site = d / "site.yaml"
    site.write_text(text)
    return site


def write_hooks(d: Path, ours_from: Path, python: str | None, site: Path) -> None:
    (d / "ours").mkdir(parents=True, exist_ok=True)
    (d / "noop").mkdir(exist_ok=True)
    if python:
        subprocess.run([python, "-m", "slurm_energy.cli.main", "install", "--hooks-dir", str(d / "ours"),
                        "--config", str(site)], check=True, capture_output=True, cwd="/")
    else:
        for which in HOOKS:
            text = re.sub(r"^SLURM_ENERGY_CONFIG=[^;]*;", f"SLURM_ENERGY_CONFIG={site};",
                          (ours_from / which).read_text(), count=1, flags=re.M)
            (d / "ours" / which).write_text(text)
    for which in HOOKS:
        (d / "noop" / which).write_text(noop_text((d / "ours" / which).read_text()))
        (d / which).write_text(DISPATCH.format(d=d, which=which))
        for p in (d / "ours" / which, d / "noop" / which, d / which):
            os.chmod(p, 0o755)
    (d / "times.log").write_text("")
    # as on a cluster that has run a job since its last site.yaml edit: the resolved config copy exists
    py = re.search(r"^PY=(.*)$", (d / "ours" / "prolog").read_text(), flags=re.M)
    if py and os.path.exists(py.group(1)):  # (a Debian root's venv is not runnable from here: its first job does it)
        subprocess.run([py.group(1), "-I", "-c", "from slurm_energy.slurm.config_cache import load_hook_config as f; f()"],
                       env={"SLURM_ENERGY_CONFIG": str(site), "LANG": "C.UTF-8"}, cwd="/", capture_output=True)
    shutil.rmtree(d / "cpu", ignore_errors=True)
    (d / "cpu").mkdir()


def set_hooks(conf: Path, prolog: str, epilog: str) -> None:
    text = conf.read_text()
    text = re.sub(r"^Prolog=.*$", f"Prolog={prolog}", text, flags=re.M)
    text = re.sub(r"^Epilog=.*$", f"Epilog={epilog}", text, flags=re.M)
    conf.write_text(text)
    tc("scontrol", "reconfigure")
    for _ in range(50):  # reconfigure is asynchronous: wait until the controller shows the new Prolog
        if f"= {prolog}" in tc("scontrol", "show", "config").stdout:
            return
        time.sleep(0.2)
    raise SystemExit(f"hook_burst: slurm.conf's Prolog={prolog} not in force after scontrol reconfigure")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def table(times: dict[tuple[str, str], list[float]], cpu: dict[tuple[str, str], list[float]], n_jobs: int,
          elapsed_s: float, load: str) -> str:
    lines = [f"hook wall time (s) over one burst of {n_jobs} jobs (sleep 1), {elapsed_s:.0f} s from submit "
             f"to empty queue; even job ids ours, odd ones the no-op; load average before/after: {load}",
             "| hook | runs ours / no-op | ours p50 / p95 / max | no-op p50 / p95 / max | added p50 / p95 "
             "| CPU ms p50 ours / no-op |",
             "|---|---|---|---|---|---|"]
    for which in HOOKS:
        a, b = times.get(("ours", which), []), times.get(("noop", which), [])
        if not a or not b:
            lines.append(f"| {which} | {len(a)} / {len(b)} | - | - | - | - |")
            continue
        ca, cb = cpu.get(("ours", which)) or [float("nan")], cpu.get(("noop", which)) or [float("nan")]
        lines.append(f"| {which} | {len(a)} / {len(b)} | {statistics.median(a):.3f} / {pct(a, .95):.3f} / {max(a):.3f} "
                     f"| {statistics.median(b):.3f} / {pct(b, .95):.3f} / {max(b):.3f} "
                     f"| {statistics.median(a) - statistics.median(b):+.3f} / {pct(a, .95) - pct(b, .95):+.3f} "
                     f"| {1000 * statistics.median(ca):.0f} / {1000 * statistics.median(cb):.0f} |")
    lines.append("target (issue 12): added p95 <= 0.2 s for each hook")
    return "\n".join(lines)


def _cpu_s(path: Path) -> float:
    """CPU seconds (user + sys) of the hook script and what it waited for, from bash's ``times``
    (second line: ``0m0.112s 0m0.020s``); detached children (sampler, finalizer) are not counted."""
    user, sys_ = path.read_text().splitlines()[1].split()
    return sum(int(x.split("m")[0]) * 60 + float(x.split("m")[1].rstrip("s")) for x in (user, sys_))


def read_times(d: Path) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """(wall s, CPU s) per (ours|noop, prolog|epilog)."""
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    for line in (d / "times.log").read_text().splitlines():
        try:
            kind, which, job, t0, t1 = line.split()
            wall.setdefault((kind, which), []).append(float(t1) - float(t0))
            cpu.setdefault((kind, which), []).append(_cpu_s(d / "cpu" / f"{job}.{which}"))
        except (ValueError, OSError, IndexError):
            continue
    return wall, cpu


def ours_left(d: Path) -> list[int]:
    """PIDs of the burst's samplers and finalizers still running (their argv names ``d``)."""
    out = []
    for name in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        # the sampler's entry now, and its names before the moves
        ours = any(m in argv for m in (b"slurm_energy.slurm.sampler", b"slurm_energy.slurm.detached",
                                       b"slurm_energy.slurm.hooks"))
        if ours and any(str(d).encode() in a for a in argv):
            out.append(int(name))
    return out


def wait_ours(d: Path, limit_s: float) -> int:
    """Wait until the burst's finalizers (niced, 2 at a time) are done, so the next user of the
    cluster gets an idle machine; returns how many are left after ``limit_s``."""
    t_end = time.time() + limit_s
    while (left := ours_left(d)) and time.time() < t_end:
        print(f"[hook_burst] waiting for {len(left)} samplers/finalizers of the burst", flush=True)
        time.sleep(10.0)
    return len(ours_left(d))


def wait_empty(job: str, limit_s: float) -> None:
    t_end = time.time() + limit_s
    while time.time() < t_end:
        r = tc("squeue", "-h", "-j", job, "-o", "%i %T", check=False)
        if r.returncode == 0 and not r.stdout.strip():
            return
        time.sleep(1.0)
    raise SystemExit(f"hook_burst: job {job} still in the queue after {limit_s:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--python", help="measure the hooks this interpreter's slurm-energy installs (host Slurm only)")
    ap.add_argument("--out", help="also write the table (markdown) to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("hook_burst: run as root (it edits the test cluster's slurm.conf)")
    if subprocess.run(["bash", str(TESTCLUSTER), "status"], capture_output=True).returncode != 0:
        sys.exit("hook_burst: the test cluster is not running: "
                 "flock /var/lock/slurm-energy-cluster.lock bash scripts/testcluster.sh start")
    L = cluster_dir()
    conf, d = L / "etc" / "slurm.conf", L / "hookbench"
    orig = conf.read_text()
    pro = re.search(r"^Prolog=(.*)$", orig, flags=re.M)
    if pro is None:
        sys.exit(f"hook_burst: {conf} has no Prolog= line")
    d.mkdir(exist_ok=True)
    for sub in ("spool", "lib", "log", "textfile"):  # an earlier run's
        shutil.rmtree(d / sub, ignore_errors=True)
    write_hooks(d, Path(pro.group(1)).parent, args.python, bench_site(L, d))
    tc("scancel", "-u", "alice", check=False)
    load = [" ".join(Path("/proc/loadavg").read_text().split()[:3])]
    try:
        set_hooks(conf, str(d / "prolog"), str(d / "epilog"))
        t0 = time.time()
        r = tc("sbatch", "--parsable", f"--array=0-{args.jobs - 1}", "--mem=100M", "--output=/dev/null",
               "--wrap", "sleep 1", user="alice")
        job = r.stdout.strip().split(";")[0]
        print(f"[hook_burst] array job {job}: {args.jobs} tasks submitted", flush=True)
        wait_empty(job, 20 * 60)
        elapsed = time.time() - t0
        time.sleep(2.0)  # the last Epilog's line
    finally:
        conf.write_text(orig)
        tc("scontrol", "reconfigure", check=False)
    left = wait_ours(d, 20 * 60)
    load.append(" ".join(Path("/proc/loadavg").read_text().split()[:3]))
    text = table(*read_times(d), args.jobs, elapsed, " / ".join(load))
    if left:
        text += f"\n{left} samplers/finalizers of the burst still running after 20 min"
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Our sampler and ``slurm-energy run`` side by side with CodeCarbon: CPU per sample, RSS (issue 12).

Contenders, started together in each window (so the machine's noise falls on all of them), on an
idle workload (``sleep``), at each interval:

* ``sampler-cgroup``: the per-job Slurm sampler as the Prolog starts it (same imports, readers from
  :func:`build_readers`, :class:`SlurmJobProbe`, :class:`Sampler`, fsync'd sample file; the
  interim summary is left out: issue 12 item 5 measures it) on a real cgroup v1 job directory
  made here, ``/sys/fs/cgroup/cpuacct/slurm_<node>/uid_0/job_1`` (and memory/), holding the
  workload; needs root and cgroup v1 (else the contender is skipped, said so);
* ``sampler-pid``: the same without a cgroup (proctrack/linuxproc: the job's PIDs by
  SLURM_JOB_ID), with ``--pid-mode``;
* ``run``: ``slurm-energy run --no-report -- sleep N`` (the CLI process, its child not counted);
* ``codecarbon``: CodeCarbon's ``OfflineEmissionsTracker(country_iso_code="USA",
  measure_power_secs=interval, save_to_file=False)`` in its own venv (``--peer-venv``, created
  with ``pip install codecarbon==PIN`` on first use; no network needed by the tracker itself).

Each contender's CPU time is taken ``--warmup`` s after it is ready (its first sample taken) and
again ``--window`` s later. As root, from a cpuacct cgroup of its own (``cpuacct.usage``, ns;
every thread, also ended ones: CodeCarbon starts a ``threading.Timer`` thread per measurement);
else utime + stime of its process (/proc/PID/stat, 10 ms ticks: use long windows). CPU per
sample = delta / (window / interval); % of a core = delta / window; RSS = VmRSS at the end of
the window. Medians over ``--reps``.
``--background N`` starts N extra idle processes first (cost must not grow with them).

Usage: python benchmarks/peer_codecarbon.py [--window 60] [--warmup 60] [--reps 3] [--intervals 1,5]
Every contender at every interval runs at once in each rep: ~2.3 min a rep, ~7 min by default.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEER_PIN = "codecarbon==3.3.2"
TICK = os.sysconf("SC_CLK_TCK")

PEER_CODE = """
import signal, sys, time, logging
from codecarbon import OfflineEmissionsTracker
t = OfflineEmissionsTracker(country_iso_code="USA", measure_power_secs=float(sys.argv[1]),
                            save_to_file=False, log_level="error")
t.start()
print("ready", flush=True)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
while not stop:
    signal.pause()  # returns after the handler ran (time.sleep would resume: PEP 475)
t.stop()
"""


def proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads, not its children), s."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        x = f.read()
    f2 = x[x.rfind(b")") + 2:].split()
    return (int(f2[11]) + int(f2[12])) / TICK


class Meter:
    """CPU time of one process and what it starts: a cpuacct cgroup of its own (ns) when we can
    make one, else /proc/PID/stat of the process itself (10 ms ticks)."""

    def __init__(self, name: str, pid: int):
        self.pid = pid
        self.dir: str | None = f"/sys/fs/cgroup/cpuacct/se-bench-{os.getpid()}-{name}"
        try:
            os.mkdir(self.dir)
            with open(os.path.join(self.dir, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            self.close()
            self.dir = None

    def cpu_s(self) -> float:
        if self.dir is None:
            return proc_cpu_s(self.pid)
        with open(os.path.join(self.dir, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9  # ns -> s

    def close(self) -> None:
        if self.dir:
            try:
                os.rmdir(self.dir)
            except OSError:
                pass


def proc_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peer_python(venv: str) -> str:
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print(f"creating {venv} with {PEER_PIN} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", PEER_PIN], check=True)
    return py


# --- the sampler child (the per-job sampler, as hooks.sampler_main builds it) ---------------------

def child_sampler(interval: float, job_id: str, node: str, cgroup_root: str, samples: str) -> int:
    """The Prolog's sampler (:func:`slurm_energy.slurm.hooks.sampler_main`) without a spool: the
    same module, the light config, readers, probe, fsync'ed writer; no interim summary."""
    from slurm_energy.slurm import hooks
    from slurm_energy.slurm.probe import SlurmJobProbe
    from slurm_energy.sampling.sampler import Sampler, freeze_gc
    from slurm_energy.sampling.samplefile import SampleWriter
    from slurm_energy.sampling.setup import build_readers

    cfg = hooks.load_config([], light=True)
    readers, _ = build_readers(cfg, [], [])
    probe = SlurmJobProbe(job_id, 0, node, cgroup_root=cgroup_root)
    s = Sampler(readers, probe, SampleWriter(samples), interval_s=interval)
    s.install_signal_handlers()
    freeze_gc()  # as sampler_main
    s.run()
    return 0


def make_cgroup(node: str) -> tuple[str, list[str]]:
    """A Slurm-like v1 job cgroup (cpuacct + memory); returns (cpuacct job dir, dirs to remove)."""
    made = []
    for ctl in ("cpuacct", "memory"):
        d = f"/sys/fs/cgroup/{ctl}"
        for part in (f"slurm_{node}", "uid_0", "job_1"):
            d = os.path.join(d, part)
            os.mkdir(d)
            made.append(d)
    return made[2], made


def remove_cgroups(made: list[str]) -> None:
    for d in sorted(made, key=len, reverse=True):
        try:
            os.rmdir(d)
        except OSError as e:
            print(f"cannot remove {d}: {e}", file=sys.stderr)


# --- one window: every contender at every interval at once ---------------------------------------

def start_contenders(a, intervals: list[float], tmp: str, peer_py: str) -> tuple[dict, list, list]:
    """{(name, interval): pid to measure}, processes to stop, cgroup dirs to remove."""
    env = dict(os.environ, PYTHONPATH=REPO)
    procs: list = []
    pids: dict = {}
    made: list = []
    span = str(int(a.warmup + a.window + 120))
    me = [sys.executable, os.path.abspath(__file__)]
    site = os.path.join(tmp, "site.yaml")
    with open(site, "w") as f:
        f.write("cluster_name: bench\n")
    for k, iv in enumerate(intervals):
        if "cgroup" in a.contenders:
            node = f"bench{os.getpid()}x{k}"
            try:
                job_dir, m = make_cgroup(node)
            except OSError as e:
                print(f"sampler-cgroup skipped: cannot make a v1 job cgroup ({e})", file=sys.stderr)
            else:
                made += m
                w = subprocess.Popen(["sleep", span])
                procs.append(w)
                for d in m:
                    if d.endswith("job_1"):
                        with open(os.path.join(d, "cgroup.procs"), "w") as f:
                            f.write(str(w.pid))
                p = subprocess.Popen(me + ["--child", str(iv), "1", node, "/sys/fs/cgroup", f"{tmp}/cg{k}.jsonl"],
                                     env=env)
                procs.append(p)
                pids[("sampler-cgroup", iv)] = (p.pid, f"{tmp}/cg{k}.jsonl")
        if "pid" in a.contenders:
            job = str(999000 + k)
            procs.append(subprocess.Popen(["sleep", span], env=dict(os.environ, SLURM_JOB_ID=job)))
            p = subprocess.Popen(me + ["--child", str(iv), job, "nonode", f"{tmp}/no-cgroup", f"{tmp}/pid{k}.jsonl"],
                                 env=env)
            procs.append(p)
            pids[("sampler-pid", iv)] = (p.pid, f"{tmp}/pid{k}.jsonl")
        if "run" in a.contenders:
            p = subprocess.Popen([sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", site, "--interval",
                                  str(iv), "--no-report", "--out", tmp, "--", "sleep", span], env=env,
                                 stdout=subprocess.DEVNULL)
            procs.append(p)
            pids[("run", iv)] = (p.pid, None)
        p = subprocess.Popen([peer_py, "-c", PEER_CODE, str(iv)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(p)
        pids[("codecarbon", iv)] = (p.pid, p)
    return pids, procs, made


def is_ready(what) -> bool:
    """CodeCarbon printed "ready"; our sampler wrote its first sample; run has its sampler thread."""
    pid, x = what
    if isinstance(x, subprocess.Popen):
        return select.select([x.stdout], [], [], 0)[0] != [] and bool(x.stdout.readline())
    if isinstance(x, str):
        return os.path.exists(x) and os.path.getsize(x) > 0
    return len(os.listdir(f"/proc/{pid}/task")) >= 2


def measure(a, pids: dict, meters: dict) -> dict:
    """{key: (CPU s from ready to end, CPU s in the window, RSS MiB, s from ready to end)}."""
    ready: dict = {}
    deadline = time.monotonic() + 120
    while len(ready) < len(pids) and time.monotonic() < deadline:
        for k, v in pids.items():
            if k not in ready and is_ready(v):
                ready[k] = (time.monotonic(), meters[k].cpu_s())
        time.sleep(0.05)
    if len(ready) < len(pids):
        raise RuntimeError(f"not ready after 120 s: {sorted(set(pids) - set(ready))}")
    time.sleep(a.warmup)
    c0 = {k: m.cpu_s() for k, m in meters.items()}
    time.sleep(a.window)
    t1 = time.monotonic()
    c1 = {k: m.cpu_s() for k, m in meters.items()}
    rss = {k: proc_rss_mib(v[0]) for k, v in pids.items()}
    return {k: (c1[k] - ready[k][1], c1[k] - c0[k], rss[k], t1 - ready[k][0]) for k in pids}


def one_window(a, intervals: list[float], peer_py: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="se-peer-") as tmp:
        pids, procs, made = start_contenders(a, intervals, tmp, peer_py)
        meters = {k: Meter(f"{k[0]}-{k[1]:g}", v[0]) for k, v in pids.items()}
        try:
            res = measure(a, pids, meters)
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in reversed(procs):
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            remove_cgroups(made)
            for m in meters.values():
                m.close()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, default=60.0, help="measured seconds per window")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds after every contender is ready")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--intervals", default="1,5", help="sampling intervals, s (comma-separated)")
    ap.add_argument("--contenders", default="cgroup,pid,run", help="of cgroup,pid,run (CodeCarbon always)")
    ap.add_argument("--background", type=int, default=0, help="extra idle processes on the machine")
    ap.add_argument("--peer-venv", default="/var/cache/slurm-energy/peer-venv")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        iv, job, node, root, samples = a.child
        return child_sampler(float(iv), job, node, root, samples)
    a.contenders = a.contenders.split(",")
    intervals = [float(x) for x in a.intervals.split(",")]
    peer_py = peer_python(a.peer_venv)
    bg = [subprocess.Popen(["sleep", "100000"]) for _ in range(a.background)]
    try:
        res: dict = {}
        for rep in range(a.reps):
            r = one_window(a, intervals, peer_py)
            print(f"rep {rep + 1}: " + ", ".join(f"{k[0]}@{k[1]:g}s {1000 * v[1] / (a.window / k[1]):.3f} ms"
                                                for k, v in r.items()), file=sys.stderr, flush=True)
            for k, v in r.items():
                res.setdefault(k, []).append(v)
    finally:
        for p in bg:
            p.kill()
            p.wait()
    report(a, intervals, res)
    return 0


def report(a, intervals, res) -> None:
    nproc = len([n for n in os.listdir("/proc") if n.isdigit()])
    how = "a cpuacct cgroup per contender (ns)" if os.geteuid() == 0 else "/proc/PID/stat ticks (10 ms)"
    print(f"CPU time by {how}; medians of {a.reps} runs; window: job age {a.warmup:g}-{a.warmup + a.window:g} s "
          f"after the first sample; idle workload; {os.cpu_count()} CPUs, {nproc} processes; peer {PEER_PIN}")
    print("| contender | interval | CPU per sample (window) | % of a core | ratio to CodeCarbon "
          f"| CPU per sample, job age 0-{a.warmup + a.window:g} s | ratio | RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for iv in intervals:
        keys = [k for k in res if k[1] == iv]
        med = {k: (statistics.median(1000 * v[1] / (a.window / iv) for v in res[k]),
                   statistics.median(1000 * v[0] / (v[3] / iv) for v in res[k]),
                   statistics.median(v[2] for v in res[k])) for k in keys}
        peer = med.get(("codecarbon", iv))
        for k in keys:
            w, life, rss = med[k]
            r1 = "" if k[0] == "codecarbon" or not peer else f"{w / peer[0]:.3f}"
            r2 = "" if k[0] == "codecarbon" or not peer else f"{life / peer[1]:.3f}"
            print(f"| {k[0]} | {iv:g} s | {w:.3f} ms | {100 * w / 1000 / iv:.4f} % | {r1} | {life:.3f} ms | {r2} "
                  f"| {rss:.1f} MiB |")


if __name__ == "__main__":
    raise SystemExit(main())

"""Our sampler and ``slurm-energy run`` side by side with CodeCarbon: CPU per sample, RSS.

Contenders, started together in each window (so the machine's noise falls on all of them), on an
idle workload (``sleep``), at each interval:

* ``sampler-cgroup``: the per-job Slurm sampler as the Prolog starts it:
  :func:`slurm_energy.slurm.sampler.main.sampler_main` on a job spool made here, with a site config of
  its own (spool, log dir, SQLite store), so everything a real sampler does is counted: its
  readers, probe and fsync'd sample file **and its interim flushes** (every ``sampling.interim_s``,
  60 s, the first after 2 intervals; run by its forked interim worker, whose CPU is counted with
  the sampler's: it is read by PID, a child of the sampler), on a fake cgroup v1 job directory of
  plain files in the window's temp dir (:func:`make_cgroup`; the host's cgroups are never touched)
  listing the workload's PID. ``--no-interim``: the sampler loop alone (the README's table before
  issue 29, which left the interim worker out);
* ``sampler-pid``: the same without a cgroup (proctrack/linuxproc: the job's PIDs as the
  descendants of its step daemon, here a process titled ``slurmstepd: [<job>.batch]``);
* ``run``: ``slurm-energy run --no-report -- sleep N`` (the CLI process, its child not counted);
* ``codecarbon``: CodeCarbon's ``OfflineEmissionsTracker(country_iso_code="USA",
  measure_power_secs=interval, save_to_file=False)`` in its own venv (``--peer-venv``, created
  with ``pip install codecarbon==PIN`` on first use; no network needed by the tracker itself).

Each contender's CPU time is taken at the job ages of ``--windows`` (default ``12-42,55-85``: s
after it is ready, its first sample taken): CPU per sample in each window, from /proc only
(:class:`Meter`: the process and every live descendant, threads' ``schedstat`` ns, ``stat`` ticks
where threads ended in the window, reaped children's cutime + cstime). CPU
per sample = delta / (window / interval); RSS = VmRSS at the end. Medians over ``--reps``.
``--background N`` starts N extra idle processes first (cost must not grow with them).
``--tree before=/work/main,after=.``: our contenders once per source tree (PYTHONPATH), all in
the same windows (before and after a change, interleaved).

Usage: python benchmarks/peer_codecarbon.py [--windows 12-42,55-85] [--reps 3] [--intervals 1,5]
Every contender at every interval runs at once in each rep: ~1.7 min a rep, ~5 min by default.
"""

from __future__ import annotations

import argparse
import functools
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


def _stat_fields(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/stat", "rb") as f:
        x = f.read()
    return x[x.rfind(b")") + 2:].split()


def _descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it (by PPid, one walk of /proc)."""
    parent: dict[int, int] = {}
    for n in os.listdir("/proc"):
        if n.isdigit():
            try:
                parent[int(n)] = int(_stat_fields(int(n))[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def _proc_cpu(pid: int) -> tuple[float, float, float]:
    """(utime + stime of every thread, ended ones too, s [ticks]; the live threads' run time from
    /proc/PID/task/TID/schedstat, s [ns]; cutime + cstime, reaped children, s [ticks])."""
    f = _stat_fields(pid)
    ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                ns += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return (int(f[11]) + int(f[12])) / TICK, ns / 1e9, (int(f[13]) + int(f[14])) / TICK


class Meter:
    """CPU time of one contender's process tree, from /proc only (no cgroup made anywhere): at each
    mark, for the contender and every live descendant (our interim worker: read by PID while it
    lives), ``/proc/PID/stat`` utime + stime (all threads, ended ones too; 10 ms ticks) and the
    live threads' ``schedstat`` run time (ns), plus the contender's cutime + cstime (children it
    reaped). A process's delta is its ns delta, unless its ticks delta exceeds that by more than
    2 ticks (threads ended in the window, e.g. CodeCarbon's per-measurement Timer threads): then
    the ticks delta. A process that ends in the window is counted through its parent's cutime."""

    def __init__(self, name: str, pid: int, skip: frozenset[int] = frozenset()):
        self.name, self.pid, self.skip = name, pid, skip
        self.ticks_used = False

    def snap(self) -> dict:
        out: dict = {}
        for p in _descendants(self.pid):
            if p in self.skip:
                continue
            try:
                out[p] = _proc_cpu(p)
            except OSError:
                pass
        return out

    def delta(self, a: dict, b: dict) -> float:
        tot = 0.0
        for p, (t1, n1, c1) in b.items():
            t0, n0, c0 = a.get(p, (0.0, 0.0, 0.0))
            dt, dn = t1 - t0, n1 - n0
            if dt > dn + 2.0 / TICK:
                tot += dt
                self.ticks_used = True
            else:
                tot += dn
            if p == self.pid:
                tot += c1 - c0
        return tot

    def close(self) -> None:
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


# --- the sampler child (the per-job sampler, as sampler.main.sampler_main builds it) ---------------------

def child_sampler(interval: float, job: str, node: str, tmp: str, interim: bool) -> int:
    """The Prolog's sampler, :func:`slurm_energy.slurm.sampler.main.sampler_main`, on a job spool of its
    own under ``tmp`` (context as a Prolog writes it; site config with that spool, log dir and a
    SQLite store; ``interim`` False: interim flushes off)."""
    import json
    import signal as sg

    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.sampler import main as sampler_main_mod
    from slurm_energy.slurm.sampler import probe as probe_mod

    real_probe = probe_mod.SlurmJobProbe
    if node != "nonode":  # the cgroup contender: its fake v1 job directory (make_cgroup)
        probe_mod.SlurmJobProbe = functools.partial(real_probe, cgroup_root=f"{tmp}/cgroup")  # type: ignore[misc]
    if not interim:  # the loop alone: no interim callback (as the table before issue 29)
        sampler_main_mod.Interim = lambda spool, ctx: None  # type: ignore[assignment,misc]
    early_stop: list[int] = []
    sg.signal(sg.SIGTERM, lambda *_: early_stop.append(1))
    spool = Attempt(f"{tmp}/spool", job, 0, node).ensure()
    ctx = JobContext(job_id=job, uid=0, gid=0, node=node, nodelist=node, prolog_time=time.time(), cpus_per_node="1")
    with open(spool.context, "w") as f:
        f.write(ctx.to_json())
    print(json.dumps({"samples": spool.samples}), flush=True)
    return sampler_main_mod.sampler_main(spool.dir, node, early_stop)


def make_cgroup(root: str, node: str, pid: int) -> None:
    """A fake Slurm cgroup v1 job directory of plain files under ``root`` (never the host's
    /sys/fs/cgroup): ``cpuacct/slurm_<node>/uid_0/job_1`` and ``memory/...``, the layout of Slurm
    22.05's task/cgroup v1 with ``--enable-multiple-slurmd`` (Debian's build), as
    :func:`slurm_energy.slurm.sampler.cgroup.find_job_cgroup` reads it and tests/slurm/test_cgroup.py's
    ``test_v1_multiple_slurmd_layout`` builds it (file names and value formats: one integer and a
    newline, ns for ``cpuacct.usage``, bytes for ``memory.*``; the values are that test's). The
    sampler keeps one descriptor per file and ``pread``s it, as on cgroupfs, so a read costs a
    syscall on tmpfs instead of cgroupfs (cgroupfs's ``cpuacct.usage`` sums per-CPU counters:
    a little more)."""
    files = {
        ("cpuacct", "cpuacct.usage"): "12500000000\n",
        ("cpuacct", "step_batch/cgroup.procs"): f"{pid}\n",
        ("cpuacct", "cgroup.procs"): "",
        ("memory", "memory.usage_in_bytes"): "524288000\n",
        ("memory", "memory.max_usage_in_bytes"): "629145600\n",
        ("memory", "step_batch/cgroup.procs"): f"{pid}\n",
    }
    for (ctl, name), text in files.items():
        path = os.path.join(root, ctl, f"slurm_{node}", "uid_0", "job_1", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


# --- one window: every contender at every interval at once ---------------------------------------

def start_contenders(a, intervals: list[float], tmp: str, peer_py: str) -> tuple[dict, list, list]:
    """{(name, interval): (pid to measure, readiness)}, processes to stop, cgroup dirs to remove."""
    procs: list = []
    pids: dict = {}
    made: list = []  # nothing: no cgroup is made (kept for the caller's shape)
    span = str(int(a.end + 120))
    me = [sys.executable, os.path.abspath(__file__)]
    for label, tree in a.trees:
        env = dict(os.environ, PYTHONPATH=tree)
        pre = f"{label}:" if label else ""
        for k, iv in enumerate(intervals):
            d = f"{tmp}/{label or 'x'}{k}"
            os.makedirs(f"{d}/prom")  # node_exporter's textfile dir (the interim's Prometheus sink)
            site = os.path.join(d, "site.yaml")
            with open(site, "w") as f:
                f.write(f"cluster_name: bench\npaths:\n  spool_dir: {d}/spool\n  log_dir: {d}/log\n"
                        f"  store_url: sqlite:///{d}/jobs.db\nsampling:\n  interval_s: {iv:g}\n"
                        f"outputs:\n  prometheus:\n    textfile_dir: {d}/prom\n")
            # a marks root of its own: the finalizers these samplers start sweep theirs, never the
            # host's (a test cluster's running jobs keep their phase marks there)
            os.makedirs(f"{d}/marks")
            env = dict(env, SLURM_ENERGY_MARKS_DIR=f"{d}/marks")
            cenv = dict(env, SLURM_ENERGY_CONFIG=site)
            interim = "interim" if a.interim else "none"
            if "cgroup" in a.contenders:
                node = f"bench{os.getpid()}{label}x{k}"
                w = subprocess.Popen(["sleep", span])
                procs.append(w)
                make_cgroup(f"{d}/cgroup", node, w.pid)
                p = subprocess.Popen(me + ["--child", str(iv), "1", node, d, interim], env=cenv,
                                     stdout=subprocess.PIPE, cwd=tree)
                procs.append(p)
                pids[(pre + "sampler-cgroup", iv)] = (p.pid, p)
            if "pid" in a.contenders:
                # the job as proctrack/linuxproc leaves it: a process titled as Slurm's step daemon
                # (comm "slurmstepd", cmdline "slurmstepd: [<job>.batch]", real uid 0) and the
                # workload its child: the sampler's StepdScanner finds a job's PIDs only so
                job = str(999000 + k + 100 * len(pids))
                stepd = os.path.join(d, "slurmstepd")
                os.symlink("/bin/bash", stepd)
                procs.append(subprocess.Popen([f"slurmstepd: [{job}.batch]", "-c", f"sleep {span}; :"],
                                              executable=stepd, env=dict(os.environ, SLURM_JOB_ID=job)))
                p = subprocess.Popen(me + ["--child", str(iv), job, "nonode", d, interim], env=cenv,
                                     stdout=subprocess.PIPE, cwd=tree)
                procs.append(p)
                pids[(pre + "sampler-pid", iv)] = (p.pid, p)
            if "run" in a.contenders:
                p = subprocess.Popen([sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", site,
                                      "--interval", str(iv), "--no-report", "--out", d, "--", "sleep", span],
                                     env=env, stdout=subprocess.DEVNULL, cwd=tree)
                procs.append(p)
                pids[(pre + "run", iv)] = (p.pid, None)
    for iv in intervals:
        p = subprocess.Popen([peer_py, "-c", PEER_CODE, str(iv)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(p)
        pids[("codecarbon", iv)] = (p.pid, p)
    return pids, procs, made


_SAMPLES: dict = {}  # our sampler child's pid -> its sample file (from its first line)


def is_ready(what) -> bool:
    """CodeCarbon printed "ready"; our sampler wrote its first sample; run has its sampler thread."""
    import json

    pid, x = what
    if isinstance(x, subprocess.Popen) and pid not in _SAMPLES:
        if select.select([x.stdout], [], [], 0)[0] == []:
            return False
        line = x.stdout.readline()
        if line.startswith(b"{"):
            _SAMPLES[pid] = json.loads(line)["samples"]
            return False
        return bool(line)  # CodeCarbon's "ready"
    if pid in _SAMPLES:
        return os.path.exists(_SAMPLES[pid]) and os.path.getsize(_SAMPLES[pid]) > 0
    return len(os.listdir(f"/proc/{pid}/task")) >= 2


def measure(a, pids: dict, meters: dict) -> dict:
    """{key: ([CPU s in each window], RSS MiB)}; windows in s after each contender was ready."""
    ready: dict = {}
    deadline = time.monotonic() + 120
    while len(ready) < len(pids) and time.monotonic() < deadline:
        for k, v in pids.items():
            if k not in ready and is_ready(v):
                ready[k] = time.monotonic()
        time.sleep(0.02)
    if len(ready) < len(pids):
        raise RuntimeError(f"not ready after 120 s: {sorted(set(pids) - set(ready))}")
    marks = sorted({x for w in a.windows for x in w})
    at: dict = {k: {} for k in pids}
    todo = sorted((ready[k] + m, k, m) for k in pids for m in marks)
    for t, k, m in todo:
        time.sleep(max(0.0, t - time.monotonic()))
        at[k][m] = meters[k].snap()
    rss = {k: proc_rss_mib(v[0]) for k, v in pids.items()}
    return {k: ([meters[k].delta(at[k][w0], at[k][w1]) for w0, w1 in a.windows], rss[k]) for k in pids}


def one_window(a, intervals: list[float], peer_py: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="se-peer-") as tmp:
        pids, procs, _made = start_contenders(a, intervals, tmp, peer_py)
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
            for m in meters.values():
                m.close()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="12-42,55-85", help="job-age windows, s after ready (a-b,c-d)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--intervals", default="1,5", help="sampling intervals, s (comma-separated)")
    ap.add_argument("--contenders", default="cgroup,pid,run", help="of cgroup,pid,run (CodeCarbon always)")
    ap.add_argument("--tree", default="", help="label=source tree,...: our contenders once per tree")
    ap.add_argument("--no-interim", dest="interim", action="store_false", help="samplers without interim flushes")
    ap.add_argument("--background", type=int, default=0, help="extra idle processes on the machine")
    ap.add_argument("--peer-venv", default="/var/cache/slurm-energy/peer-venv")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        iv, job, node, tmp, interim = a.child
        return child_sampler(float(iv), job, node, tmp, interim == "interim")
    a.contenders = a.contenders.split(",")
    a.windows = [tuple(float(x) for x in w.split("-")) for w in a.windows.split(",")]
    a.end = max(w[1] for w in a.windows)
    a.trees = [(t.partition("=")[0], os.path.abspath(t.partition("=")[2])) for t in a.tree.split(",") if t] or [("", REPO)]
    intervals = [float(x) for x in a.intervals.split(",")]
    peer_py = peer_python(a.peer_venv)
    bg = [subprocess.Popen(["sleep", "100000"]) for _ in range(a.background)]
    try:
        res: dict = {}
        for rep in range(a.reps):
            r = one_window(a, intervals, peer_py)
            print(f"rep {rep + 1}: " + ", ".join(
                f"{k[0]}@{k[1]:g}s " + "/".join(f"{1000 * c / ((w[1] - w[0]) / k[1]):.3f}" for c, w in zip(v[0], a.windows))
                + " ms" for k, v in r.items()), file=sys.stderr, flush=True)
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
    how = "/proc of each contender's process tree (schedstat ns; stat ticks where threads ended)"
    wins = [f"{w[0]:g}-{w[1]:g} s" for w in a.windows]
    print(f"CPU time by {how}; medians of {a.reps} runs; windows: job age {', '.join(wins)} after the first "
          f"sample; interim flushes {'on' if a.interim else 'off'}; idle workload; {os.cpu_count()} CPUs, "
          f"{nproc} processes; peer {PEER_PIN}")
    print("| contender | interval | " + " | ".join(f"CPU per sample, age {w} | ratio" for w in wins) + " | RSS |")
    print("|---|---|" + "---|---|" * len(wins) + "---|")
    for iv in intervals:
        keys = [k for k in res if k[1] == iv]
        med = {k: ([statistics.median(1000 * v[0][j] / ((w[1] - w[0]) / iv) for v in res[k])
                    for j, w in enumerate(a.windows)], statistics.median(v[1] for v in res[k])) for k in keys}
        peer = med.get(("codecarbon", iv))
        for k in sorted(keys, key=lambda k: (k[0] == "codecarbon", k[0].partition(":")[2], k[0])):
            cells = []
            for j in range(len(a.windows)):
                c = med[k][0][j]
                r = "" if k[0] == "codecarbon" or not peer else f"{c / peer[0][j]:.2f}"
                cells.append(f"{c:.3f} ms | {r}")
            print(f"| {k[0]} | {iv:g} s | " + " | ".join(cells) + f" | {med[k][1]:.1f} MiB |")


if __name__ == "__main__":
    raise SystemExit(main())

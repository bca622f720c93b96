"""Per-job samplers against one node sampler, side by side: memory (PSS, RSS), CPU, per-job energy.

For each N (``--jobs``, default 1,16,64,128) both contenders sample the same N dummy jobs at once,
on the same fake load, in one window:

* ``per-job``: N processes of :func:`slurm_energy.slurm.sampler.main.sampler_main`, each as the
  Prolog starts it (``sampling.sampler: job``, today's default), each forking its interim worker
  at its first flush (store: SQLite; Prometheus textfile), as in benchmarks/peer_codecarbon.py;
* ``node``: one :mod:`slurm_energy.slurm.sampler.node` process (``sampling.sampler: node``), the N
  jobs joined by their join files as N Prologs leave them, with its one interim worker.

The jobs: N ``sleep`` processes, each with a fake Slurm cgroup v1 job directory of plain files
(the layout of Slurm 22.05's task/cgroup v1 with ``--enable-multiple-slurmd``, as
tests/slurm/test_cgroup.py's capture: ``cpuacct/slurm_<node>/uid_0/job_<id>/cpuacct.usage`` in ns,
``memory/.../memory.usage_in_bytes`` in bytes), never the host's cgroups. The load: a fake powercap
tree (tests/fakes/powercap.py, the kernel's layout) whose package counter this process advances at
``--watts`` W, and each job's ``cpuacct.usage`` at (1 + k mod 4) x 10 ms of CPU a second (job k):
both contenders read the same files. The node's busy time is the host's real /proc/stat.

Measured over ``--window`` s (default 60) once every job has rows and the first interim flushes
are done (``--settle``, default 25 s): CPU (user + system of the sampler processes and their
interim workers, live and reaped) as % of one core; PSS and RSS summed over the same processes at
the window's end; marginal PSS per job (from the N's around it). Per-job energy: each job's CPU
package energy from its own sample file, sum over intervals of the package's delta x the job's
CPU share (:func:`slurm_energy.accounting.attribution.cpu_shares`, the accounting's one share),
over the rows inside the window; the per-job and node figures of one job are compared against
one interval's energy of that job (the one-interval rule: their rows are at different instants).
Also checked: in every node-sampler interval, the N jobs' shares add up to at most 1 (the energy
shared out at most the package's delta).

Usage: python benchmarks/node_sampler.py [--jobs 1,16,64,128] [--window 60] [--interval 5]
The machine is shared: ~2.5 min per N. A contender at an N whose memory would not fit
(``--max-gb``, default 8 GB of per-job PSS estimated from the previous N) is skipped, and the
table says so.
"""

from __future__ import annotations

import argparse
import functools
import glob
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NODE = "bench"
sys.path[:0] = [REPO]  # this checkout's package, and the tests' fakes (tests.fakes)


def child(argv: list[str]) -> int:
    """``--child job DIR CGROOT`` / ``--child node SPOOL CGROOT``: a contender's process."""
    from slurm_energy.slurm.sampler import probe as probe_mod

    what, where, cgroot = argv
    setattr(probe_mod, "SlurmJobProbe", functools.partial(probe_mod.SlurmJobProbe, cgroup_root=cgroot))  # noqa: B010
    if what == "job":
        from slurm_energy.slurm.sampler.main import sampler_main

        early: list[int] = []
        signal.signal(signal.SIGTERM, lambda *_: early.append(1))
        return sampler_main(where, NODE, early)
    from slurm_energy.slurm.sampler.node import main

    return main([where, NODE])


def make_job(cgroot: str, job: str, pid: int) -> str:
    """The fake v1 job directory of ``job`` (see the module docstring); returns its cpuacct.usage."""
    base = ("slurm_" + NODE, "uid_0", f"job_{job}")
    files = {("cpuacct", "cpuacct.usage"): "0\n", ("cpuacct", "step_batch/cgroup.procs"): f"{pid}\n",
             ("cpuacct", "cgroup.procs"): "", ("memory", "memory.usage_in_bytes"): "524288000\n",
             ("memory", "memory.max_usage_in_bytes"): "629145600\n", ("memory", "step_batch/cgroup.procs"): f"{pid}\n"}
    for (ctl, name), text in files.items():
        p = os.path.join(cgroot, ctl, *base, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    return os.path.join(cgroot, "cpuacct", *base, "cpuacct.usage")


def site(d: str, mode: str, interval: float, rapl_root: str) -> str:
    os.makedirs(f"{d}/prom", exist_ok=True)
    p = os.path.join(d, "site.yaml")
    with open(p, "w") as f:
        f.write(f"cluster_name: bench\npaths:\n  spool_dir: {d}/spool\n  log_dir: {d}/log\n"
                f"  store_url: sqlite:///{d}/jobs.db\nsampling:\n  interval_s: {interval:g}\n  sampler: {mode}\n"
                f"hardware:\n  rapl_root: {rapl_root}\nnode_meter:\n  source: none\n"
                f"outputs:\n  prometheus:\n    textfile_dir: {d}/prom\n")
    return p


class Load(threading.Thread):
    """The fake load: the package counter at ``watts`` W, job k's CPU at (1 + k mod 4) x 10 ms/s."""

    def __init__(self, rapl_root: str, usage_files: list[str], watts: float):
        super().__init__(daemon=True)
        self.root, self.files, self.watts = rapl_root, usage_files, watts
        self.stop = threading.Event()

    def run(self) -> None:
        from tests.fakes.powercap import zone_dir

        t0 = time.time()
        fds = [os.open(p, os.O_WRONLY) for p in self.files]
        pkg = os.open(os.path.join(zone_dir(self.root, "intel-rapl:0"), "energy_uj"), os.O_WRONLY)
        fds.append(pkg)
        try:  # every file in place, fixed width (as sysfs and cgroupfs change: a read never sees it empty)
            while not self.stop.wait(0.5):
                el = time.time() - t0
                os.pwrite(pkg, f"{int(self.watts * el * 1e6):>20d}\n".encode(), 0)
                for k, fd in enumerate(fds[:-1]):
                    os.pwrite(fd, f"{int((1 + k % 4) * 0.01 * el * 1e9):>20d}\n".encode(), 0)
        finally:
            for fd in fds:
                os.close(fd)


def tree(pids: list[int]) -> list:
    import psutil

    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            out += [p] + p.children(recursive=True)
        except psutil.Error:
            pass
    return out


def cpu_s(pids: list[int]) -> float:
    import psutil

    tot = 0.0
    for p in tree(pids):
        try:
            c = p.cpu_times()
            tot += c.user + c.system + (c.children_user + c.children_system if p.pid in pids else 0.0)
        except psutil.Error:
            pass
    return tot


def memory_mb(pids: list[int]) -> tuple[float, float, int]:
    import psutil

    pss = rss = 0.0
    n = 0
    for p in tree(pids):
        try:
            m = p.memory_full_info()
            pss += m.pss / 1e6
            rss += m.rss / 1e6
            n += 1
        except psutil.Error:
            pass
    return pss, rss, n


def energies(samples: str, t0: float, t1: float) -> tuple[float, float]:
    """(the job's package energy J between t0 and t1, its cumulative energy from its rows
    interpolated linearly at both ends; its mean energy per interval J)."""
    import numpy as np

    from slurm_energy.accounting.attribution import cpu_shares
    from slurm_energy.sampling.samplefile import read_sample_table

    tab = read_sample_table(samples)
    rows = [i for i in range(len(tab)) if tab.job_present[i] and tab.kind[i] in ("start", "sample")
            and tab.job_cpu[i] is not None]
    dev = tab.device("intel-rapl:0")
    at = dict(zip(dev.rows, dev.vals["energy_uj"]))
    ts, cum = [tab.t[rows[0]]] if rows else [], [0.0]
    busy = tab.node["cpu_busy_s"]
    rows = [i for i in rows if busy[i] is not None and at.get(i) is not None]  # a failed reading: skipped
    for a, b in itertools.pairwise(rows):
        jc = (tab.job_cpu[b] or 0.0) - (tab.job_cpu[a] or 0.0)
        nb = busy[b] - busy[a]
        s = cpu_shares(np.array([jc]), np.array([nb]))[0]
        cum.append(cum[-1] + (float(s) * (at[b] - at[a]) / 1e6 if s == s else 0.0))
        ts.append(tab.t[b])
    if len(ts) < 2:
        return float("nan"), float("nan")
    e = float(np.interp(t1, ts, cum) - np.interp(t0, ts, cum))
    return e, cum[-1] / (len(ts) - 1)


def node_instants(spool: str, t0: float, t1: float) -> tuple[float, float]:
    """(the fraction of the node sampler's ticks in [t0, t1] at which every job's row carries the
    same node reading -- one time, one /proc/stat busy time, one package counter --, the jobs'
    CPU-time delta over the node's busy delta, largest interval). The second is at most 1 on a real
    node (a job's CPU time is part of the node's busy time); here the jobs' CPU times are the fake
    load's (module docstring), so it says how much load was faked, not a property of the sampler."""
    from collections import defaultdict

    from slurm_energy.sampling.samplefile import read_sample_table

    seen: dict[float, set[tuple[object, object]]] = defaultdict(set)
    cpu: dict[float, float] = defaultdict(float)
    busy: dict[float, float] = {}
    for p in glob.glob(f"{spool}/jobs/*/samples-{NODE}.jsonl"):
        tab = read_sample_table(p)
        pkg = dict(zip(tab.device("intel-rapl:0").rows, tab.device("intel-rapl:0").vals["energy_uj"], strict=False))
        rows = [i for i in range(len(tab)) if t0 <= tab.t[i] <= t1 and tab.kind[i] == "sample"
                and tab.node["cpu_busy_s"][i] is not None and tab.job_cpu[i] is not None]
        for i in rows:
            seen[tab.t[i]].add((tab.node["cpu_busy_s"][i], pkg.get(i)))
        for a, b in itertools.pairwise(rows):
            cpu[tab.t[b]] += (tab.job_cpu[b] or 0.0) - (tab.job_cpu[a] or 0.0)
            busy[tab.t[b]] = tab.node["cpu_busy_s"][b] - tab.node["cpu_busy_s"][a]
    same = sum(1 for v in seen.values() if len(v) == 1) / len(seen) if seen else float("nan")
    ratio = max((cpu[t] / busy[t] for t in cpu if busy.get(t)), default=float("nan"))
    return same, ratio


def one_n(n: int, a: argparse.Namespace, run_job: bool) -> dict:
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.context import JobContext
    from tests.fakes.powercap import Zone, build_tree

    out: dict = {"n": n}
    with tempfile.TemporaryDirectory(prefix="se-nodesampler-") as tmp:
        if a.keep:
            tmp = tempfile.mkdtemp(prefix=f"se-nodesampler-{n}-", dir=a.keep)
        rapl = build_tree(f"{tmp}/sys", [Zone("intel-rapl:0", "package-0", energy_uj=0,
                                              max_power_uw={0: 205_000_000})])
        cgroot = f"{tmp}/cgroup"
        sleepers = [subprocess.Popen(["sleep", str(int(a.settle + a.window + 600))]) for _ in range(n)]
        usage = [make_job(cgroot, str(100 + k), s.pid) for k, s in enumerate(sleepers)]
        load = Load(rapl, usage, a.watts)
        load.start()
        modes = (["job"] if run_job and a.only != "node" else []) + ["node"]
        run_job = "job" in modes
        procs: dict[str, list[subprocess.Popen]] = {m: [] for m in modes}
        spools: dict[str, str] = {}
        me = [sys.executable, os.path.abspath(__file__), "--child"]
        try:
            for m in modes:
                d = f"{tmp}/{m}"
                env = dict(os.environ, SLURM_ENERGY_CONFIG=site(d, m, a.interval, rapl), PYTHONPATH=REPO)
                spools[m] = f"{d}/spool"
                dirs = []
                for k in range(n):
                    sp = Attempt(spools[m], str(100 + k), 0, NODE).ensure()
                    ctx = JobContext(job_id=str(100 + k), uid=0, gid=0, node=NODE, nodelist=NODE,
                                     prolog_time=time.time(), cpus_per_node="1")
                    with open(sp.context, "w") as f:
                        f.write(ctx.to_json())
                    dirs.append(sp.dir)
                if m == "node":
                    from slurm_energy.slurm import sampler_join as sj

                    for dd in dirs:
                        with open(sj.job_path(dd, sj.JOIN, NODE), "w") as f:
                            f.write(json.dumps({"t": time.time()}))
                    procs[m].append(subprocess.Popen(me + ["node", spools[m], cgroot], env=env, cwd=REPO,
                                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
                else:
                    for dd in dirs:
                        procs[m].append(subprocess.Popen(me + ["job", dd, cgroot], env=env, cwd=REPO,
                                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
            deadline = time.time() + 300
            while time.time() < deadline:  # every job has a row in both contenders
                if all(os.path.exists(f) and os.path.getsize(f) > 0
                       for m in modes for f in glob.glob(f"{spools[m]}/jobs/*/samples-{NODE}.jsonl")) and \
                        all(len(glob.glob(f"{spools[m]}/jobs/*/samples-{NODE}.jsonl")) == n for m in modes):
                    break
                time.sleep(0.5)
            ready = time.time()
            time.sleep(a.settle)
            pids = {m: [p.pid for p in procs[m]] for m in modes}
            c0, t0 = {m: cpu_s(pids[m]) for m in modes}, time.time()
            time.sleep(a.window)
            c1, t1 = {m: cpu_s(pids[m]) for m in modes}, time.time()
            for m in modes:
                pss, rss, nproc = memory_mb(pids[m])
                out[m] = {"cpu_pct": 100 * (c1[m] - c0[m]) / (t1 - t0), "pss_mb": pss, "rss_mb": rss,
                          "procs": nproc, "ready_s": ready}
        finally:
            for m in modes:
                for p in procs[m]:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
            for m in modes:
                for p in procs[m]:
                    try:
                        p.wait(60)
                    except subprocess.TimeoutExpired:
                        p.kill()
            load.stop.set()
            for s in sleepers:
                s.kill()
                s.wait()
        if run_job:
            worst = 0.0
            tot = {"job": 0.0, "node": 0.0}
            for k in range(n):
                ej, per = energies(f"{spools['job']}/jobs/{100 + k}-r0/samples-{NODE}.jsonl", t0, t1)
                en, _ = energies(f"{spools['node']}/jobs/{100 + k}-r0/samples-{NODE}.jsonl", t0, t1)
                out.setdefault("per_job_energy", []).append((round(ej, 3), round(en, 3)))
                tot["job"] += ej
                tot["node"] += en
                if per and per == per:
                    worst = max(worst, abs(ej - en) / per)
            out["energy"] = {"job_j": tot["job"], "node_j": tot["node"], "worst_diff_intervals": worst}
        out["same_instants"], out["fake_cpu_over_busy"] = node_instants(spools["node"], t0, t1)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--jobs", default="1,16,64,128")
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--settle", type=float, default=25.0)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--watts", type=float, default=100.0)
    ap.add_argument("--max-gb", type=float, default=8.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", choices=["", "node"], help="node: the node sampler alone (a long window)")
    ap.add_argument("--keep", default="", help="keep each N's spools and logs under this directory")
    a = ap.parse_args(argv)
    rows = []
    per_job_pss = None
    for n in [int(x) for x in a.jobs.split(",")]:
        run_job = per_job_pss is None or per_job_pss * n / 1e3 <= a.max_gb
        r = one_n(n, a, run_job)
        if "job" in r:
            per_job_pss = r["job"]["pss_mb"] / n
        rows.append(r)
        print(json.dumps(r), flush=True)
    print(f"\n{'jobs':>5} | {'per-job PSS (RSS) MB':>22} | {'node PSS (RSS) MB':>18} | {'PSS ratio':>9} | "
          f"{'per-job CPU %':>13} | {'node CPU %':>10} | {'CPU ratio':>9} | {'energy diff':>11} | one instant")
    prev = None
    for r in rows:
        j, nd = r.get("job"), r["node"]
        js = f"{j['pss_mb']:.0f} ({j['rss_mb']:.0f})" if j else "skipped"
        ratio = f"{j['pss_mb'] / nd['pss_mb']:.1f}x" if j else "-"
        cr = f"{j['cpu_pct'] / nd['cpu_pct']:.1f}x" if j and nd["cpu_pct"] > 0 else "-"
        ed = f"{r['energy']['worst_diff_intervals']:.2f} iv" if "energy" in r else "-"
        print(f"{r['n']:>5} | {js:>22} | {nd['pss_mb']:>8.0f} ({nd['rss_mb']:.0f}) | {ratio:>9} | "
              f"{(j['cpu_pct'] if j else float('nan')):>13.2f} | {nd['cpu_pct']:>10.3f} | {cr:>9} | {ed:>11} | "
              f"{r['same_instants']:.0%}")
        if prev is not None:
            print(f"      marginal node-sampler PSS per job {prev['n']}->{r['n']}: "
                  f"{(nd['pss_mb'] - prev['node']['pss_mb']) / (r['n'] - prev['n']):.2f} MB")
        prev = r
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A job's end on the test cluster (issue 24): how soon each record is final, and what the job's
end costs the node in CPU. Run as root, holding the cluster lock, the cluster started with the
installation to measure (scripts/setup.sh installs this checkout):

    flock /var/lock/slurm-energy-cluster.lock /opt/slurm-energy/venv/bin/python benchmarks/job_end_burst.py \\
        --phase cpu|faults [--bursts N] [--gap S] [--out FILE]

``--phase faults`` (~9 min with the defaults: the burst of issue 24): the jobs of
``benchmarks/fault_run.py`` (CPU loops, sleeps, exit 1, scancel, a time limit, arrays of 20, 2-node
jobs, unwritable work dirs; as alice and bob) in ``--bursts`` waves ``--gap`` s apart, with its
faults (site.yaml unparsable for 60 s, the spool full for 90 s and the fallback spool for 30 s of
those, the spool read-only for 40 s; a sampler SIGKILLed every 15 s and a finalizer -- any process
finalizing jobs: ``finalize``, ``finalize-env``, ``finalize-queue`` -- every 10 s, and a single-job
or spool-less finalizer, ``finalize`` or ``finalize-env``, every 2 s when one runs), *without*
``collect``. The store is polled every 2 s: a task's record is final when its status is no longer
``running``; its lag is that moment less Slurm's End (sacct). Once every task has a final record, or
150 s after the last job ended, it prints the lags (p50 / p95 / max; target p95 <= 60 s, max <= 120 s),
then runs ``slurm-energy collect --older-than 0`` once and prints what it found to do (target:
nothing), the tasks without a record, duplicates (more than one record of one task), queue entries
and processes left, and the hooks' wall time (hooks.log's ``wall_s``; budget 2 s).

``--phase cpu`` (~4 min): the same kinds of jobs, no faults, under benchmarks/hook_burst.py's
dispatcher: even job ids run this installation's hooks, odd ones the no-op hook (the same script
with ``/bin/true`` for Python), in the same bursts, with a site config whose spools, store and logs
are under ``$L/endbench``. The product's CPU for a job: its Prolog and Epilog (bash ``times`` around
the hook script: what it and its children used), its sampler (its own ``os.times`` with its interim
workers, logged at exit), its share of the node's finalizer (each ``finalized`` line's CPU, plus the
runners' start-up and lingering -- their per-process totals in the queue's ``.runner.log`` -- shared
out evenly), and any single-job finalizer. Printed: the median and the mean over jobs of ours less a
no-op job's hooks (target median <= 0.3 CPU-s; the mean is the difference in the node's CPU time
divided by the jobs), the split, and the ratio ours / no-op of the CPU a job's end costs the node
(what Slurm's own slurmd/slurmstepd spend is the same for both and not counted).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fault_run as fr  # noqa: E402
import hook_burst as hb  # noqa: E402

#: what our detached sampler and finalizers run as (slurm_energy.slurm.detach.DETACHED_MODULE), and their
#: names before the moves (a tree from before them, compared in the same run)

L, VENV = fr.L, fr.VENV
KINDS = ("finalize", "finalize-env", "finalize-queue")


def say(msg: str) -> None:
    fr.say(msg)


def pct(xs: list[float], q: float) -> float:
    return fr.pct(xs, q)


def our_procs(kinds: tuple[str, ...], spools: tuple[Path, ...]) -> list[int]:
    """PIDs of this cluster's samplers (per job or per node) and finalizers of ``kinds``: fault_run's one rule."""
    return fr.procs_of(kinds, spools)


def kill_one(kinds: tuple[str, ...], label: str, counts: collections.Counter) -> None:
    import random

    pids = our_procs(kinds, (fr.SPOOL, fr.SPOOL2))
    if pids:
        try:
            os.kill(random.choice(pids), signal.SIGKILL)
            counts[f"{label} SIGKILLed"] += 1
        except ProcessLookupError:
            pass


def sacct_ends(ids: list[str]) -> dict[str, dict]:
    """Per task (raw id): state, start, end (epoch s), nodes; tasks that never started left out."""
    out = {}
    for i in range(0, len(ids), 100):
        r = fr.sh("sacct", "-X", "-n", "-P", "-j", ",".join(ids[i:i + 100]), "-o",
                  "JobIDRaw,JobID,State,Start,End,NodeList", "--noconvert", check=False)
        for line in r.stdout.splitlines():
            raw, jid, state, start, end, nodes = (line.split("|") + [""] * 6)[:6]
            if start in ("", "None", "Unknown") or nodes in ("", "None assigned"):
                continue
            out[raw] = {"id": jid, "state": state.split()[0] if state else "", "start": start, "end": _epoch(end),
                        "nodes": nodes}
    return out


def _epoch(stamp: str) -> float | None:
    try:
        return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None  # Unknown: still running


class StorePoll(threading.Thread):
    """Every 2 s: the first time each job id's record is seen final (status not running)."""

    def __init__(self, db: Path, since: float):
        super().__init__(daemon=True)
        self.db, self.since = db, since
        self.final: dict[str, float] = {}
        self.stop = threading.Event()

    def poll(self) -> None:
        if not self.db.exists():
            return
        try:
            con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
            try:
                rows = con.execute("SELECT job_id, status FROM job_records WHERE start_time >= ?",
                                   (self.since,)).fetchall()
            finally:
                con.close()
        except sqlite3.Error:
            return
        now = time.time()
        for job_id, status in rows:
            if status != "running":
                self.final.setdefault(job_id, now)

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            self.stop.wait(2.0)


def store_rows(db: Path, since: float) -> list[tuple[str, str, float]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT job_id, status, start_time FROM job_records WHERE start_time >= ?",
                           (since,)).fetchall()
    finally:
        con.close()


def queue_left(spools: tuple[Path, ...]) -> list[str]:
    out = []
    for s in spools:
        for q in (s / "finalize-queue").glob("*"):
            out += [str(p) for p in q.iterdir() if not p.name.startswith(".") and ".tmp" not in p.name]
    return out


# ---------------------------------------------------------------- phase faults
def phase_faults(args) -> str:
    jobs, counts, mounts = fr.Jobs(), collections.Counter(), fr.Mounts()
    jobs.setup()
    site = L / "etc" / "site.yaml"
    site_text = site.read_text()
    fr.cluster_name()
    for u in fr.USERS:
        fr.sh("scancel", "-u", u, check=False)
    for _ in range(120):
        if jobs.active() == 0:
            break
        time.sleep(0.5)
    for _ in range(60):  # finalizers of earlier jobs linger 30 s: not under the tmpfs mounted next
        if not our_procs(("sampler",) + KINDS, (fr.SPOOL, fr.SPOOL2)):
            break
        time.sleep(1.0)
    t0 = time.time()
    poll = StorePoll(L / "lib" / "jobs.db", t0 - 5)
    try:
        mounts.tmpfs(fr.SPOOL)
        mounts.tmpfs(fr.SPOOL2)
        poll.start()
        start = time.time()
        plan = [(60, "site.yaml unparsable"), (120, "site.yaml restored"), (150, "spool full"),
                (190, "fallback spool full"), (220, "fallback spool freed"), (240, "spool freed"),
                (250, "spool read-only"), (290, "spool read-write")]
        if (args.bursts - 1) * args.gap < 250:  # the spool faults, and the finalizers no standby covers, untested
            say(f"warning: the last of {args.bursts} bursts {args.gap:.0f} s apart starts before the spool's read-only "
                "window (250 s): jobs ending under a full or read-only spool, and the sweep that finishes them when "
                "their finalizer is killed, are barely or not exercised; use the default 8 bursts")
        fillers: dict[str, Path] = {}
        next_burst, b, last_s, last_f, last_1 = start, 0, start, start, start
        while True:
            now = time.time()
            if b < args.bursts and now >= next_burst:
                th = threading.Thread(target=jobs.burst, args=(b,), daemon=True)
                th.start()
                jobs.threads.append(th)
                say(f"burst {b + 1}/{args.bursts}")
                b, next_burst = b + 1, next_burst + args.gap
            while plan and now - start >= plan[0][0]:
                _, what = plan.pop(0)
                say(what)
                if what == "site.yaml unparsable":
                    site.write_text(site_text + "\npaths: [unclosed\n")
                elif what == "site.yaml restored":
                    site.write_text(site_text)
                elif what == "spool full":
                    fillers["spool"] = fr.fill(fr.SPOOL)
                elif what == "fallback spool full":
                    fillers["spool2"] = fr.fill(fr.SPOOL2)
                elif what == "fallback spool freed":
                    fillers.pop("spool2").unlink()
                elif what == "spool freed":
                    fillers.pop("spool").unlink()
                elif what == "spool read-only":
                    try:
                        mounts.ro_bind(fr.SPOOL)
                    except subprocess.CalledProcessError as e:  # the bind stays (read-write); popped below
                        say(f"spool read-only: remount failed (rc {e.returncode}: {e.stderr.strip()[:120]}); skipped")
                elif what == "spool read-write":
                    mounts.pop(fr.SPOOL)
            try:
                if now - last_s >= 15:
                    last_s = now
                    kill_one(("sampler",), "sampler", counts)
                if now - last_f >= 10:
                    last_f = now
                    kill_one(KINDS, "finalizer", counts)
                if now - last_1 >= 2:  # no standby takes over from these: the node finalizer's sweep must
                    last_1 = now
                    kill_one(("finalize", "finalize-env"), "single-job or spool-less finalizer", counts)
                jobs.cancel_due()
            except Exception as e:
                say(f"fault injection step failed: {type(e).__name__}: {e}")
            if (b >= args.bursts and not plan and not jobs.to_cancel and not any(t.is_alive() for t in jobs.threads)
                    and jobs.active() == 0):
                break
            if now - start > 720:
                say("jobs still active after 12 min: giving up waiting")
                break
            time.sleep(0.5)
        t_last = time.time()
        say("all jobs ended: waiting for every final record (at most 150 s), no collect")
        ended = sacct_ends(jobs.ids)
        while time.time() - t_last < 150:
            poll.poll()
            if all(raw in poll.final for raw in ended):
                break
            time.sleep(2.0)
        poll.stop.set()
        poll.poll()
        waited = time.time() - t_last
        ended = sacct_ends(jobs.ids)
        lags = {raw: poll.final[raw] - t["end"] for raw, t in ended.items() if raw in poll.final and t["end"]}
        late = [raw for raw in ended if raw not in poll.final]
        t_procs = time.time()  # a node's finalizer lingers 30 s after its queue emptied
        while our_procs(("sampler",) + KINDS, (fr.SPOOL, fr.SPOOL2)) and time.time() - t_procs < 45:
            time.sleep(1.0)
        procs_before = our_procs(("sampler",) + KINDS, (fr.SPOOL, fr.SPOOL2))
        q_before = queue_left((fr.SPOOL, fr.SPOOL2))
        r = fr.sh(str(VENV / "bin" / "slurm-energy"), "collect", "--older-than", "0", check=False)
        # this burst's jobs only (collect's sacct sweep also sees the last 24 h of the cluster's other runs)
        did = [x for x in r.stdout.splitlines() if x.startswith(("finished", "marked", "stored"))
               and (re.findall(r"\b(\d+)\b", x.replace("/", " ")) or [""])[0] in ended]
        rows = store_rows(L / "lib" / "jobs.db", t0 - 5)
        per = collections.Counter(j for j, _, _ in rows)
        status = {j: s for j, s, _ in rows}
        missing = [raw for raw in ended if raw not in per]
        running = [raw for raw in ended if status.get(raw) == "running"]
        dups = [j for j, n in per.items() if n > 1 and j in ended]
        ht = fr.hook_times(set(ended) | set(jobs.ids))
        for raw in late[:20]:
            say(f"no final record within the wait: {ended[raw]['id']} (raw {raw}) {ended[raw]['state']} "
                f"on {ended[raw]['nodes']}")
        for x in did[:20]:
            say(f"collect: {x}")
        lag = sorted(lags.values())
        rows_out = [
            ("sbatch calls / tasks submitted / tasks that ran (sacct)", f"{len(jobs.ids)} / {jobs.tasks} / {len(ended)}"),
            ("**record final after Slurm's End, p50 / p95 / max, s** (target p95 <= 60, max <= 120)",
             f"**{statistics.median(lag):.0f} / {pct(lag, 0.95):.0f} / {max(lag):.0f}**" if lag else "n/a"),
            (f"tasks without a final record {waited:.0f} s after the last job ended (no collect)", str(len(late))),
            ("**collect --older-than 0 afterwards: what it did**", f"**{len(did)}**" + (
                f" ({'; '.join(did[:5])})" if did else "")),
            ("tasks without a record / still running / with more than one record, after collect",
             f"{len(missing)} / {len(running)} / {len(dups)}"),
            ("queue entries / samplers and finalizers left before collect", f"{len(q_before)} / {len(procs_before)}"),
            *[(f"{k} wall time p50 / p95 / max, s (n={len(v)}; budget 2.0)",
               f"{statistics.median(v):.3f} / {pct(v, 0.95):.3f} / {max(v):.3f}" if v else "n/a") for k, v in ht.items()],
            ("faults by PID", ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))),
            ("fault windows", "; ".join(x.split("] ", 1)[1] + " at " + x.split("s]")[0].split()[-1] + " s"
                                        for x in fr.events if any(w in x for w in ("unparsable", "restored", "full",
                                                                                    "freed", "read-")))),
            ("run time", f"{time.time() - fr.T0:.0f} s"),
        ]
    finally:
        poll.stop.set()
        for u in fr.USERS:  # an aborted run must not leave its jobs to the next cluster start (slurmctld's state)
            fr.sh("scancel", "-u", u, check=False)
        if site.read_text() != site_text:
            site.write_text(site_text)
        mounts.unmount_all()
        say("mounts removed")
    return "\n".join(["| job end under faults | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows_out])


# ---------------------------------------------------------------- phase cpu
def _log_lines(path: Path, pattern: str) -> list[dict]:
    out = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        if re.search(pattern, line):
            out.append(dict(x.split("=", 1) for x in line.split() if "=" in x))
    return out


def phase_cpu(args) -> str:
    conf, d = L / "etc" / "slurm.conf", L / "endbench"
    orig = conf.read_text()
    pro = re.search(r"^Prolog=(.*)$", orig, flags=re.M)
    if pro is None:
        sys.exit(f"job_end_burst: {conf} has no Prolog= line")
    for sub in ("spool", "lib", "log", "textfile"):
        shutil.rmtree(d / sub, ignore_errors=True)
    d.mkdir(exist_ok=True)
    hb.write_hooks(d, Path(pro.group(1)).parent, None, hb.bench_site(L, d))
    (d / "textfile").mkdir(mode=0o755, exist_ok=True)  # node_exporter's dir, as the cluster's exists
    jobs = fr.Jobs()
    jobs.setup()
    for u in fr.USERS:
        fr.sh("scancel", "-u", u, check=False)
    stat0 = _proc_stat()
    try:
        hb.set_hooks(conf, str(d / "prolog"), str(d / "epilog"))
        start = time.time()
        for b in range(args.bursts):
            say(f"burst {b + 1}/{args.bursts}")
            jobs.burst(b)
            while time.time() < start + (b + 1) * args.gap:
                jobs.cancel_due()
                time.sleep(0.5)
        while jobs.to_cancel or jobs.active():
            jobs.cancel_due()
            if time.time() - start > 600:
                say("jobs still active after 10 min")
                break
            time.sleep(1.0)
        time.sleep(3.0)
    finally:
        for u in fr.USERS:
            fr.sh("scancel", "-u", u, check=False)
        conf.write_text(orig)
        hb.tc("scontrol", "reconfigure", check=False)
    t_wait = time.time()
    while our_procs(("sampler",) + KINDS, (d / "spool", d / "spool2")) and time.time() - t_wait < 300:
        time.sleep(2.0)  # the node's finalizers linger 30 s after their queue emptied
    stat1 = _proc_stat()
    elapsed = time.time() - start
    # the hooks
    wall, _ = hb.read_times(d)
    hook: dict[str, float] = collections.defaultdict(float)
    kind: dict[str, str] = {}
    for line in (d / "times.log").read_text().splitlines():
        try:
            k, which, job, _, _ = line.split()
            hook[job] += hb._cpu_s(d / "cpu" / f"{job}.{which}")
            kind[job] = k
        except (ValueError, OSError, IndexError):
            continue
    # the detached processes of ours
    sampler: dict[str, float] = collections.defaultdict(float)
    for f in _log_lines(d / "log" / "sampler.log", r"sampler job=\S+ node=\S+ wrote \d+ samples cpu_s="):
        sampler[f["job"]] += float(f["cpu_s"])
    fin: dict[str, float] = collections.defaultdict(float)
    for f in _log_lines(d / "log" / "finalize.log", r"finalized job_dir=\S+ .*cpu_s="):
        fin[os.path.basename(f["job_dir"]).split("-")[0]] += float(f["cpu_s"])
    runners = []
    for q in list((d / "spool" / "finalize-queue").glob("*")) + list((d / "spool2" / "finalize-queue").glob("*")):
        runners += _log_lines(q / ".runner.log", r"finalize-queue node=.* cpu_s=")
    runner_total = sum(float(f["cpu_s"]) for f in runners)
    ours = sorted(j for j, k in kind.items() if k == "ours")
    noop = sorted(j for j, k in kind.items() if k == "noop")
    overhead = max(0.0, runner_total - sum(fin.values()))  # start-up, standbys, lingering
    share = overhead / len(ours) if ours else 0.0
    per_ours = {j: hook[j] + sampler.get(j, 0.0) + fin.get(j, 0.0) + share for j in ours}
    noop_hooks = statistics.mean(hook[j] for j in noop) if noop else 0.0
    extra = [v - noop_hooks for v in per_ours.values()]
    med = statistics.median(extra) if extra else float("nan")
    mean = statistics.mean(extra) if extra else float("nan")
    ours_total = statistics.mean(per_ours.values()) if per_ours else float("nan")
    busy = stat1 - stat0
    lines = [
        f"job end CPU, {len(ours)} jobs ours / {len(noop)} jobs no-op hook (even / odd job ids) in {args.bursts} "
        f"bursts {args.gap:.0f} s apart, {elapsed:.0f} s to the last process's exit; "
        f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
        "| per job, CPU-s | median | mean |", "|---|---|---|",
        f"| ours: Prolog + Epilog | {statistics.median(hook[j] for j in ours):.3f} | "
        f"{statistics.mean(hook[j] for j in ours):.3f} |" if ours else "| ours | - | - |",
        f"| ours: sampler (start, samples, stop) | {statistics.median(sampler.get(j, 0.0) for j in ours):.3f} | "
        f"{statistics.mean(sampler.get(j, 0.0) for j in ours):.3f} |" if ours else "",
        f"| ours: node finalizer, the job's own work | {statistics.median(fin.get(j, 0.0) for j in ours):.3f} | "
        f"{statistics.mean(fin.get(j, 0.0) for j in ours):.3f} |" if ours else "",
        f"| ours: node finalizer start-up and lingering, shared out ({len(runners)} processes, "
        f"{overhead:.1f} CPU-s) | {share:.3f} | {share:.3f} |",
        f"| ours, all | {statistics.median(per_ours.values()):.3f} | {ours_total:.3f} |" if ours else "",
        f"| no-op hook: Prolog + Epilog | {statistics.median(hook[j] for j in noop):.3f} | {noop_hooks:.3f} |"
        if noop else "",
        f"| **ours less no-op** (target median <= 0.3) | **{med:.3f}** | **{mean:.3f}** |",
        f"ratio ours / no-op of a job's end on the node: {ours_total / noop_hooks:.1f}x "
        f"(median extra / target: {med / 0.3:.2f}); machine-wide busy CPU over the phase {busy:.0f} CPU-s "
        "(other work on this shared machine included)" if noop_hooks else "",
        f"jobs of ours without a sampler line {sum(1 for j in ours if j not in sampler)}, without a finalized line "
        f"{sum(1 for j in ours if j not in fin)} (2-node jobs: one line per node, summed)",
    ]
    del wall
    return "\n".join(x for x in lines if x)


def _proc_stat() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = os.sysconf("SC_CLK_TCK")
    v = [int(x) for x in fields]
    return (sum(v[:8]) - v[3] - v[4]) / ticks  # busy: all but idle and iowait


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase", choices=("cpu", "faults"), required=True)
    ap.add_argument("--bursts", type=int)
    ap.add_argument("--gap", type=float)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.bursts is None:
        args.bursts = 8 if args.phase == "faults" else 3
    if args.gap is None:
        args.gap = 45.0 if args.phase == "faults" else 30.0
    if os.geteuid() != 0:
        sys.exit("job_end_burst: run as root")
    if fr.sh("bash", str(fr.REPO / "scripts" / "testcluster.sh"), "status", check=False).returncode != 0:
        sys.exit("job_end_burst: the test cluster is not running")
    text = phase_faults(args) if args.phase == "faults" else phase_cpu(args)
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

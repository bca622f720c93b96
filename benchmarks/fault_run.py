"""Fault-injection run against the test cluster (scripts/testcluster.sh): every job Slurm ran must
get a record, whatever fails. Run as root, holding the cluster lock:

    flock /var/lock/slurm-energy-cluster.lock /opt/slurm-energy/venv/bin/python benchmarks/fault_run.py [--bursts 8]

What it does (about 10 minutes with the defaults):

* mounts a tmpfs over the cluster's spool ($L/spool) and one over its fallback spool ($L/spool2),
  so the spools can be filled and made read-only without touching anything outside the test
  cluster; copies their contents back and unmounts them at the end (also on Ctrl-C / errors);
* submits BURSTS bursts, 40 s apart, as alice and bob (--mem=100M each): an array of 20 (two in
  every fourth burst), CPU loops, sleeps, exit 1, jobs cancelled with scancel (running and pending), a job hitting its time
  limit, 2-node jobs, jobs whose work dir the user cannot write, a long job spanning the faults;
* injects faults by PID and by mount: SIGKILL a running sampler every 15 s and a finalizer every
  10 s (only processes whose argv names this cluster's spools); site.yaml unparsable for 60 s;
  the spool full (a filler file on its tmpfs) for 90 s, the fallback spool full too for 30 s of
  those; the spool read-only (a read-only bind mount over it) for 40 s;
* runs ``slurm-energy collect --older-than 1`` every 60 s as the timer would (the timer printed by
  ``slurm-energy install`` runs every 5 min; a shorter period here keeps the run short);
* waits until every job has ended, then 2 minutes, collects once more and prints the table: jobs
  and tasks submitted, tasks that ran (sacct), records by Status and by State, tasks without a
  record, records still ``running``, drained nodes, processes left, hook wall time p50/p95/max
  (from the hooks' ``wall_s`` log lines: the ``timeout`` guard's start to the hook's end).

Targets (issue 10): 0 tasks without a record, 0 running, 0 drained nodes, 0 processes left.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

#: what our detached sampler and finalizers run as (slurm_energy.slurm.detach.DETACHED_MODULE), and their
#: names before the moves (a tree from before them, compared in the same run)
DETACHED_MODULES = ("slurm_energy.slurm.sampler", "slurm_energy.slurm.jobend", "slurm_energy.slurm.detached",
                    "slurm_energy.slurm.hooks")
#: the node sampler (sampling.sampler: node, the default): ``-m MODULE SPOOL NODE``, one per node
NODE_SAMPLER_MODULE = "slurm_energy.slurm.sampler.node"

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("VENV", "/opt/slurm-energy/venv"))
L = Path(os.environ.get("L", "/var/tmp/slurm-energy-cluster"))
ENV = dict(os.environ, SLURM_CONF=str(L / "etc" / "slurm.conf"), SLURM_ENERGY_CONFIG=str(L / "etc" / "site.yaml"))
SPOOL, SPOOL2 = L / "spool", L / "spool2"
USERS = ("alice", "bob")
T0 = time.time()
events: list[str] = []


def say(msg: str) -> None:
    line = f"[fault-run {time.time() - T0:6.1f}s] {msg}"
    events.append(line)
    print(line, flush=True)


def sh(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, env=ENV, check=check, **kw)


# ---------------------------------------------------------------- mounts (only under $L)
class Mounts:
    def __init__(self) -> None:
        self.stack: list[Path] = []
        self.saved: dict[Path, Path] = {}

    def tmpfs(self, path: Path, size: str = "256m") -> None:
        assert str(path).startswith(str(L) + "/"), path
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)
        sh("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path))
        self.stack.append(path)

    def ro_bind(self, path: Path) -> None:
        sh("mount", "--bind", str(path), str(path))
        self.stack.append(path)
        sh("mount", "-o", "remount,bind,ro", str(path))

    def pop(self, path: Path) -> None:
        assert self.stack and self.stack[-1] == path
        r = sh("umount", str(path), check=False)
        if r.returncode != 0:
            sh("umount", "-l", str(path), check=False)
        self.stack.pop()

    def unmount_all(self) -> None:
        """Copy each tmpfs's contents back to the directory under it, then unmount (innermost first)."""
        while self.stack:
            path = self.stack[-1]
            if self.stack.count(path) == 1:  # the tmpfs itself: keep its files
                keep = L / f".fault-run-{path.name}.tar"
                sh("tar", "-C", str(path), "-cf", str(keep), ".", check=False)
                self.pop(path)
                sh("tar", "-C", str(path), "-xf", str(keep), check=False)
                keep.unlink(missing_ok=True)
            else:
                self.pop(path)


def fill(path: Path) -> Path:
    f = path / ".fault-run-filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={f}", "bs=1M"], capture_output=True)
    return f


# ---------------------------------------------------------------- jobs
class Jobs:
    def __init__(self) -> None:
        self.ids: list[str] = []  # sbatch job ids (an array counts once)
        self.tasks = 0
        self.to_cancel: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.wd: dict[str, Path] = {}
        self.ro_wd = L / "jobs" / "fault-run-readonly"
        self.n_scripts = 0
        self.threads: list[threading.Thread] = []

    def setup(self) -> None:
        import pwd

        for u in USERS:
            d = L / "jobs" / u / "fault-run"
            d.mkdir(parents=True, exist_ok=True)
            pw = pwd.getpwnam(u)
            os.chown(d, pw.pw_uid, pw.pw_gid)
            self.wd[u] = d
        self.ro_wd.mkdir(parents=True, exist_ok=True)
        os.chmod(self.ro_wd, 0o755)  # root's: the users can cd into it but not write a report there

    def submit(self, user: str, script: str, *args: str, tasks: int = 1, wd: Path | None = None) -> str | None:
        wd = wd or self.wd[user]
        with self.lock:
            self.n_scripts += 1
            f = self.wd[user] / f"job-{self.n_scripts}.sh"
        f.write_text("#!/bin/bash\n" + script + "\n")
        os.chmod(f, 0o755)
        r = subprocess.run(["runuser", "-u", user, "--", "env", "-i", "PATH=/usr/bin:/bin", f"SLURM_CONF={ENV['SLURM_CONF']}",
                            "sbatch", "--parsable", "--mem=100M", f"--chdir={wd}",
                            f"--output={self.wd[user]}/slurm-%j.out", *args, str(f)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            say(f"sbatch failed: {r.stderr.strip()}")
            return None
        jid = r.stdout.strip().split(";")[0]
        with self.lock:
            self.ids.append(jid)
            self.tasks += tasks
        return jid

    def burst(self, b: int) -> None:
        u = USERS[b % 2]
        v = USERS[(b + 1) % 2]
        cpu = "end=$((SECONDS+{s})); while [ $SECONDS -lt $end ]; do :; done"
        self.submit(u, "sleep 1", "--array=0-19", tasks=20)
        if b % 4 == 0:
            self.submit(v, "sleep 2", "--array=0-19", tasks=20)
        for i in range(6):
            self.submit(v if i % 2 else u, cpu.format(s=2 + i % 3))
        for i in range(5):
            self.submit(u if i % 2 else v, f"sleep {2 + i}")
        for _ in range(2):
            self.submit(v, "sleep 1; exit 1")
        self.submit(u, "srun sleep 3", "-N2", "--ntasks-per-node=1")
        for _ in range(2):
            self.submit(v, "sleep 2", wd=self.ro_wd)  # the report cannot be written there
        for _ in range(2):  # cancelled while running (or while still pending)
            jid = self.submit(u, "sleep 120")
            if jid:
                self.to_cancel.append((time.time() + random.uniform(5, 25), jid))
        if b < 2:
            self.submit(v, "sleep 300", "--time=1")  # TIMEOUT after the 1 min limit
        if b % 2 == 0:
            self.submit(u, "sleep 25")  # long enough to span a fault

    def cancel_due(self) -> None:
        now = time.time()
        for t, jid in [x for x in self.to_cancel if x[0] <= now]:
            sh("scancel", jid, check=False)
            self.to_cancel.remove((t, jid))

    def active(self) -> int:
        r = sh("squeue", "-h", "-o", "%i", "-u", ",".join(USERS), check=False)
        return len([x for x in r.stdout.split() if x.strip()])


# ---------------------------------------------------------------- faults by PID
def procs_of(kinds: tuple[str, ...], spools: tuple[Path, ...] = (SPOOL, SPOOL2)) -> list[int]:
    """PIDs of this cluster's detached processes of ``kinds`` (``sampler``: a per-job sampler or the
    node sampler; ``finalize``, ``finalize-env``, ``finalize-queue``): argv names one of ``spools``,
    or is a finalize-env of this cluster."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        mod = next((m for m in (NODE_SAMPLER_MODULE, *DETACHED_MODULES) if m in argv), None)
        if mod is None:
            continue
        i = argv.index(mod)
        what = "sampler" if mod == NODE_SAMPLER_MODULE else argv[i + 1] if len(argv) > i + 1 else ""
        mine = any(str(s) in a for s in spools for a in argv) or (
            what == "finalize-env" and f'"cluster": "{cluster_name()}"' in " ".join(argv))
        if mine and what in kinds:
            out.append(int(name))
    return out


def our_procs(kind: str) -> list[int]:
    """PIDs of this cluster's samplers / finalizers (``finalize`` includes ``finalize-env``)."""
    return procs_of((kind, "finalize-env") if kind == "finalize" else (kind,))


_CLUSTER: list[str] = []


def cluster_name() -> str:
    if not _CLUSTER:
        import yaml

        _CLUSTER.append(str(yaml.safe_load((L / "etc" / "site.yaml").read_text()).get("cluster_name", "")))
    return _CLUSTER[0]


def kill_one(kind: str, counts: collections.Counter) -> None:
    pids = our_procs(kind)
    if pids:
        pid = random.choice(pids)
        try:
            os.kill(pid, signal.SIGKILL)
            counts[f"{kind} SIGKILLed"] += 1
        except ProcessLookupError:
            pass


def collect(counts: collections.Counter) -> None:
    r = sh(str(VENV / "bin" / "slurm-energy"), "collect", "--older-than", "1", check=False)
    counts["collect runs"] += 1
    for line in r.stdout.splitlines():
        if line.startswith(("finished", "marked", "stored")):
            counts["collect: " + line.split()[0] + (" from sacct" if "from sacct" in line else "")] += 1
    if r.returncode != 0:
        say(f"collect rc={r.returncode}: {r.stderr.strip()[:300]}")


# ---------------------------------------------------------------- the table
def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def sacct_tasks(ids: list[str]) -> list[dict]:
    out = []
    for i in range(0, len(ids), 100):
        r = sh("sacct", "-X", "-n", "-P", "-j", ",".join(ids[i:i + 100]), "-o", "JobIDRaw,JobID,State,Start,NodeList",
               check=False)
        for line in r.stdout.splitlines():
            raw, jid, state, start, nodes = (line.split("|") + [""] * 5)[:5]
            out.append({"raw": raw, "id": jid, "state": state.split()[0] if state else "", "start": start,
                        "nodes": nodes})
    return out


def hook_times(job_ids: set[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"prolog": [], "epilog": []}
    log = L / "log" / "hooks.log"
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if " hook=" not in line or " wall_s=" not in line:
            continue
        f = dict(x.split("=", 1) for x in line.split() if "=" in x)
        if f.get("job") in job_ids and f.get("hook") in out and f.get("wall_s", "?") != "?":
            out[f["hook"]].append(float(f["wall_s"]))
    return out


def table(jobs: Jobs, counts: collections.Counter, t_last_end: float) -> str:
    sys.path.insert(0, str(REPO))
    from slurm_energy.store import open_store

    tasks = sacct_tasks(jobs.ids)
    ran = [t for t in tasks if t["start"] not in ("", "None", "Unknown") and t["nodes"] not in ("", "None assigned")]
    store = open_store(f"sqlite:///{L}/lib/jobs.db", readonly=True)
    try:
        recs = {}
        for t in ran:
            got = [r for r in store.get_job(t["raw"]) if r.job_id == t["raw"] and r.start_time >= T0 - 60]
            if got:
                recs[t["raw"]] = got[-1]
    finally:
        store.close()
    missing = [t for t in ran if t["raw"] not in recs]
    for t in missing[:30]:
        say(f"no record: task {t['id']} (raw {t['raw']}) state {t['state']} started {t['start']} on {t['nodes']}")
    for r in [r for r in recs.values() if r.status.value in ("running", "no_data")][:30]:
        say(f"{r.status.value}: {r.job_id} state {r.job_state}: {'; '.join(r.errors)[:300]}")
    by_status = collections.Counter(r.status.value + (" (no report)" if r.report_error else "") for r in recs.values())
    by_state = collections.Counter(r.job_state or "?" for r in recs.values())
    drained = [x for x in sh("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout.splitlines()
               if any(s in x for s in ("drain", "down", "fail"))]
    left = our_procs("sampler") + our_procs("finalize")
    ht = hook_times({t["raw"] for t in tasks})
    rows = [
        ("sbatch calls / tasks submitted", f"{len(jobs.ids)} / {jobs.tasks}"),
        ("tasks Slurm ran (sacct: started on a node)", str(len(ran))),
        ("tasks cancelled before they started", str(len(tasks) - len(ran))),
        ("records in the store for them", str(len(recs))),
        ("records by Status", ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))),
        ("records by State (Slurm)", ", ".join(f"{k} {v}" for k, v in sorted(by_state.items()))),
        ("**tasks without a record**",
         f"**{len(missing)}**" + (f" ({', '.join(t['id'] for t in missing[:10])})" if missing else "")),
        (f"**records still `running`** ({time.time() - t_last_end:.0f} s after the last job ended)",
         f"**{by_status.get('running', 0)}**"),
        ("**drained/down nodes**", f"**{len(drained)}**" + (f" ({'; '.join(drained)})" if drained else "")),
        ("**samplers/finalizers left running**", f"**{len(left)}**"),
        *[(f"{k} wall time p50 / p95 / max, s (n={len(v)}; budget 2.0)",
           f"{statistics.median(v):.3f} / {pct(v, 0.95):.3f} / {max(v):.3f}" if v else "n/a") for k, v in ht.items()],
        ("fault windows", "; ".join(x.split("] ", 1)[1] + " at " + x.split("s]")[0].split()[-1] + " s" for x in events
                                    if any(w in x for w in ("unparsable", "restored", "full", "freed", "read-"))
                                    and "tmpfs" not in x)),
        ("faults by PID", ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if not k.startswith("collect"))),
        ("collect (every 60 s)", ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k.startswith("collect"))),
        ("run time", f"{time.time() - T0:.0f} s"),
    ]
    return "\n".join(["| fault run | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows])


# ---------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bursts", type=int, default=8)
    ap.add_argument("--gap", type=float, default=40.0, help="seconds between bursts")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the fault schedule's times (a quick smoke run: 0.35)")
    ap.add_argument("--out", help="also write the table (markdown) to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("fault_run: run as root (it mounts tmpfs over the test cluster's spool and kills its samplers)")
    if sh("bash", str(REPO / "scripts" / "testcluster.sh"), "status", check=False).returncode != 0:
        sys.exit(f"fault_run: the test cluster at {L} is not running: flock /var/lock/slurm-energy-cluster.lock "
                 "bash scripts/testcluster.sh start")
    jobs, counts, mounts = Jobs(), collections.Counter(), Mounts()
    jobs.setup()
    site = L / "etc" / "site.yaml"
    site_text = site.read_text()
    cluster_name()  # read now: site.yaml is made unparsable later
    if "spool_fallback_dir" not in site_text:
        sys.exit(f"fault_run: {site} has no paths.spool_fallback_dir (restart the cluster with this checkout)")
    stop = threading.Event()
    # jobs left from an earlier run (a cluster stopped mid-job keeps them RUNNING in slurmctld's
    # state and the nodes allocated): cancel them and wait for an empty queue before starting
    for u in USERS:
        sh("scancel", "-u", u, check=False)
    for _ in range(120):
        if jobs.active() == 0:
            break
        time.sleep(0.5)
    else:
        sys.exit("fault_run: the queue did not empty in 60 s after scancel; check squeue")
    try:
        mounts.tmpfs(SPOOL)
        mounts.tmpfs(SPOOL2)
        say(f"tmpfs mounted over {SPOOL} and {SPOOL2}")
        start = time.time()
        plan = [  # (t, action)
            (60, "site.yaml unparsable"), (120, "site.yaml restored"),
            (150, "spool full"), (190, "fallback spool full"), (220, "fallback spool freed"), (240, "spool freed"),
            (250, "spool read-only"), (290, "spool read-write"),
        ]
        plan = [(t * args.scale, what) for t, what in plan]
        fillers: dict[str, Path] = {}
        next_burst, b, last_kill_s, last_kill_f, last_collect = start, 0, start, start, start
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
                    fillers["spool"] = fill(SPOOL)
                elif what == "fallback spool full":
                    fillers["spool2"] = fill(SPOOL2)
                elif what == "fallback spool freed":
                    fillers.pop("spool2").unlink()
                elif what == "spool freed":
                    fillers.pop("spool").unlink()
                elif what == "spool read-only":
                    mounts.ro_bind(SPOOL)
                elif what == "spool read-write":
                    mounts.pop(SPOOL)
            try:
                if now - last_kill_s >= 15:
                    last_kill_s = now
                    kill_one("sampler", counts)
                if now - last_kill_f >= 10:
                    last_kill_f = now
                    kill_one("finalize", counts)
                if now - last_collect >= 60:
                    last_collect = now
                    collect(counts)
                jobs.cancel_due()
            except Exception as e:
                say(f"fault injection step failed: {type(e).__name__}: {e}")
            if (b >= args.bursts and not plan and not jobs.to_cancel and not any(t.is_alive() for t in jobs.threads)
                    and jobs.active() == 0):
                break
            if now - start > 780:
                say("jobs still active after 13 min: giving up waiting")
                break
            time.sleep(0.5)
        t_last = time.time()
        say("all jobs ended; collect, then wait 2 min")
        collect(counts)  # then as the timer would: 65 s later, and at 2 min
        time.sleep(max(0.0, 65 - (time.time() - t_last)))
        collect(counts)
        time.sleep(max(0.0, 120 - (time.time() - t_last)))
        collect(counts)
        try:
            text = table(jobs, counts, t_last)
        except Exception:
            import traceback

            text = "table failed:\n" + traceback.format_exc()
    finally:
        stop.set()
        if site.read_text() != site_text:
            site.write_text(site_text)
        mounts.unmount_all()
        say("mounts removed")
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

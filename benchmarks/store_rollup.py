"""Store v2 at scale: `rollup --month`, bytes per job, and `jobenergy -j` beside `sacct -j` in the same run.

    python benchmarks/store_rollup.py --n 100000 1000000 [--pg URL] [--reps 3] [--sacct-reps 15]

For each N and backend (SQLite under --dir; PostgreSQL: database ``<--pg's database>_<N>`` on --pg's
server, created when missing) fills a fresh store with N synthetic finished one-node jobs, 1 h long,
each with hourly energy (2 UTC hours) -- N = 100k spaced 25 s (all in one month), N = 1M spaced
31.5 s (one year) -- through the real write path (summary columns, job_json, job_hours; the record
JSON is one template's text with the job id swapped in, which keeps the fill fast and the bytes the
same). ``--no-fill`` reuses the stores an earlier run filled. Then prints, medians of --reps:

* ``rollup --month``: the SQL aggregate in-process (store.rollup.month_rollup) for the busiest month,
  for 1M jobs all 12 months one after another (the year), and the whole CLI as a new process;
* bytes per job without the record JSON (job_records + its indexes + job_hours; SQLite's dbstat,
  PostgreSQL's pg_total_relation_size) and with it;
* ``jobenergy -j ID`` and a one-day ``-S/-E`` window, early and late in the store, as new processes.

With ``--before DIR`` (another checkout, e.g. main's, put first on PYTHONPATH) every new-process
command runs in both checkouts, interleaved (each round alternates which goes first), on the same
stores: printed as ``before -> now``.

Last, beside the peer: on the test cluster (under ``flock /var/lock/slurm-energy-cluster.lock``, started for the
run and stopped after when it was not running), ``sacct -j ID`` for a real job in its slurmdbd
(default fields, and ``-X -P -o`` fields like jobenergy's default), interleaved with ``jobenergy -j``
early and late in every largest store, --sacct-reps rounds, each contender once per round in turn:
medians and the ratio ours / sacct.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from slurm_energy.carbon.hourly import split_interval_by_hour  # noqa: E402
from slurm_energy.model import DeviceEnergy, JobRecord, Method, NodeSummary  # noqa: E402
from slurm_energy.reporting.rollup_table import month_bounds  # noqa: E402
from slurm_energy.store import open_store, schema, sqlstore  # noqa: E402
from slurm_energy.store.db import connect  # noqa: E402

T0 = 1_767_225_600.0  # 2026-01-01T00:00Z
TC = os.path.join(REPO, "scripts", "testcluster.sh")
LOCK = "/var/lock/slurm-energy-cluster.lock"
#: sacct's columns closest to jobenergy's default ones (energy: Slurm's ConsumedEnergy)
SACCT_FIELDS = "JobID,User,Account,Partition,NNodes,Elapsed,ConsumedEnergy,State,ExitCode"


def _template() -> JobRecord:
    devs = [DeviceEnergy(device_class=c, device_id=f"{c}-0", node="n1", method=m, energy_j=1.0e6, coverage=1.0)
            for c, m in (("cpu", Method.COUNTER), ("ram", Method.TDP_ESTIMATE), ("gpu", Method.COUNTER))]
    ns = NodeSummary(node="n1", job_id="7777777", start_time=T0, end_time=T0 + 3600, devices=devs, cpu_time_s=3000.0,
                     hourly_energy_j=split_interval_by_hour(T0 + 1800, T0 + 5400, 3e6))
    return JobRecord(cluster="bench", job_id="7777777", partition="batch", start_time=T0, end_time=T0 + 3600,
                     expected_nodes=["n1"], nodes=[ns], energy_it_j={"cpu": 1e6, "ram": 1e6, "gpu": 1e6},
                     methods={"cpu": Method.COUNTER, "ram": Method.TDP_ESTIMATE, "gpu": Method.COUNTER},
                     it_kwh=3e6 / 3.6e6, facility_kwh=3e6 / 3.6e6 * 1.5, co2e_kg=3e6 / 3.6e6 * 1.5 * 0.4,
                     exit_code="0:0")


def pg_url(base: str, n: int) -> str:
    """--pg's URL with the database ``<database>_<n>``, created on that server when missing."""
    head, _, name = base.rpartition("/")
    name = f"{name.partition('?')[0]}_{n}"
    db = connect(f"{head}/postgres")
    if not db.execute("SELECT 1 FROM pg_database WHERE datname = :d", {"d": name}):
        db.execute(f'CREATE DATABASE "{name}"')
    db.close()
    return f"{head}/{name}"


def _fill(url: str, n: int, step: float) -> float:
    """Fresh store with n jobs; returns the fill time, s."""
    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm"):  # a WAL left beside a new file would be read into it
            if os.path.exists(url[len("sqlite:///"):] + suffix):
                os.unlink(url[len("sqlite:///"):] + suffix)
    else:
        db = connect(url)
        for t in schema.TABLES:
            db.execute(f"DROP TABLE IF EXISTS {t}")
        db.close()
    st = open_store(url)
    tpl = _template()
    row, text, hours = sqlstore._rows(tpl, st.hourly_ci)
    t = time.perf_counter()
    with st.db.transaction():
        for k0 in range(0, n, 20_000):
            buf = []
            for k in range(k0, min(n, k0 + 20_000)):
                s = T0 + k * step
                jid = str(1_000_000 + k)
                r = dict(row, job_id=jid, start_time=s, end_time=s + 3600, user=f"u{k % 500}", uid=10000 + k % 500,
                         account=f"a{k % 50}")
                hs = [dict(h, hour_start=int(h["hour_start"] - T0 + (s // 3600) * 3600)) for h in hours]
                buf.append((r, text.replace('"7777777"', f'"{jid}"'), hs))
            st.insert_rows(buf)
    took = time.perf_counter() - t
    if not url.startswith("sqlite"):  # what autovacuum does after a bulk load: planner statistics
        st.db.execute("VACUUM ANALYZE job_records, job_json, job_hours")
    st.close()
    return took


def _sizes(url: str, n: int) -> tuple[float, float]:
    """(bytes per job without the record JSON, with it)."""
    db = connect(url)
    if url.startswith("sqlite"):
        sizes = dict(db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
        js = sizes.get("job_json", 0)
        total = sum(sizes.values())
    else:
        def rel(t):
            return db.execute(f"SELECT pg_total_relation_size('{t}')")[0][0]
        js = rel("job_json")
        total = js + rel("job_records") + rel("job_hours")
    db.close()
    return (total - js) / n, total / n


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _timed(cmd, env) -> float:
    """Wall time of one run of ``cmd`` as a new process, ms; fails loudly on a non-zero exit."""
    t = time.perf_counter()
    # cwd "/": ``python -m`` puts the cwd first on sys.path, so PYTHONPATH alone picks the checkout
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/")
    took = (time.perf_counter() - t) * 1000
    assert p.returncode == 0, (cmd, p.stderr[-2000:])
    return took


def _median_proc(cmd, reps, env) -> float:
    return statistics.median(_timed(cmd, env) for _ in range(reps))


def _rollup_inproc(url: str, months: list[str], reps: int) -> float:
    from slurm_energy.store.rollup import month_rollup

    ts = []
    for _ in range(reps):
        st = open_store(url, readonly=True)
        t = time.perf_counter()
        for m in months:
            month_rollup(st.db, "user", *month_bounds(m))
        ts.append(time.perf_counter() - t)
        st.close()
    return statistics.median(ts) * 1000


def _lock(timeout_s: float):
    """The test cluster's lock (an open file holding flock), queued behind other waiters (a blocking
    flock), for at most ``timeout_s``; else None."""
    import signal

    def expired(*_):
        raise TimeoutError

    f = open(LOCK, "a")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(max(1, int(timeout_s)))
    try:
        fcntl.flock(f, fcntl.LOCK_EX)
        return f
    except TimeoutError:
        f.close()
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _cluster_job(env: dict, prefix: list[str]) -> str:
    """A finished job in the test cluster's slurmdbd: the newest, else one submitted now (``true``)."""
    def listed():
        out = subprocess.run(prefix + ["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-S", "now-30days",
                                       "-a"], capture_output=True, text=True, env=env).stdout
        return [ln.split("|")[0] for ln in out.split() if ln.endswith("|COMPLETED") and ln.split("|")[0].isdigit()]

    jobs = listed()
    if not jobs:
        subprocess.run(["bash", TC, "exec", "-u", "alice", "-C", "/var/tmp", "--", "sbatch", "--wrap", "true"],
                       check=True, capture_output=True)
        for _ in range(120):
            time.sleep(1.0)
            jobs = listed()
            if jobs:
                break
    if not jobs:
        raise RuntimeError("no COMPLETED job in the test cluster's accounting after submitting one")
    return jobs[-1]


def _peer_rounds(ours: dict[str, list[str]], env: dict, rounds: int, lock_wait_s: float) -> list[str]:
    """sacct -j beside jobenergy -j (``ours``: label -> argv), interleaved, on the test cluster."""
    lk = _lock(lock_wait_s)
    if lk is None:
        return [f"sacct -j: not measured (the test cluster's lock was held for over {lock_wait_s:.0f} s)"]
    started = False
    try:
        if subprocess.run(["bash", TC, "status"], capture_output=True).returncode != 0:
            subprocess.run(["bash", TC, "start"], check=True, stdout=subprocess.DEVNULL)
            started = True
        conf = subprocess.run(["bash", TC, "env"], capture_output=True, text=True, check=True).stdout
        senv = dict(os.environ, SLURM_CONF=conf.strip().split("=", 1)[1])
        base = os.path.dirname(os.path.dirname(senv["SLURM_CONF"]))
        state = dict(ln.split("=", 1) for ln in open(f"{base}/etc/cluster.env").read().splitlines() if "=" in ln) \
            if os.path.exists(f"{base}/etc/cluster.env") else {}
        prefix = ["chroot", state["ROOT"]] if state.get("ROOT") else []
        jid = _cluster_job(senv, prefix)
        peers = {f"sacct -j {jid}": prefix + ["sacct", "-j", jid],
                 f"sacct -j {jid} -X -P -o <fields>": prefix + ["sacct", "-j", jid, "-X", "-P", "-o", SACCT_FIELDS]}
        both = {**peers, **ours}
        times: dict[str, list[float]] = {k: [] for k in both}
        for r in range(rounds):
            order = list(both.items())
            if r % 2:
                order.reverse()  # neither side always runs first after the other's cache effects
            for label, cmd in order:
                times[label].append(_timed(cmd, senv if label in peers else env))
        v = subprocess.run(prefix + ["sacct", "-V"], capture_output=True, text=True, env=senv)
        version = (v.stdout + v.stderr).strip()
    finally:
        if started:
            subprocess.run(["bash", TC, "stop"], stdout=subprocess.DEVNULL)
        lk.close()
    ref = statistics.median(times[f"sacct -j {jid} -X -P -o <fields>"])
    out = [f"beside sacct ({version}, test cluster's slurmdbd + MariaDB; new processes, interleaved, "
           f"median of {rounds}; ratio = ours / sacct -X -P -o):"]
    for label in both:
        m = statistics.median(times[label])
        out.append(f"  {label:58s} {m:8.1f} ms   {m / ref:5.2f}x")
    return out


def _versus(cmd, reps, env, before=None) -> str:
    """``cmd``'s median as a new process, ms; with ``before`` (the other checkout's env and its copy
    of the store's URL) both interleaved, each round alternating which goes first: ``before -> now``."""
    if before is None:
        return f"{_median_proc(cmd, reps, env):8.1f} ms"
    url = cmd[cmd.index("--store") + 1]
    old = [before[1] if c == url else c for c in cmd]
    now, was = [], []
    for r in range(reps):
        for times, c, e in ((now, cmd, env), (was, old, before[0]))[::(-1 if r % 2 else 1)]:
            times.append(_timed(c, e))
    return f"{statistics.median(was):8.1f} -> {statistics.median(now):8.1f} ms"


def _v3_copy(url: str) -> str:
    """A copy of the store at ``url`` in schema v3 (what main reads: no ``sluid`` column), same rows."""
    if url.startswith("sqlite"):
        import sqlite3

        path = url[len("sqlite:///"):]
        dst = path.replace(".db", "-v3.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(dst + suffix):
                os.unlink(dst + suffix)
        src, out = sqlite3.connect(path), sqlite3.connect(dst)
        src.backup(out)
        src.close()
        out.close()
        copy = "sqlite:///" + dst
    else:
        head, _, name = url.rpartition("/")
        admin = connect(f"{head}/postgres")
        admin.execute(f'DROP DATABASE IF EXISTS "{name}_v3"')
        admin.execute(f'CREATE DATABASE "{name}_v3" TEMPLATE "{name}"')
        admin.close()
        copy = f"{head}/{name}_v3"
    db = connect(copy)
    if schema.current_version(db) == 4:
        with db.transaction():
            db.execute("DROP INDEX ix_sluid")
            db.execute("ALTER TABLE job_records DROP COLUMN sluid")
            db.execute("DELETE FROM schema_version WHERE version = 4")
    db.close()
    return copy


def _store_rows(name: str, url: str, n: int, step: float, a, env, before_env=None) -> None:
    """Fill (unless --no-fill) and print one store's rows."""
    py = sys.executable
    fill = "" if a.no_fill else f"fill {_fill(url, n, step):.0f} s; "
    no_json, with_json = _sizes(url, n)
    before = (before_env, _v3_copy(url)) if before_env is not None else None
    tag = f"[{name} {n} jobs]"
    print(f"{tag} {fill}{no_json:.0f} bytes/job without the record JSON, {with_json:.0f} with it", flush=True)
    print(f"{tag} rollup --month 2026-01 (SQL, in-process)          {_rollup_inproc(url, ['2026-01'], a.reps):8.1f} ms")
    if n > 100_000:
        year = [f"2026-{m:02d}" for m in range(1, 13)]
        print(f"{tag} rollup of the year, 12 months (SQL, in-process) {_rollup_inproc(url, year, a.reps):8.1f} ms")
    for fmt in ("table", "csv", "json"):
        cli = [py, "-m", "slurm_energy.cli.main", "rollup", "--month", "2026-01", "--store", url, "--format", fmt]
        print(f"{tag} slurm-energy rollup --month 2026-01 --format {fmt:5s} (new process) "
              f"{_versus(cli, a.reps, env, before)}", flush=True)
    je = [py, "-m", "slurm_energy.cli.jobenergy", "--store", url, "-P"]
    late = T0 + (n - 5000) * step
    for what, extra in (("-j <early id>", ["-j", "1000010"]), ("-j <late id>", ["-j", str(1_000_000 + n - 10)]),
                        ("one day early", ["-S", "2026-01-02", "-E", "2026-01-03"]),
                        ("one day late", ["-S", _day(late), "-E", _day(late + 86400)])):
        print(f"{tag} jobenergy {what:14s} (new process)          {_versus(je + extra, a.reps * 3, env, before)}",
              flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sacct-reps", type=int, default=15, help="rounds beside sacct (0: no sacct)")
    ap.add_argument("--lock-wait", type=float, default=1800.0, help="wait at most this long for the cluster lock, s")
    ap.add_argument("--dir", default="/tmp/slurm-energy-bench-v2")
    ap.add_argument("--pg", default=os.environ.get("SLURM_ENERGY_TEST_PG_URL", ""),
                    help="a PostgreSQL URL: its server holds one database per N, named <database>_<N>")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--no-fill", action="store_true", help="reuse the stores an earlier run filled (same --n)")
    ap.add_argument("--sacct-only", action="store_true", help="only the rounds beside sacct (stores filled before)")
    ap.add_argument("--before", default="", help="another checkout (e.g. main's): its commands timed interleaved "
                                                  "with this one's on the same stores, shown as before -> now")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    cfgdir = tempfile.mkdtemp(prefix="se-bench-cfg-")
    cfg = os.path.join(cfgdir, "site.yaml")
    with open(cfg, "w") as f:
        f.write("{}\n")
    # bytecode compiled once for both checkouts, in a cache of this run's own (an installed package
    # has its .pyc; PYTHONDONTWRITEBYTECODE would compile every edited module at every start)
    pyc = tempfile.mkdtemp(prefix="se-bench-pyc-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=REPO, SLURM_ENERGY_CONFIG=cfg, PYTHONPYCACHEPREFIX=pyc)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "slurm_energy")]
                   + ([os.path.join(a.before, "slurm_energy")] if a.before else []), env=env, check=True,
                   stdout=subprocess.DEVNULL)
    os.environ["SLURM_ENERGY_CONFIG"] = cfg
    # the hooks' resolved copy of site.yaml, as a Prolog leaves it on a node
    subprocess.run([sys.executable, "-c", "from slurm_energy.slurm.config_cache import load_hook_config as f; f()"],
                   env=env, check=True)
    before_env = None
    if a.before:  # its own site.yaml and resolved copy (a copy is keyed on the config code that made it)
        bcfg = os.path.join(tempfile.mkdtemp(prefix="se-bench-cfg-"), "site.yaml")
        with open(bcfg, "w") as f:
            f.write("{}\n")
        before_env = dict(env, PYTHONPATH=a.before, SLURM_ENERGY_CONFIG=bcfg)
        subprocess.run([sys.executable, "-c", "from slurm_energy.slurm.config_cache import load_hook_config as f; f()"],
                       env=before_env, check=True, cwd="/")
    ours: dict[str, list[str]] = {}
    for n in a.n:
        step = 25.0 if n <= 100_000 else 31.5
        urls = ([] if a.no_sqlite else [("sqlite", f"sqlite:///{a.dir}/store-{n}.db")]) + \
            ([("postgresql", pg_url(a.pg, n))] if a.pg else [])
        for name, url in urls:
            if not a.sacct_only:
                _store_rows(name, url, n, step, a, env, before_env)
            if n == max(a.n):
                for what, jid in (("early", "1000010"), ("late", str(1_000_000 + n - 10))):
                    ours[f"jobenergy -j <{what} id>, {name} {n // 1000}k jobs"] = \
                        [sys.executable, "-m", "slurm_energy.cli.jobenergy", "--store", url, "-P", "-j", jid]
    print(f"python -c pass (new process)                                       "
          f"{_median_proc([sys.executable, '-c', 'pass'], a.reps * 3, env):8.1f} ms")
    if a.sacct_reps:
        print("\n".join(_peer_rounds(ours, env, a.sacct_reps, a.lock_wait)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

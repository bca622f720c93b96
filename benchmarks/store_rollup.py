"""Store v2 at scale: `rollup --month` time, bytes per job, `jobenergy -j` start to finish vs `sacct -j`.

    python benchmarks/store_rollup.py --n 100000 1000000 [--pg URL] [--reps 3]

For each N and backend (SQLite under --dir, PostgreSQL at --pg): fills a fresh store with N synthetic
finished one-node jobs, 1 h long, each with hourly energy (2 UTC hours) -- N = 100k spaced 25 s (all in
one month), N = 1M spaced 31.5 s (one year) -- through Store.put_many (the real write path: summary
columns, job_json, job_hours; the record JSON is one template's text with the job id swapped in,
which keeps the fill fast and the bytes the same). Then prints, medians of --reps:

* ``rollup --month``: the SQL aggregate in-process (store.rollup.month_rollup) for the busiest month,
  and for 1M jobs all 12 months one after another (the year), and the whole CLI as a new process;
* bytes per job without the record JSON (job_records + its indexes + job_hours; SQLite's dbstat,
  PostgreSQL's pg_total_relation_size) and with it;
* ``jobenergy -j ID`` as a new process (interpreter start included), a one-day window early and late
  in the store; and ``sacct -j`` on the test cluster's newest job when it runs (under
  ``flock /tmp/se-cluster.lock``), else a note that sacct was not measured.
"""

from __future__ import annotations

import argparse
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
from slurm_energy.store import open_store, sqlstore  # noqa: E402

T0 = 1_767_225_600.0  # 2026-01-01T00:00Z


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


def _fill(url: str, n: int, step: float) -> float:
    """Fresh store with n jobs; returns the fill time, s."""
    import sqlalchemy as sa

    from slurm_energy.store.schema import metadata, v1_metadata

    if url.startswith("sqlite:///"):
        if os.path.exists(url[len("sqlite:///"):]):
            os.unlink(url[len("sqlite:///"):])
    else:
        eng = sa.create_engine(url)
        with eng.begin() as c:
            metadata.drop_all(c)
            v1_metadata.drop_all(c)
        eng.dispose()
    st = open_store(url)
    tpl = _template()
    row, text, hours = sqlstore._rows(tpl, st.hourly_ci)
    t = time.perf_counter()
    with st.engine.begin() as conn:
        for k0 in range(0, n, 20_000):
            buf = []
            for k in range(k0, min(n, k0 + 20_000)):
                s = T0 + k * step
                jid = str(1_000_000 + k)
                r = dict(row, job_id=jid, start_time=s, end_time=s + 3600, user=f"u{k % 500}", uid=10000 + k % 500,
                         account=f"a{k % 50}")
                hs = [dict(h, hour_start=int(h["hour_start"] - T0 + (s // 3600) * 3600)) for h in hours]
                buf.append((r, text.replace('"7777777"', f'"{jid}"'), hs))
            sqlstore.Store._insert_many(conn, buf)
    st.close()
    took = time.perf_counter() - t
    if not url.startswith("sqlite"):  # what autovacuum does after a bulk load: planner statistics
        eng = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(sa.text("VACUUM ANALYZE job_records, job_json, job_hours"))
        eng.dispose()
    return took


def _sizes(url: str, n: int) -> tuple[float, float]:
    """(bytes per job without the record JSON, with it)."""
    import sqlalchemy as sa

    eng = sa.create_engine(url)
    with eng.connect() as c:
        if url.startswith("sqlite"):
            sizes = dict(c.execute(sa.text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")).all())
            js = sizes.get("job_json", 0)
            total = sum(sizes.values())
        else:
            def rel(t):
                return c.execute(sa.text(f"SELECT pg_total_relation_size('{t}')")).scalar()
            js = rel("job_json")
            total = js + rel("job_records") + rel("job_hours")
    eng.dispose()
    return (total - js) / n, total / n


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _median_proc(cmd, reps, env) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
        ts.append(time.perf_counter() - t)
        assert p.returncode == 0, (cmd, p.stderr[-2000:])
    return statistics.median(ts) * 1000


def _rollup_inproc(url: str, months: list[str], reps: int) -> float:
    from slurm_energy.store.rollup import month_rollup

    ts = []
    for _ in range(reps):
        st = open_store(url, readonly=True)
        t = time.perf_counter()
        with st.engine.connect() as conn:
            for m in months:
                month_rollup(conn, "user", *month_bounds(m))
        ts.append(time.perf_counter() - t)
        st.close()
    return statistics.median(ts) * 1000


def _sacct(reps: int) -> str:
    tc = os.path.join(REPO, "scripts", "testcluster.sh")
    if subprocess.run([tc, "status"], capture_output=True).returncode != 0:
        return "sacct -j: not measured (the test cluster is not running: scripts/testcluster.sh start)"
    got = subprocess.run(["flock", "-w", "120", "/tmp/se-cluster.lock", tc, "env"], capture_output=True, text=True)
    if got.returncode != 0 or "=" not in got.stdout:
        return "sacct -j: not measured (the test cluster's lock was held for over 120 s by another run)"
    env = dict(os.environ, SLURM_CONF=got.stdout.strip().split("=", 1)[1])
    last = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now-30days"], capture_output=True,
                          text=True, env=env).stdout.split()
    if not last:
        return "sacct -j: not measured (no job in the test cluster's accounting)"
    ms = _median_proc(["flock", "/tmp/se-cluster.lock", "sacct", "-j", last[-1]], reps, env)
    return f"sacct -j {last[-1]} (test cluster, new process, incl. flock)         {ms:8.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/slurm-energy-bench-v2")
    ap.add_argument("--pg", default=os.environ.get("SLURM_ENERGY_TEST_PG_URL", ""))
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--no-fill", action="store_true", help="reuse the stores an earlier run filled (same --n)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    cfgdir = tempfile.mkdtemp(prefix="se-bench-cfg-")
    cfg = os.path.join(cfgdir, "site.yaml")
    with open(cfg, "w") as f:
        f.write("{}\n")
    env = dict(os.environ, PYTHONPATH=REPO, SLURM_ENERGY_CONFIG=cfg)
    os.environ["SLURM_ENERGY_CONFIG"] = cfg
    # the hooks' resolved copy of site.yaml, as a Prolog leaves it on a node
    subprocess.run([sys.executable, "-c", "from slurm_energy.slurm.hookconfig import load_hook_config as f; f()"],
                   env=env, check=True)
    py = sys.executable
    for n in a.n:
        step = 25.0 if n <= 100_000 else 31.5
        urls = ([] if a.no_sqlite else [f"sqlite:///{a.dir}/store-{n}.db"]) + ([a.pg] if a.pg else [])
        for url in urls:
            name = "sqlite" if url.startswith("sqlite") else "postgresql"
            fill = "" if a.no_fill else f"fill {_fill(url, n, step):.0f} s; "
            no_json, with_json = _sizes(url, n)
            print(f"[{name} {n} jobs] {fill}{no_json:.0f} bytes/job without the record JSON, {with_json:.0f} with it")
            print(f"[{name} {n} jobs] rollup --month 2026-01 (SQL, in-process)          "
                  f"{_rollup_inproc(url, ['2026-01'], a.reps):8.1f} ms")
            if n > 100_000:
                year = [f"2026-{m:02d}" for m in range(1, 13)]
                print(f"[{name} {n} jobs] rollup of the year, 12 months (SQL, in-process) "
                      f"{_rollup_inproc(url, year, a.reps):8.1f} ms")
            cli = [py, "-m", "slurm_energy.cli.main", "rollup", "--month", "2026-01", "--store", url, "-P"]
            print(f"[{name} {n} jobs] slurm-energy rollup --month 2026-01 (new process) "
                  f"{_median_proc(cli, a.reps, env):8.1f} ms")
            je = [py, "-m", "slurm_energy.cli.jobenergy", "--store", url, "-P"]
            for what, extra in (("-j <early id>", ["-j", "1000010"]), ("-j <late id>", ["-j", str(1_000_000 + n - 10)]),
                                ("one day early", ["-S", "2026-01-02", "-E", "2026-01-03"]),
                                ("one day late", ["-S", _day(T0 + (n - 5000) * step),
                                                  "-E", _day(T0 + (n - 5000) * step + 86400)])):
                print(f"[{name} {n} jobs] jobenergy {what:14s} (new process)          "
                      f"{_median_proc(je + extra, a.reps * 3, env):8.1f} ms")
    print(f"python -c pass (new process)                                       "
          f"{_median_proc([py, '-c', 'pass'], a.reps * 3, env):8.1f} ms")
    print(_sacct(a.reps * 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())

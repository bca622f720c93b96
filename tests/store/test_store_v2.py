"""Store schema v2 (issue 12.4): summary columns, job_json, job_hours; the SQL rollup against the
whole-record rollup; v1 stores migrated in place; a time window's index plan bounded at both ends."""

import os
import random

import pytest

from slurm_energy.model import Method
from slurm_energy.reporting.rollup_table import month_bounds
from slurm_energy.store import open_store, schema
from slurm_energy.store.db import connect
from slurm_energy.store.rollup import month_rollup
from tests.helpers.jobrecord_factory import finished, node_record
from tests.helpers.rollup_oracle import rollup
from tests.helpers.store_backends import store, store_url  # noqa: F401  (fixtures)

H = 3600.0
T_OCT = 1_790_812_800.0  # 2026-10-01T00:00Z


def _job(k: int, start: float, hours: float, *, hourly=True, cpu_j=3.6e6, skew=False, user=None):
    """A finished one-node job; its node's hourly energy spread evenly over the UTC hours it ran
    (``skew``: one more hour stamped a day before it started, as a node with a wrong clock)."""
    end = start + hours * H
    rec = node_record(job_id=str(k), start=start, end=end, cpu_j=cpu_j, user=user or f"u{k % 3}",
                      account=f"a{k % 2}", partition="" if k % 5 == 0 else "batch")
    if hourly and cpu_j is not None:
        from slurm_energy.carbon.hourly import split_interval_by_hour

        h = split_interval_by_hour(start, end, cpu_j + 3.6e5)
        if skew:
            h[next(iter(h))] *= 0.5
            from slurm_energy.carbon.hourly import hour_key

            h[hour_key(start - 86400)] = (cpu_j + 3.6e5) * 0.1
        rec.nodes[0].hourly_energy_j = h
    rec = finished(rec)
    if k % 4 == 1:  # a GPU read from its counter: the measured part
        rec.methods["cpu"] = Method.COUNTER
    return rec


def _mix(seed: int = 7) -> list:
    rnd = random.Random(seed)
    t0, t1 = month_bounds("2026-10", "Asia/Kolkata")  # a :30 zone: the month's bounds cut UTC hours
    recs = []
    for k in range(60):
        anchor = rnd.choice([t0, t1, t0 + 10 * 86400])
        start = anchor - rnd.uniform(0, 30) * H
        recs.append(_job(k, start, rnd.choice([0.0, 0.25, 2.5, 40.0]), hourly=k % 6 != 0,
                         cpu_j=None if k % 11 == 0 else rnd.uniform(1e5, 9e6), skew=k % 7 == 0))
    return recs


@pytest.mark.parametrize("by", ["user", "account", "partition"])
def test_sql_rollup_equals_whole_record_rollup(store, by):
    """Jobs across both bounds of a month in a :30 time zone, zero-length jobs, jobs without hourly
    energy (split by wall time), hours stamped outside the job's times, unmeasured jobs: the SQL
    aggregate gives rollup_table.rollup's numbers (the reference over whole records)."""
    recs = _mix()
    store.put_many(recs)
    t0, t1 = month_bounds("2026-10", "Asia/Kolkata")
    want = rollup(recs, by, t0, t1).to_dict("records")
    got = month_rollup(store.db, by, t0, t1)
    assert [r[by] for r in got] == [r[by] for r in want] and len(got) >= 2
    for g, w in zip(got, want):
        assert (g["jobs"], g["unmeasured_jobs"]) == (w["jobs"], w["unmeasured_jobs"])
        for k in ("it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh"):
            assert (g[k] is None) == (w[k] is None), (k, g, w)
            if w[k] is not None:
                assert g[k] == pytest.approx(w[k], rel=1e-9), (k, g, w)


def test_month_split_by_hand(store):
    # 2026-09-30 23:00Z .. 2026-10-01 02:00Z, 3 h, 1.08e7 J + 3.6e5 J RAM = 3.1 kWh IT spread evenly:
    # September gets 1 h = 3.1/3 kWh; October 2 h = 6.2/3 kWh; x PUE 1.5; x 400 g/kWh
    rec = _job(2, T_OCT - H, 3.0, cpu_j=1.08e7)  # k % 4 != 1: every class from the TDP model
    store.put(rec)
    [sep] = month_rollup(store.db, "user", *month_bounds("2026-09"))
    [oct_] = month_rollup(store.db, "user", *month_bounds("2026-10"))
    assert sep["it_kwh"] == pytest.approx(3.1 / 3) and oct_["it_kwh"] == pytest.approx(6.2 / 3)
    assert oct_["facility_kwh"] == pytest.approx(6.2 / 3 * 1.5)
    assert oct_["co2e_kg"] == pytest.approx(6.2 / 3 * 1.5 * 0.4)
    assert oct_["estimated_it_kwh"] == pytest.approx(6.2 / 3) and oct_["measured_it_kwh"] is None


def test_summary_columns_and_hours(store):
    rec = _job(2, T_OCT, 2.0, cpu_j=7.2e6)  # 7.2e6 + 3.6e5 J = 2.1 kWh over 2 h
    store.put(rec)
    [row] = store.db.execute("SELECT cpu_kwh, ram_kwh, gpu_kwh, classes, methods, elapsed_s, n_nodes, "
                             "hourly_it_kwh FROM job_records")
    hours = store.db.execute("SELECT hour_start, it_kwh, facility_kwh, co2e_kg FROM job_hours ORDER BY hour_start")
    cols = schema.columns(store.db, "job_records")
    assert row[0] == pytest.approx(2.0) and row[1] == pytest.approx(0.1) and row[2] is None
    assert (row[3], row[4], row[5], row[6]) == ("cpu,ram", "cpu=tdp_estimate,ram=tdp_estimate", 7200.0, 1)
    assert row[7] == pytest.approx(2.1)
    # per hour 1.05 kWh IT, x1.5 = 1.575 kWh facility, x 400 g/kWh = 0.63 kg
    assert [(h[0], round(h[1], 9), round(h[2], 9), round(h[3], 9)) for h in hours] == [
        (int(T_OCT), 1.05, 1.575, 0.63), (int(T_OCT + H), 1.05, 1.575, 0.63)]
    assert "record_json" not in cols  # the full record lives in job_json
    [got] = store.get_job("2")
    assert got.model_dump() == rec.model_dump()
    [summary] = store.rows(jobs=["2"])
    assert summary.energy_it_j == {"cpu": pytest.approx(7.2e6), "ram": pytest.approx(3.6e5)}


def _v1_store(url: str, recs: list) -> None:
    """A store of schema version 1 at ``url`` (its frozen DDL: one table, record_json) holding ``recs``."""
    db = connect(url)
    with db.transaction():
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version (version) VALUES (1)")
        for ddl in schema._v1_ddl(db.dialect):
            db.execute(ddl)
        for r in recs:
            db.execute('INSERT INTO job_records (cluster, job_id, start_time, end_time, "user", account, "partition", '
                       "status, it_kwh, facility_kwh, co2e_kg, record_json, updated_at) VALUES (:c, :j, :s, :e, :u, :a, "
                       ":p, :st, :it, :fac, :co2, :js, 0.0)",
                       {"c": r.cluster, "j": r.job_id, "s": r.start_time, "e": r.end_time, "u": r.user, "a": r.account,
                        "p": r.partition, "st": r.status.value, "it": r.it_kwh, "fac": r.facility_kwh,
                        "co2": r.co2e_kg, "js": r.model_dump_json()})
    db.close()


def test_v1_store_migrates_in_place(store_url):
    """A v1 database (one table, record_json) opened by this version: summary columns, job_json and
    job_hours backfilled from record_json, record_json dropped, records unchanged."""
    if store_url.startswith("sqlite"):
        os.makedirs(os.path.dirname(store_url[len("sqlite:///"):]))
    recs = [_job(k, T_OCT + k * H, 1.5, cpu_j=3.6e6 * (k + 1)) for k in range(3)]
    _v1_store(store_url, recs)
    st = open_store(store_url)
    assert schema.current_version(st.db) == schema.SCHEMA_VERSION
    cpu = [r[0] for r in st.db.execute("SELECT cpu_kwh FROM job_records ORDER BY start_time")]
    assert cpu == [pytest.approx(1.0), pytest.approx(2.0), pytest.approx(3.0)]  # 3.6e6 J x (k+1) = k+1 kWh
    assert st.db.execute("SELECT count(*) FROM job_hours") == [(3 * 2,)]  # each 1.5 h from the top of an hour: 2 h
    assert "record_json" not in schema.columns(st.db, "job_records")
    assert [r.model_dump() for r in st.query()] == [r.model_dump() for r in recs]
    st.close()


def test_time_window_selects_attempts_running_in_it(tmp_path):
    st = open_store(f"sqlite:///{tmp_path}/s.db")
    st.put_many([_job(k, T_OCT + k * 600.0, 1.0) for k in range(20)])
    got = st.rows(start=T_OCT + 3000, end=T_OCT + 6000)
    # running at some moment in [T+3000, T+6000]: jobs start k x 600 s, last 3600 s: k = 0 .. 10
    assert [r.job_id for r in got] == [str(k) for k in range(11)]
    full = st.query(users=["u1"])
    assert [r.job_id for r in full] == [str(k) for k in range(1, 20, 3)] and full[0].nodes
    st.close()


def test_time_window_plan_bounds_start_time_at_both_ends(tmp_path):
    """sacct's window (end >= S and start <= E) with the longest attempt's length as a lower bound on
    start_time: SQLite searches ix_start between two bounds, not every older row."""
    import sqlite3

    from slurm_energy.store import select as Q

    url = f"sqlite:///{tmp_path}/s.db"
    open_store(url).put_many([_job(k, T_OCT + k * 600.0, 1.0) for k in range(50)])
    conn = sqlite3.connect(f"{tmp_path}/s.db")
    w = Q.where(start=T_OCT + 86400, end=T_OCT + 2 * 86400, longest=3600.0)
    plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + Q.rows_sql(w), w.params))
    assert "USING INDEX ix_start (start_time>? AND start_time<?)" in plan, plan
    longest_plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + Q.LONGEST_SQL))
    assert "ix_elapsed" in longest_plan, longest_plan  # max(elapsed_s) read from the index's end
    from slurm_energy.jobid import parse_jobid

    w = Q.where(specs=[parse_jobid("sBR1JB8J1YM400")])  # a SLUID: its own indexed column (v4), no JSON read
    plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + Q.rows_sql(w), w.params))
    assert "USING INDEX ix_sluid (sluid=?)" in plan and "job_json" not in plan, plan


def test_jobenergy_reads_summary_rows_without_pydantic(tmp_path):
    """`jobenergy -j` on a SQLite store imports neither SQLAlchemy nor pydantic (its start-up time is
    what makes it faster than sacct; benchmarks/store_rollup.py measures it)."""
    import os
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path}/s.db"
    open_store(url).put_many([_job(k, T_OCT + k * 600.0, 1.0) for k in range(5)])
    cfg = tmp_path / "site.yaml"
    cfg.write_text("{}\n")
    env = dict(os.environ, SLURM_ENERGY_CONFIG=str(cfg))
    # the hooks' resolved copy of site.yaml (what a Prolog writes on a cluster)
    subprocess.run([sys.executable, "-c", "from slurm_energy.slurm.config_cache import load_hook_config as f; f()"],
                   env=env, check=True)
    code = ("import sys; from slurm_energy.cli.jobenergy import main; rc = main(sys.argv[1:]); "
            "print('MODS', ' '.join(m for m in ('sqlalchemy', 'pydantic') if m in sys.modules)); sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, "-j", "3", "--store", url, "-P", "-o",
                        "JobID,CPU_kWh,RAM_kWh,GPU_kWh,Facility_kWh,kgCO2e,Elapsed"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1].strip() == "MODS"
    row = dict(zip(lines[0].split("|"), lines[1].split("|")))
    # 3.6e6 J CPU = 1 kWh; 3.6e5 J RAM = 0.1 kWh; facility 1.1 x 1.5 = 1.65; 1.65 x 0.4 = 0.66 kg
    assert (row["JobID"], row["CPU_kWh"], row["RAM_kWh"], row["GPU_kWh"]) == ("3", "1", "0.1", "-")
    assert (row["Facility_kWh"], row["kgCO2e"], row["Elapsed"]) == ("1.65", "0.66", "01:00:00")


def test_reader_on_a_v1_store_says_how_to_migrate(tmp_path):
    db = tmp_path / "v1.db"
    _v1_store(f"sqlite:///{db}", [])
    with pytest.raises(RuntimeError, match="schema version 1, older .* `slurm-energy collect`"):
        open_store(f"sqlite:///{db}", readonly=True)

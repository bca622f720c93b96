import os
import stat

import pytest

from slurm_energy.accounting.merge import merge_interim, merge_records
from slurm_energy.model import Status
from slurm_energy.store import open_store
from slurm_energy.store.schema import SCHEMA_VERSION
from tests.helpers.jobrecord_factory import finished, node_record
from tests.helpers.store_backends import store, store_url  # noqa: F401  (fixtures)


def test_roundtrip_full_record(store):
    rec = finished(node_record(job_id="100", cpu_j=3.6e6, ram_j=3.6e5))
    store.put(rec)
    [got] = store.get_job("100")
    assert got.model_dump() == rec.model_dump()
    # 3.6e6 + 3.6e5 J = 3.96e6 J = 1.1 kWh IT; x PUE 1.5 = 1.65 kWh; x 400 g/kWh = 660 g = 0.66 kg
    assert got.it_kwh == pytest.approx(1.1)
    assert got.facility_kwh == pytest.approx(1.65)
    assert got.co2e_kg == pytest.approx(0.66)


def test_unmeasured_stays_none(store):
    rec = finished(node_record(job_id="101", cpu_j=None, ram_j=None))
    assert rec.it_kwh is None
    store.put(rec)
    [v] = store.db.execute("SELECT it_kwh, co2e_kg FROM job_records WHERE job_id='101'")
    assert tuple(v) == (None, None)  # SQL NULL, never 0
    assert store.get_job("101")[0].energy_it_j == {"cpu": None, "ram": None}


def test_upsert_same_key_replaces(store):
    rec = finished(node_record(job_id="102", cpu_j=3.6e6))
    store.put(rec)
    rec2 = finished(node_record(job_id="102", cpu_j=7.2e6))  # same cluster/job/start
    store.put(rec2)
    got = store.get_job("102")
    assert len(got) == 1
    # 7.2e6 + 3.6e5 J = 7.56e6 J = 2.1 kWh
    assert got[0].it_kwh == pytest.approx(2.1)


def test_requeued_attempts_are_separate_rows(store):
    a0 = finished(node_record(job_id="103", start=1000.0, end=2000.0, restart_count=0))
    a1 = finished(node_record(job_id="103", start=5000.0, end=9000.0, restart_count=1))
    store.put(a1)
    store.put(a0)
    got = store.get_job("103")
    assert [(r.restart_count, r.start_time) for r in got] == [(0, 1000.0), (1, 5000.0)]


def test_array_and_het_forms(store):
    # array 715219: tasks 1,2 with raw ids 715219 (task 1 keeps the array id) and 715220
    t1 = finished(node_record(job_id="715219", array_job_id="715219", array_task_id="1"))
    t2 = finished(node_record(job_id="715220", array_job_id="715219", array_task_id="2"))
    h0 = finished(node_record(job_id="1234", het_job_id="1234", het_job_offset="0"))
    h1 = finished(node_record(job_id="1235", het_job_id="1234", het_job_offset="1"))
    for r in (t1, t2, h0, h1):
        store.put(r)
    ids = lambda rs: sorted(r.job_id for r in rs)
    assert ids(store.get_job("715219")) == ["715219", "715220"]  # whole array
    assert ids(store.get_job("715219_2")) == ["715220"]
    assert ids(store.get_job("715220")) == ["715220"]  # same task by its raw id
    assert ids(store.get_job("715219_[1-2]")) == ["715219", "715220"]
    assert ids(store.get_job("1234")) == ["1234", "1235"]  # all components
    assert ids(store.get_job("1234+1")) == ["1235"]
    assert ids(store.get_job("1235")) == ["1235"]
    assert ids(store.get_job("1234+1.batch")) == ["1235"]  # step -> its job
    assert store.get_job("999") == []
    with pytest.raises(ValueError, match="not valid"):
        store.get_job("12x")


def test_query_filters(store):
    store.put(finished(node_record(job_id="1", user="alice", account="a", partition="p", start=100.0, end=200.0)))
    store.put(finished(node_record(job_id="2", user="bob", account="b", partition="q", start=300.0, end=400.0)))
    store.put(finished(node_record(job_id="3", user="bob", account="a", partition="p", start=500.0, end=600.0,
                                   status=Status.PARTIAL)))
    ids = lambda rs: [r.job_id for r in rs]
    assert ids(store.query(users=["bob"])) == ["2", "3"]
    assert ids(store.query(accounts=["a"])) == ["1", "3"]
    assert ids(store.query(partitions=["q"])) == ["2"]
    assert ids(store.query(states=["partial"])) == ["3"]
    # window [350, 550] overlaps job 2 (300-400) and job 3 (500-600), not job 1 (100-200)
    assert ids(store.query(start=350.0, end=550.0)) == ["2", "3"]
    assert ids(store.query(jobs=["1", "3"], users=["bob"])) == ["3"]
    assert ids(store.query(limit=2)) == ["2", "3"]  # newest two, oldest first
    with pytest.raises(ValueError, match="start=600.0 is after end=100.0"):
        store.query(start=600.0, end=100.0)


def test_interim_records_merge_then_final_replaces(store):
    # two nodes flush interim views with slightly different Prolog times
    i1 = finished(node_record(job_id="50", node="n1", start=1000.0, end=1060.0, cpu_j=3.6e5, ram_j=0.0,
                              expected=("n1", "n2"), status=Status.RUNNING))
    i2 = finished(node_record(job_id="50", node="n2", start=1001.0, end=1061.0, cpu_j=7.2e5, ram_j=0.0,
                              expected=("n1", "n2"), status=Status.RUNNING))
    store.put(i1, merge_running=merge_interim)  # as StoreSink does
    store.put(i2, merge_running=merge_interim)
    [row] = store.get_job("50")
    assert row.status == Status.RUNNING
    assert sorted(n.node for n in row.nodes) == ["n1", "n2"]
    # energy so far: 3.6e5 + 7.2e5 J = 1.08e6 J = 0.3 kWh (re-totalled by finalise_record)
    assert row.it_kwh == pytest.approx(0.3)
    final = finished(merge_records([
        node_record(job_id="50", node="n1", start=1000.0, end=4600.0, expected=("n1", "n2")),
        node_record(job_id="50", node="n2", start=1001.0, end=4601.0, expected=("n1", "n2")),
    ]))
    store.put(final)
    [row] = store.get_job("50")
    assert row.status == Status.COMPLETE and row.end_time == 4601.0
    # a late interim flush does not overwrite the final record
    store.put(i1, merge_running=merge_interim)
    [row] = store.get_job("50")
    assert row.status == Status.COMPLETE


def _node_rows(store, job_id):
    return store.db.execute("SELECT node, record_json FROM running_nodes WHERE job_id = :j ORDER BY node",
                            {"j": job_id})


def test_progress_update_writes_only_its_node_row(store):
    """Each node's interim flush writes its own running_nodes row; readers assemble the job's view."""
    def view(node, start, end, cpu_j):
        return finished(node_record(job_id="51", node=node, start=start, end=end, cpu_j=cpu_j, ram_j=0.0,
                                    expected=("n1", "n2"), status=Status.RUNNING))

    store.put(view("n1", 1000.0, 1060.0, 3.6e5), merge_running=merge_interim)
    store.put(view("n2", 1001.0, 1061.0, 7.2e5), merge_running=merge_interim)
    assert [r[0] for r in _node_rows(store, "51")] == ["n1", "n2"]
    # the job's stored JSON is still n1's first view: n2's update did not rewrite it
    [(text,)] = store.db.execute("SELECT j.record_json FROM job_json j JOIN job_records t ON t.id = j.id "
                                 "WHERE t.job_id = '51'")
    assert '"n2"' not in text.replace('"expected_nodes":["n1","n2"]', "")
    # jobenergy's table (summary rows) and -l (records): 3.6e5 + 7.2e5 J = 1.08e6 J = 0.3 kWh IT,
    # x PUE 1.5 = 0.45 kWh facility, x 400 gCO2e/kWh = 0.18 kgCO2e; CPU 0.3 kWh
    [row] = store.rows(jobs=["51"])
    assert row.status == "running" and row.it_kwh == pytest.approx(0.3) and row.cpu_kwh == pytest.approx(0.3)
    assert row.facility_kwh == pytest.approx(0.45) and row.co2e_kg == pytest.approx(0.18)
    assert row.end_time == 1061.0 and row.n_nodes == 2
    [rec] = store.get_job("51")
    assert sorted(n.node for n in rec.nodes) == ["n1", "n2"] and rec.it_kwh == pytest.approx(0.3)
    # n1's next flush replaces its own row only: 5.4e5 + 7.2e5 J = 1.26e6 J = 0.35 kWh
    store.put(view("n1", 1000.0, 1120.0, 5.4e5), merge_running=merge_interim)
    assert len(_node_rows(store, "51")) == 2
    [rec] = store.get_job("51")
    assert rec.it_kwh == pytest.approx(0.35) and rec.end_time == 1120.0
    assert store.rows(jobs=["51"])[0].end_time == 1120.0
    # the final record replaces the running row and clears the node rows
    store.put(finished(merge_records([
        node_record(job_id="51", node="n1", start=1000.0, end=4600.0, expected=("n1", "n2")),
        node_record(job_id="51", node="n2", start=1001.0, end=4601.0, expected=("n1", "n2"))])))
    assert _node_rows(store, "51") == []
    [rec] = store.get_job("51")
    assert rec.status == Status.COMPLETE and store.count() == 1


def test_reopen_does_not_remigrate(store_url):
    s = open_store(store_url)
    s.put(finished(node_record(job_id="7")))
    s.close()
    s2 = open_store(store_url)
    assert s2.count() == 1
    assert s2.db.execute("SELECT max(version) FROM schema_version") == [(SCHEMA_VERSION,)]
    s2.close()


def test_readonly_refuses_put(store_url):
    open_store(store_url).close()
    ro = open_store(store_url, readonly=True)
    with pytest.raises(PermissionError, match="read-only"):
        ro.put(finished(node_record()))
    ro.close()


def test_sqlite_file_modes(tmp_path):
    s = open_store(f"sqlite:///{tmp_path}/new/spool/store.db")
    s.close()
    p = tmp_path / "new" / "spool" / "store.db"
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(p.parent).st_mode) == 0o755


def test_bad_url():
    with pytest.raises(ValueError, match="mysql"):
        open_store("mysql://x/y")
    with pytest.raises(ValueError, match="cannot be parsed"):
        open_store("not a url")


def test_final_record_answers_is_this_run_stored_by_the_one_run_rule(store):
    from slurm_energy.jobmeta import RunKey

    # run 1 of job 500 (t 1000-4600 s), then the same id reused (t 9000-9500 s): two runs, one key each
    first = finished(node_record(job_id="500", start=1000.0, end=4600.0))
    store.put(first)
    store.put(finished(node_record(job_id="500", start=9000.0, end=9500.0, status=Status.NO_DATA)))
    store.put(finished(node_record(job_id="501", start=1000.0, end=4600.0, status=Status.RUNNING)))
    # a Prolog at t = 1000.4 s (inside run 1's span): run 1's record, measured
    got = store.final_record(RunKey("500", restart_count=0, start=1000.4), measured=True)
    assert got is not None and (got.start_time, got.end_time, got.status) == (1000.0, 4600.0, Status.COMPLETE)
    # 3.6 s after run 1's end (slack 2 s) and before run 2: no run stored there
    assert store.final_record(RunKey("500", restart_count=0, start=4603.6)) is None
    # run 2 is stored, but only as no_data: final, not measured
    assert store.final_record(RunKey("500", start=9100.0)).status == Status.NO_DATA
    assert store.final_record(RunKey("500", start=9100.0), measured=True) is None
    # another restart count, or a running record only: nothing final stored
    assert store.final_record(RunKey("500", restart_count=1, start=1000.4)) is None
    assert store.final_record(RunKey("501", start=1000.4)) is None
    # a key without a span (prune's "is this attempt stored at all?"): the newest final record
    assert store.final_record(RunKey("500", restart_count=0)).start_time == 9000.0
    with pytest.raises(ValueError, match="job id"):
        store.final_record(RunKey(None))

import os
import stat
import threading

import pytest

from slurm_energy.accounting.merge import merge_records
from slurm_energy.model import Status
from slurm_energy.slurm.jobend.results import node_record_path, write_node_record
from tests.helpers.jobrecord_factory import node_record, try_merge


def _energy(rec, node, cls):
    ns = next(n for n in rec.nodes if n.node == node)
    return sum(d.energy_j for d in ns.devices if d.device_class == cls)


def test_node_record_path_layout(tmp_path):
    p = node_record_path(tmp_path, "c1", "715219", 2, "n7")
    assert p == tmp_path / "c1" / "715219.2" / "n7.json"
    assert node_record_path(tmp_path, "", "5", 0, "n1") == tmp_path / "default" / "5.0" / "n1.json"


@pytest.mark.parametrize("field, kw", [("node", dict(node="../x")), ("job_id", dict(job_id="1/2")),
                                       ("cluster", dict(cluster=".."))])
def test_node_record_path_rejects_escape(tmp_path, field, kw):
    args = dict(cluster="c1", job_id="1", restart_count=0, node="n1")
    args.update(kw)
    with pytest.raises(ValueError, match=field):
        node_record_path(tmp_path, **args)


def test_write_is_atomic_and_private(tmp_path):
    rec = node_record(node="n1")
    p = write_node_record(tmp_path / "results", rec)
    assert p.exists()
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    for d in (tmp_path / "results", p.parent.parent, p.parent):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    # no temp files left behind
    assert [x.name for x in p.parent.iterdir()] == ["n1.json"]


def test_write_refuses_multi_node_record(tmp_path):
    a = node_record(node="n1")
    a.nodes += node_record(node="n2").nodes
    with pytest.raises(ValueError, match="2 nodes"):
        write_node_record(tmp_path, a)


def test_merge_two_nodes_sums_per_node_not_multiplied():
    # node n1: cpu 3.6e6 J, node n2: cpu 7.2e6 J -> merged keeps both; the sum over nodes is
    # 3.6e6 + 7.2e6 = 1.08e7 J (not 2 x anything)
    a = node_record(node="n1", start=1000.0, end=4600.0, cpu_j=3.6e6, expected=("n1", "n2"))
    b = node_record(node="n2", start=1001.5, end=4605.0, cpu_j=7.2e6, expected=("n1", "n2"))
    m = merge_records([b, a])
    assert [n.node for n in m.nodes] == ["n1", "n2"]
    assert _energy(m, "n1", "cpu") == pytest.approx(3.6e6)  # J
    assert _energy(m, "n2", "cpu") == pytest.approx(7.2e6)  # J
    total_cpu_j = sum(d.energy_j for n in m.nodes for d in n.devices if d.device_class == "cpu")
    assert total_cpu_j == pytest.approx(1.08e7)  # J
    assert m.start_time == 1000.0 and m.end_time == 4605.0  # min start, max end (s)
    assert m.status == Status.COMPLETE
    assert m.it_kwh is None and m.energy_it_j == {}  # totals are finalise_record's job


def test_merge_same_node_twice_counts_once():
    a = node_record(node="n1", cpu_j=3.6e6)
    m = merge_records([a, a.model_copy(deep=True)])
    assert len(m.nodes) == 1
    assert _energy(m, "n1", "cpu") == pytest.approx(3.6e6)  # J, once
    # and merging a merged record with its parts again changes nothing (idempotent)
    assert merge_records([m, a]).model_dump() == m.model_dump()


def test_final_node_summary_beats_interim():
    interim = node_record(node="n1", end=2000.0, cpu_j=1.0e6, status=Status.RUNNING)
    final = node_record(node="n1", end=4600.0, cpu_j=3.6e6)
    m = merge_records([final, interim])
    assert _energy(m, "n1", "cpu") == pytest.approx(3.6e6)
    assert m.status == Status.COMPLETE


def test_missing_node_gives_partial_with_error():
    a = node_record(node="n1", expected=("n1", "n2"))
    m = merge_records([a])
    assert m.status == Status.PARTIAL
    assert "node n2 never reported" in m.errors
    assert m.coverage_complete is False


def test_errors_are_unioned_and_facts_filled():
    a = node_record(node="n1", errors=["x"], account="")
    b = node_record(node="n2", errors=["x", "y"], account="physics", array_job_id="9", array_task_id="3")
    m = merge_records([a, b])
    assert m.errors == ["x", "y"]
    assert m.account == "physics" and m.array_job_id == "9" and m.array_task_id == "3"


def test_merge_refuses_other_jobs():
    with pytest.raises(ValueError, match="job_id differs"):
        merge_records([node_record(job_id="1"), node_record(job_id="2")])
    with pytest.raises(ValueError, match="no records"):
        merge_records([])


def test_try_merge_waits_for_all_nodes(tmp_path):
    exp = ["n1", "n2"]
    write_node_record(tmp_path, node_record(node="n1", expected=exp))
    assert try_merge(tmp_path, "c1", "100", 0, exp) is None
    write_node_record(tmp_path, node_record(node="n2", expected=exp))
    m = try_merge(tmp_path, "c1", "100", 0, exp)
    assert m is not None and [n.node for n in m.nodes] == exp
    # idempotent
    assert try_merge(tmp_path, "c1", "100", 0, exp).model_dump() == m.model_dump()
    # another attempt (requeue, restart_count 1) is separate
    assert try_merge(tmp_path, "c1", "100", 1, exp) is None


def test_try_merge_concurrent_last_writers(tmp_path):
    # 8 nodes write and try to merge at once; every caller that returns a record returns the
    # same complete 8-node record, and at least one does (the last writer sees all 8).
    exp = [f"n{i}" for i in range(1, 9)]
    results = []
    barrier = threading.Barrier(len(exp))

    def epilog(node):
        barrier.wait()
        write_node_record(tmp_path, node_record(node=node, expected=exp))
        results.append(try_merge(tmp_path, "c1", "100", 0, exp))

    ts = [threading.Thread(target=epilog, args=(n,)) for n in exp]
    [t.start() for t in ts]
    [t.join() for t in ts]
    merged = [r for r in results if r is not None]
    assert merged
    assert all(len(r.nodes) == 8 for r in merged)
    assert len({r.model_dump_json() for r in merged}) == 1


def test_try_merge_requires_expected_nodes(tmp_path):
    with pytest.raises(ValueError, match="expected_nodes"):
        try_merge(tmp_path, "c1", "100", 0, [])


def test_waiting_finalizer_reads_no_record(tmp_path):
    # n1 has reported, n2 not: the names answer "not all here" before any record is read -- a file
    # that does not parse would raise MergeError if it were read
    exp = ["n1", "n2"]
    path = write_node_record(tmp_path, node_record(node="n1", expected=exp))
    path.write_text("{not json")
    (path.parent / "n2.1796034000.json").write_text("{}")  # an older run's n2, kept aside: not n2
    (path.parent / ".n2.json.tmp.json").write_text("{}")  # a temp file: not n2
    from slurm_energy.slurm.jobend.results import reported_names

    assert reported_names(path.parent) == {"n1", "n2.1796034000"}
    assert try_merge(tmp_path, "c1", "100", 0, exp) is None
    write_node_record(tmp_path, node_record(node="n2", expected=exp))
    with pytest.raises(ValueError, match="n1.json: not a valid JobRecord"):  # the last one reads them all
        try_merge(tmp_path, "c1", "100", 0, exp)

"""The one run rule (slurm_energy.jobmeta.same_run): which run of a job a record, a stored row, a
spool's context or an sacct line belongs to."""

from slurm_energy.accounting.merge import same_run as same_run_records
from slurm_energy.jobmeta import RunKey, same_run
from tests.helpers.jobrecord_factory import node_record


def test_slurms_identity_decides_where_both_sides_know_it():
    a = RunKey("7", sluid="S0000000000001", start=0.0, end=10.0)
    assert same_run(a, RunKey("7", sluid="S0000000000001", start=500.0)) is True  # spans not looked at
    assert same_run(a, RunKey("7", sluid="S0000000000002", start=5.0)) is False  # overlapping, another run
    assert same_run(RunKey("7", slurm_start_time=1700000000), RunKey("7", slurm_start_time=1700000000.0)) is True
    assert same_run(RunKey("7", slurm_start_time=1700000000), RunKey("7", slurm_start_time=1700000060)) is False


def test_without_slurms_identity_the_node_list_and_the_spans_decide():
    a = RunKey("7", cluster="c", restart_count=0, nodes=("n1", "n2"), start=1000.0, end=2000.0)
    later = RunKey("7", cluster="c", restart_count=0, nodes=("n1", "n2"), start=2001.5, end=2100.0)
    assert same_run(a, later) is True  # 1.5 s after its end: within the 2 s slack
    assert same_run(a, RunKey("7", cluster="c", restart_count=0, nodes=("n1", "n2"), start=2002.5)) is False  # 2.5 s after
    assert same_run(a, RunKey("7", cluster="c", restart_count=0, nodes=("n3",), start=1500.0)) is False
    assert same_run(a, RunKey("7", cluster="c", restart_count=1, start=1500.0)) is False  # a requeued attempt
    assert same_run(a, RunKey("8", start=1500.0)) is False
    assert same_run(a, RunKey("7", cluster="d", start=1500.0)) is False
    assert same_run(a, RunKey("7")) is None  # nothing to compare: the caller decides


def test_a_spool_context_and_a_record_key():
    ctx = {"job_id": "7", "cluster": "c", "restart_count": 2, "sluid": "", "slurm_start_time": None,
           "nodelist": "n[1-2]", "prolog_time": 1000.25}
    k = RunKey.of_context(ctx)
    assert (k.job_id, k.cluster, k.restart_count, k.nodes, k.start) == ("7", "c", 2, ("n[1-2]",), 1000.25)
    assert RunKey.of_context(ctx, restart=False).restart_count is None
    r = node_record(job_id="7", node="n2", start=1000.0, end=4600.0, expected=("n2", "n1"))
    rk = RunKey.of_record(r)
    assert (rk.nodes, rk.start, rk.end, rk.restart_count) == (("n1", "n2"), 1000.0, 4600.0, 0)
    assert RunKey.of_record(r, nodes=False, restart=False).nodes is None


def test_merge_uses_the_rule_on_records():
    a = node_record(job_id="7", node="n1", start=1000.0, end=4600.0, expected=("n1", "n2"))
    b = node_record(job_id="7", node="n2", start=1001.0, end=4601.0, expected=("n1", "n2"))
    later = node_record(job_id="7", node="n1", start=9000.0, end=9100.0, expected=("n1", "n2"))
    assert same_run_records(a, b) and not same_run_records(a, later)

import pytest

from jobrecord_factory import node_record
from slurm_energy.jobid import JobSpec, display_id, matches, parse_jobid, parse_jobids, split_reused


@pytest.mark.parametrize(
    "text, spec",
    [
        ("715219", JobSpec("715219", "715219")),
        ("715219_23", JobSpec("715219_23", "715219", array_tasks=("23",))),
        ("715219_[1-3,7]", JobSpec("715219_[1-3,7]", "715219", array_tasks=("1", "2", "3", "7"))),
        ("1234+0", JobSpec("1234+0", "1234", het_offset="0")),
        ("1234+1.batch", JobSpec("1234+1.batch", "1234", het_offset="1", step="batch")),
        ("100.extern", JobSpec("100.extern", "100", step="extern")),
        ("100.0", JobSpec("100.0", "100", step="0")),
        ("715219_23.2", JobSpec("715219_23.2", "715219", array_tasks=("23",), step="2")),
    ],
)
def test_parse_forms(text, spec):
    assert parse_jobid(text) == spec


@pytest.mark.parametrize("bad", ["", "abc", "12_", "12+", "12.foo", "1_[3-1]", "1_2+3"])
def test_parse_rejects(bad):
    with pytest.raises(ValueError) as ei:
        parse_jobid(bad)
    assert repr(bad) in str(ei.value) or "runs backwards" in str(ei.value)


def test_parse_comma_lists_keep_brackets():
    specs = parse_jobids(["1,2_[3,5]", "4+1"])
    assert [s.raw for s in specs] == ["1", "2_[3,5]", "4+1"]
    assert specs[1].array_tasks == ("3", "5")


def test_matches_and_display():
    task = node_record(job_id="715242", array_job_id="715219", array_task_id="23")
    comp = node_record(job_id="1235", het_job_id="1234", het_job_offset="1")
    plain = node_record(job_id="42")
    assert matches(parse_jobid("715219"), task)  # whole array
    assert matches(parse_jobid("715219_23"), task)
    assert matches(parse_jobid("715242"), task)  # raw id of the task
    assert not matches(parse_jobid("715219_22"), task)
    assert matches(parse_jobid("1234"), comp) and matches(parse_jobid("1234+1"), comp)
    assert not matches(parse_jobid("1234+0"), comp)
    assert matches(parse_jobid("42.batch"), plain)
    assert (display_id(task), display_id(comp), display_id(plain)) == ("715219_23", "1234+1", "42")


def test_split_reused_requeue_vs_reuse():
    # attempts 0,1 of one job (requeue), then the id reused a month later (restart_count 0 again)
    a0 = node_record(job_id="9", start=100.0, restart_count=0)
    a1 = node_record(job_id="9", start=500.0, restart_count=1)
    b0 = node_record(job_id="9", start=2.6e6, restart_count=0)
    jobs = split_reused([b0, a1, a0])
    assert [[r.start_time for r in j] for j in jobs] == [[100.0, 500.0], [2.6e6]]

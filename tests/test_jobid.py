import pytest

from slurm_energy.jobid import JobSpec, display_id, matches, parse_jobid, parse_jobids, split_reused
from tests.helpers.jobrecord_factory import node_record


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


@pytest.mark.parametrize("bad", ["", "abc", "12_", "12+", "12.foo", "1_[3-1]", "1_2+3", "1_[1-3:0]", "1_[1:2]"])
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


# Every job id form sacct prints, restated from Slurm's source (SchedMD/slurm commit 284c3b95f0):
# the job part is slurmdb_get_job_id_str() (src/common/slurmdb_defs.c: "%u_[%s]", "%u_%u", "%u+%u",
# "%u"), a step adds "." and log_build_step_id_str() (src/common/log.c: batch, extern, interactive,
# TBD or "%u", then "+%u" for step_het_comp); sacct -j / squeue -j read them with
# unfmt_job_id_string() (src/common/slurm_protocol_defs.c), step names in any case.
SACCT_FORMS = [
    ("123", dict(job_id="123")),
    ("123.batch", dict(job_id="123", step="batch")),
    ("123.extern", dict(job_id="123", step="extern")),
    ("123.interactive", dict(job_id="123", step="interactive")),
    ("123.TBD", dict(job_id="123", step="TBD")),
    ("123.Batch", dict(job_id="123", step="batch")),  # xstrncasecmp: any case
    ("123.0", dict(job_id="123", step="0")),
    ("123_4", dict(job_id="123", array_tasks=("4",))),
    ("123_[1-3]", dict(job_id="123", array_tasks=("1", "2", "3"))),
    ("123_[1-3,7]", dict(job_id="123", array_tasks=("1", "2", "3", "7"))),
    ("123_[0-12:4]", dict(job_id="123", array_tasks=("0", "4", "8", "12"))),  # slurm_parse_array_tok's step
    ("123_[1-4%2]", dict(job_id="123", array_tasks=("1", "2", "3", "4"))),  # squeue's throttle: not a task

    ("123_4.0", dict(job_id="123", array_tasks=("4",), step="0")),
    ("123_4.batch", dict(job_id="123", array_tasks=("4",), step="batch")),
    ("123+1", dict(job_id="123", het_offset="1")),
    ("123+1.0", dict(job_id="123", het_offset="1", step="0")),
    ("123.0+1", dict(job_id="123", step="0", step_het_comp="1")),  # a het step
    ("123.0+0", dict(job_id="123", step="0", step_het_comp="0")),  # log.c prints +0 too
]


@pytest.mark.parametrize("text, fields", SACCT_FORMS)
def test_every_form_sacct_prints_parses(text, fields):
    assert parse_jobid(text) == JobSpec(text, **fields)


@pytest.mark.parametrize("text", [t for t, _ in SACCT_FORMS])
def test_every_form_sacct_prints_selects_its_job(text):
    # energy is per job allocation: any step of 123 (or of task 4 / component 1) selects the job
    plain = node_record(job_id="123")
    task = node_record(job_id="127", array_job_id="123", array_task_id="4")
    comp = node_record(job_id="124", het_job_id="123", het_job_offset="1")
    spec = parse_jobid(text)
    got = [r.job_id for r in (plain, task, comp) if matches(spec, r)]
    if spec.array_tasks:
        assert got == (["127"] if "4" in spec.array_tasks else [])  # 123_[1-3] holds no task 4
    elif spec.het_offset:
        assert got == ["124"]
    else:
        assert got == ["123", "127", "124"]  # sacct -j 123: the job, the array's tasks, the het components


# SLUIDs (Slurm >= 25.11): src/common/sluid.c print_sluid()/str2sluid(), and its unit test
# testsuite/slurm_unit/common/sluid-test.c: 0xbc064b4483ea1000 <-> "sBR1JB8J1YM400".
def test_sluid_text_form_from_slurms_unit_test():
    from slurm_energy.jobid import canonical_sluid, format_sluid, sluid_value

    assert format_sluid(0xBC064B4483EA1000) == "sBR1JB8J1YM400"
    assert sluid_value("sBR1JB8J1YM400") == 0xBC064B4483EA1000
    # str2sluid: any case, O read as 0, I and L as 1
    assert canonical_sluid("sbr1jb8j1ym4oo") == "sBR1JB8J1YM400"
    assert canonical_sluid("sBRIJB8JLYM400") == "sBR1JB8J1YM400"
    # bits 10..51 are ms since the epoch: (0xbc064b4483ea1000 >> 10) & (2**42 - 1) = 1730085452420 ms
    assert (sluid_value("sBR1JB8J1YM400") >> 10) & (2**42 - 1) == 1730085452420


@pytest.mark.parametrize("text, step", [("sBR1JB8J1YM400", None), ("sBR1JB8J1YM400.batch", "batch"),
                                        ("s1XHM8XWWDZC00", None), ("sbr1jb8j1ym400.0", "0")])
def test_sluid_forms_parse(text, step):
    spec = parse_jobid(text)
    assert spec.sluid == text.split(".")[0][:1].lower() + text.split(".")[0][1:].upper().replace("O", "0")
    assert spec.job_id == "" and spec.step == step


def test_sluid_matches_only_its_run():
    a0 = node_record(job_id="9", restart_count=0, sluid="sBR1JB8J1YM400")
    a1 = node_record(job_id="9", restart_count=1, sluid="sBR1JB8J1YM401")  # the requeue: a new SLUID
    old = node_record(job_id="9")  # Slurm < 25.11: no SLUID
    spec = parse_jobid("sbr1jb8j1ym401")
    assert [matches(spec, r) for r in (a0, a1, old)] == [False, True, False]


@pytest.mark.parametrize("bad, says", [
    ("sU00000000000", "not a valid SLUID"),  # 12 characters
    ("sU000000000000", "not a valid SLUID"),  # U is not a Crockford digit
    ("s0000000000000", "not a valid SLUID"),  # 0: no SLUID (str2sluid returns 0)
    ("0", "is not valid"),  # ESLURM_INVALID_JOB_ID_ZERO
    ("123+1.0+1", "has no het steps"),  # ESLURM_INVALID_HET_STEP_JOB
    ("123.foo", "is not valid"),
])
def test_refused_ids_say_what_to_type(bad, says):
    with pytest.raises(ValueError) as ei:
        parse_jobid(bad)
    assert says in str(ei.value) and repr(bad) in str(ei.value)

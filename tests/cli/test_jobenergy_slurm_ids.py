"""jobenergy takes every job id form sacct prints and a SLUID (Slurm >= 25.11), and finds the
stored job/run by it, through the store.

Forms: tests/test_jobid.py (sources: SchedMD/slurm slurmdb_defs.c slurmdb_get_job_id_str, log.c
log_build_step_id_str, sluid.c print_sluid; commit 284c3b95f0)."""

import pytest

from slurm_energy.cli.jobenergy import main
from slurm_energy.jobid import format_sluid
from tests.helpers.jobrecord_factory import finished, node_record, store_with

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def _sluid_at(t: float, seq: int) -> str:
    """A SLUID made at epoch ``t`` (src/common/sluid.c generate_sluid: cluster << 52 | ms << 10 | seq)."""
    return format_sluid((0x123 << 52) | (int(t * 1000) << 10) | seq)


A0, A1 = _sluid_at(T0 - 30, 0), _sluid_at(T0 + 570, 0)  # made at submission and at the requeue


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    return store_with(
        tmp_path,
        finished(node_record(job_id="300", start=T0, end=T0 + 500, restart_count=0, sluid=A0)),
        finished(node_record(job_id="300", start=T0 + 600, end=T0 + 900, restart_count=1, sluid=A1)),
        finished(node_record(job_id="400", start=T0, end=T0 + 60, het_job_id="400", het_job_offset="0")),
        finished(node_record(job_id="401", start=T0, end=T0 + 60, het_job_id="400", het_job_offset="1")),
        finished(node_record(job_id="510", start=T0, end=T0 + 60, array_job_id="507", array_task_id="3")),
    )


def _ids(capsys, url, *ids):
    rc = main(["--store", url, "-P", "-n", "-o", "JobID,RestartCount,SLUID", *ids])
    cap = capsys.readouterr()
    return rc, cap.out.split(), cap.err


def test_a_sluid_selects_its_run_only(url, capsys):
    rc, out, _ = _ids(capsys, url, A1)
    assert rc == 0 and out == [f"300|1|{A1}"]  # the requeue's run, not attempt 0
    rc, out, _ = _ids(capsys, url, A0.lower() + ".batch")  # any case, with a step
    assert rc == 0 and out == [f"300|0|{A0}"]


def test_an_unknown_sluid_is_reported_missing(url, capsys):
    other = _sluid_at(T0 + 5000, 7)
    rc, out, err = _ids(capsys, url, other)
    assert rc == 1 and out == [] and f"job {other}: not in the store" in err


@pytest.mark.parametrize("text, expect", [
    ("400.0+1", ["400+0|0|", "400+1|0|"]),  # a het step: its job, every component (sacct -j 400)
    ("400+1.0", ["400+1|0|"]),
    ("400+1.batch", ["400+1|0|"]),
    ("507_3.0", ["507_3|0|"]),
    ("507_3.extern", ["507_3|0|"]),
    ("510.batch", ["507_3|0|"]),  # the task's raw job id
])
def test_step_forms_sacct_prints_select_the_job(url, capsys, text, expect):
    rc, out, err = _ids(capsys, url, text)
    assert rc == 0 and out == expect
    assert f"note: {text} is a job step; energy is measured per job allocation" in err


def test_a_bad_sluid_is_usage_error_saying_the_form(url, capsys):
    rc, out, err = _ids(capsys, url, "sNOTASLUID")
    assert rc == 2 and out == [] and "is not a valid SLUID: a SLUID is 's' and 13 characters" in err

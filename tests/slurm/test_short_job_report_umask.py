"""A job's report is written with the job's umask, read from its processes; a job too short for the
sampler's first look leaves none, and its record then says why its report is private (0600)."""

from slurm_energy.reporting.safe_write import PRIVATE_REPORT_NOTE, UNKNOWN_UMASK
from slurm_energy.slurm.jobend.publish import report_umask


def test_the_jobs_umask_when_the_sampler_read_it():
    assert report_umask({"job_name": "train", "umask": "0022"}) == (0o022, "")  # files 0666 & ~022 = 0644
    assert report_umask({"umask": "0077"}) == (0o077, "")


def test_a_job_shorter_than_the_first_look_gets_a_private_report_and_the_record_says_why():
    for facts in ({}, {"job_name": "true"}, {"umask": "0999"}, {"umask": 18}):
        assert report_umask(facts) == (None, PRIVATE_REPORT_NOTE), facts
    assert 0o666 & ~UNKNOWN_UMASK == 0o600  # the files' mode
    assert PRIVATE_REPORT_NOTE.startswith("report written private (mode 0600, owner only)")
    assert "chmod" in PRIVATE_REPORT_NOTE

"""The site's sinks come from one registry (outputs/sinks.py ``OUTPUTS``): a new output is one
Sink class plus one entry, and every entry point that publishes through ``site_sinks`` reaches it."""

from __future__ import annotations

import pytest

from slurm_energy.model import Status
from slurm_energy.outputs import sinks
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record


class Seen:
    """A minimal output: what it was given, by job id and status."""

    name, keeps_errors = "seen", False

    def __init__(self):
        self.got: list[tuple[str, str]] = []

    def publish(self, rec):
        self.got.append((rec.job_id, rec.status.value))
        return ["seen: not forwarded (test)"] if rec.job_id == "92" else []


@pytest.fixture
def cfg(site_config, tmp_path):
    """The node's files and a SQLite store under tmp_path; Prometheus off, no admin comment in Slurm."""
    return site_config(bare=True, paths={"spool_dir": str(tmp_path / "spool"), "store_url": f"sqlite:///{tmp_path}/j.db",
                                         "log_dir": str(tmp_path / "log")},
                       outputs={"prometheus": {"enabled": False}, "slurm": {"admin_comment": False}})


def test_one_registry_entry_adds_an_output_to_final_and_running_publishing(tmp_path, monkeypatch, cfg):
    seen = Seen()
    monkeypatch.setitem(sinks.OUTPUTS, "seen", lambda cfg, running, umask, queue_in: seen)
    # prometheus is off in this config: no sink; the report and the write-back take final records only
    assert [s.name for s in sinks.site_sinks(cfg)] == ["store", "report", "slurm", "seen"]
    assert [s.name for s in sinks.site_sinks(cfg, running=True)] == ["store", "seen"]
    assert type(sinks.site_sinks(cfg, queue_in=[str(tmp_path / "spool")])[0]) is sinks.QueueingStoreSink
    sinks.publish_final(cfg, finished(node_record(job_id="91", work_dir="")))
    sinks.publish_final(cfg, finished(node_record(job_id="92", work_dir="")))
    assert seen.got == [("91", "complete"), ("92", "complete")]
    st = open_store(cfg.paths.store_url, readonly=True)
    try:
        (a,), (b,) = st.get_job("91"), st.get_job("92")
    finally:
        st.close()
    # the new output's note is on the stored record (the store keeps errors), as any output's
    assert a.errors == [] and b.errors == ["seen: not forwarded (test)"] and b.status == Status.COMPLETE


def test_an_output_that_cannot_be_built_is_left_out_and_the_record_kept(tmp_path, monkeypatch, cfg):
    def broken(cfg, running, umask, queue_in):
        raise ValueError("outputs.seen.url: not a URL")

    monkeypatch.setitem(sinks.OUTPUTS, "seen", broken)
    assert [s.name for s in sinks.site_sinks(cfg)] == ["store", "report", "slurm"]

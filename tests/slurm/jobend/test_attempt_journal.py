"""The journal of job attempts (slurm_energy.slurm.attempt): states, the Epilog's facts, the one
lister of the spool, an attempt without a spool."""

from __future__ import annotations

import json

import pytest
from journal_trees import NODE, T_END, started

from slurm_energy.slurm.attempt import (
    Attempt,
    AttemptState,
    EpilogFacts,
    Journal,
    SamplerEnd,
    leave_no_spool_entry,
    no_spool_entries,
)
from slurm_energy.slurm.context import JobContext


def test_each_tree_reads_back_as_its_state(journal_trees):
    assert {s: a.state() for s, a in journal_trees.items()} == {s: s for s in AttemptState}


def test_the_epilogs_facts_read_back_typed(journal_trees):
    ep = journal_trees[AttemptState.QUEUED].epilog()
    assert (bool(ep), ep.t, ep.sampler, ep.exit_code) == (True, T_END, SamplerEnd.KILLED, "0:9")
    assert not journal_trees[AttemptState.STARTED].epilog()  # no Epilog ran: present False
    # the marker's JSON holds the enum's value, as the queue entry does
    with open(journal_trees[AttemptState.QUEUED].done, encoding="utf-8") as f:
        assert json.load(f) == {"t": T_END, "sampler": "killed", "exit_code": "0:9"}
    with open(journal_trees[AttemptState.QUEUED].queue_entry(), encoding="utf-8") as f:
        assert json.load(f)["sampler"] == "killed"
    # an older plain-number marker, and one that is not JSON
    assert EpilogFacts.parse("1796034060.5").t == 1796034060.5
    assert not EpilogFacts.parse("{not json")


def test_the_journal_lists_attempts_with_a_context_only(journal_trees, tmp_path):
    sd = str(tmp_path / "spool")
    (tmp_path / "spool" / "jobs" / "not-an-attempt").mkdir()
    (tmp_path / "spool" / "jobs" / "705-r0").mkdir()  # a Prolog at work: no context yet
    names = [(a.job_id, a.node) for a in Journal([sd]).attempts()]
    assert names == [("700", NODE), ("701", NODE), ("702", NODE), ("703", NODE)]
    assert [a.job_id for a in Journal([sd]).attempts(job_id="702")] == ["702"]
    assert list(Journal([sd]).attempts(node="n2")) == []
    # a job is unfinished while one of its attempts is not FINALIZED, or has no context yet
    assert Journal([sd]).unfinished_jobs() == {"700", "701", "702", "705"}


def test_since_skips_attempts_unchanged_since_unless_their_samples_grew(tmp_path):
    import os

    sd = str(tmp_path / "spool")
    a = started(sd, "710")
    os.utime(a.dir, (1000.0, 1000.0))
    assert list(Journal([sd]).attempts(node=NODE, since=2000.0)) == []
    with open(a.samples, "w") as f:
        f.write("{}\n")
    os.utime(a.dir, (1000.0, 1000.0))  # the sampler appends: the directory's mtime stays old
    assert [x.job_id for x in Journal([sd]).attempts(node=NODE, since=2000.0)] == ["710"]


def test_an_attempt_without_a_spool_has_no_files(tmp_path):
    ctx = JobContext(job_id="720", node=NODE, restart_count=2)
    a = Attempt.without_spool(ctx)
    assert (a.has_spool, a.dir, a.samples, a.context, a.state()) == (False, "", "", "", AttemptState.RETIRED)
    a.record_error("nowhere to write this")  # no spool: nothing written, no error
    with pytest.raises(OSError, match="no spool"):
        a.ensure()
    # its entry for a re-run lives in the log directory, listed by node
    p = leave_no_spool_entry(str(tmp_path / "log"), "720", 2, NODE, ["{}", "1.0", "", "terminated", "[]"])
    assert no_spool_entries(str(tmp_path / "log"), NODE) == [p]
    assert no_spool_entries(str(tmp_path / "log"), "gpu-n1") == []


def test_sampler_end_is_its_value_in_text():
    assert f"sampler={SamplerEnd.EPILOG_MISSING}" == "sampler=epilog_missing"
    assert json.dumps([SamplerEnd.NO_PIDFILE]) == '["no_pidfile"]'
    assert SamplerEnd.parse("weird", SamplerEnd.TERMINATED) is SamplerEnd.TERMINATED


def test_the_node_samplers_joined_attempts_come_from_the_journal(tmp_path):
    # the node sampler and the Epilog ask the journal which attempts are joined (a join file of
    # their node in the attempt's directory): no second lister of jobs/ with its own rules
    spool = tmp_path / "spool"
    for name in ("7-r0", "8-r1", "9-r0", "not-an-attempt"):
        (spool / "jobs" / name).mkdir(parents=True)
    for name in ("7-r0", "8-r1", "not-an-attempt"):
        (spool / "jobs" / name / "nodesampler-n1.join").write_text("{}")
    (spool / "jobs" / "9-r0" / "nodesampler-n2.join").write_text("{}")  # another node's
    (spool / "jobs" / "10-r0").symlink_to(spool / "jobs" / "7-r0")  # a link is never an attempt
    assert Journal([str(spool)]).joined("n1") == [str(spool / "jobs" / "7-r0"), str(spool / "jobs" / "8-r1")]
    assert Journal([str(spool)]).joined("n2") == [str(spool / "jobs" / "9-r0")]
    assert Journal([str(tmp_path / "absent")]).joined("n1") == []

"""outputs/slurm_writeback.py: the AdminComment segment, sharing the field, TRES gating and refusals.

The real scontrol/sacct/sacctmgr are exercised on the test cluster (tests/e2e/test_outputs_e2e.py);
here the command runner is a recorder so each branch's arguments and notes are checked exactly.
"""

from __future__ import annotations

from slurm_energy.model import Method, Status
from slurm_energy.outputs.slurm_writeback import PREFIX, SlurmWriteback, merge_comment, summary_text
from tests.helpers.jobrecord_factory import finished, node_record


def rec(**kw):
    # cpu 3.6e6 J = 1 kWh, ram 3.6e5 J = 0.1 kWh: IT 1.1 kWh; x PUE 1.5 x 400 g/kWh = 660 gCO2e
    return finished(node_record(job_id="42", **kw))


def test_summary_text_numbers_and_unmeasured_class():
    r = rec(gpu_j=None)
    r.methods["gpu"] = Method.UNAVAILABLE
    r.energy_it_j["gpu"] = None
    t = summary_text(r)
    # IT 1.1 kWh x PUE 1.5 = 1.65 kWh facility; x 400 g/kWh = 660 g
    assert t == (f"{PREFIX} 1.1 kwh it (cpu 1 tdp_estimate, gpu unmeasured, ram 0.1 tdp_estimate), "
                 "1.65 kwh facility, 660 g co2e, complete")


def test_summary_text_is_bounded():
    r = rec()
    r.methods = {f"c{i}": Method.COUNTER for i in range(50)}
    r.energy_it_j = {f"c{i}": 1.0 for i in range(50)}
    t = summary_text(r, max_chars=80)
    assert len(t) == 80 and t.endswith("...") and t.startswith(PREFIX)


def test_merge_keeps_other_tools_text_and_replaces_only_ours():
    ours = f"{PREFIX} IT 2 kWh"
    v, why = merge_comment(f"site: priority boost | {PREFIX} IT 1 kWh | other: x", ours)
    assert why == "" and v == f"site: priority boost | other: x | {ours}"
    assert merge_comment("", ours) == (ours, "")


def test_merge_skips_a_field_owned_by_another_tool():
    v, why = merge_comment("JS1:H4sIAAAAAAAA...", f"{PREFIX} IT 1 kWh")
    assert v is None and "JS1:" in why and "foreign_markers" in why
    v, why = merge_comment('{"gpu_util": 0.5}', f"{PREFIX} IT 1 kWh")
    assert v is None


class Runner:
    """Records argv; answers from a table of (argv[0] basename, first arg) -> (rc, out)."""

    def __init__(self, answers: dict):
        self.answers, self.calls = answers, []

    def __call__(self, argv, timeout_s=15.0):
        self.calls.append(argv)
        key = (argv[0].rsplit("/", 1)[-1], argv[1])
        return self.answers.get(key, (0, ""))


def test_finished_job_goes_to_slurmdbd_with_sacctmgr():
    run = Runner({("sacct", "-X"): (0, "site: keep me"), ("sacctmgr", "-i"): (0, " Modified jobs...\n  42 submitted at ...")})
    notes = SlurmWriteback(run=run).publish(rec())
    assert notes == []
    value = f"site: keep me | {summary_text(rec())}"
    assert run.calls[1] == ["/usr/bin/sacctmgr", "-i", "modify", "job", "where", "jobid=42", "set", f"AdminComment={value}"]
    assert len(run.calls) == 2  # scontrol not needed


def test_scontrol_is_the_fallback_when_sacctmgr_refuses():
    run = Runner({("sacctmgr", "-i"): (1, "Access denied"), ("scontrol", "update"): (0, "")})
    assert SlurmWriteback(run=run).publish(rec()) == []
    assert run.calls[2] == ["/usr/bin/scontrol", "update", "JobId=42", f"AdminComment={summary_text(rec())}"]


def test_sacctmgr_path_never_lowercases_other_tools_text():
    run = Runner({("sacct", "-X"): (0, "Site: Keep Me"), ("scontrol", "update"): (1, "Job has already finished")})
    notes = SlurmWriteback(run=run).publish(rec())
    assert len(notes) == 1 and "lower case" in notes[0] and "'Site: Keep Me'" in notes[0]
    assert "Job has already finished" in notes[0]
    assert [c[0].rsplit("/", 1)[-1] for c in run.calls] == ["sacct", "scontrol"]  # sacctmgr never asked


def test_both_refusing_is_a_note_not_an_exception():
    run = Runner({("scontrol", "update"): (1, "Job has already finished"), ("sacctmgr", "-i"): (1, "Access denied")})
    notes = SlurmWriteback(run=run).publish(rec())
    assert len(notes) == 1 and "AdminComment not written" in notes[0] and "Access denied" in notes[0]


def test_too_long_summary_is_cut_and_noted():
    r = rec()
    r.methods = {f"c{i}": Method.COUNTER for i in range(50)}
    r.energy_it_j = {f"c{i}": 1.0 for i in range(50)}
    run = Runner({})
    notes = SlurmWriteback(run=run, max_chars=60).publish(r)
    assert notes == ["slurm write-back: AdminComment summary cut to 60 characters (outputs.slurm.admin_comment_max_chars)"]
    run.answers[("sacctmgr", "-i")] = (0, " Modified jobs...")
    run.calls.clear()
    SlurmWriteback(run=run, max_chars=60).publish(r)
    written = run.calls[1][-1]
    assert written == "AdminComment=" + summary_text(r, 60) and len(summary_text(r, 60)) == 60


def test_tres_off_by_default_and_gated_on_25_11():
    run = Runner({})
    SlurmWriteback(run=run).publish(rec())
    assert not any("TRES=" in " ".join(c) for c in run.calls)
    run = Runner({("sacctmgr", "--version"): (0, "slurm-wlm 22.05.8")})
    notes = SlurmWriteback(run=run, admin_comment=False, tres_energy=True).publish(rec())
    assert notes == ["slurm write-back: energy TRES not set: needs Slurm >= 25.11 (sacctmgr 22.05)"]


def test_tres_on_25_11_sets_it_energy_in_joules():
    # IT 1.1 kWh = 3_960_000 J
    run = Runner({("sacctmgr", "--version"): (0, "slurm 25.11.0"), ("sacctmgr", "-i"): (0, " Modified jobs...")})
    assert SlurmWriteback(run=run, admin_comment=False, tres_energy=True).publish(rec()) == []
    assert run.calls[-1][-1] == "TRES=energy=3960000"


def test_tres_refused_by_sacctmgr_is_a_note():
    run = Runner({("sacctmgr", "--version"): (0, "slurm 25.11.2"),
                  ("sacctmgr", "-i"): (1, " Unknown option: tres=energy=3960000")})
    notes = SlurmWriteback(run=run, admin_comment=False, tres_energy=True).publish(rec())
    assert notes == ["slurm write-back: energy TRES not set: sacctmgr refused (rc 1): Unknown option: tres=energy=3960000"]


def test_running_record_is_not_written_back():
    run = Runner({})
    assert SlurmWriteback(run=run).publish(rec(status=Status.RUNNING)) == []
    assert run.calls == []


def test_missing_commands_are_notes(tmp_path):
    wb = SlurmWriteback(sacct=str(tmp_path / "no-sacct"), scontrol=str(tmp_path / "x"), sacctmgr=str(tmp_path / "y"),
                        tres_energy=True)
    notes = wb.publish(rec())
    assert len(notes) == 2 and "not found" in notes[0] and "needs Slurm >= 25.11 (sacctmgr unknown)" in notes[1]

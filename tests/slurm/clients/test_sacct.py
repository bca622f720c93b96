"""sacct TotalCPU -> the job's true CPU time for the stretch its sampler did not see."""

import os
import subprocess

import pytest

from slurm_energy.slurm.clients import sacct as S
from slurm_energy.slurm.clients.sacct import consumed_energy, total_cpu_s


def _sacct(tmp_path, outputs):
    """A sacct path that exists and a runner answering each call with the next of ``outputs``."""
    path = tmp_path / "sacct"
    path.write_text("")
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, outputs[min(len(calls), len(outputs)) - 1], "")
    return str(path), run, calls


def test_sums_the_newest_runs_steps_in_slurm_duration_forms(tmp_path):
    # an earlier run of id 42 (requeued) first; the newest: batch 00:07.500 + extern 00:00.010 +
    # step 0 01:02:03 (3723 s) -> 7.5 + 0.01 + 3723 = 3730.51 CPU-s
    out = ("42|REQUEUED|00:05.000\n42.batch|CANCELLED|00:05.000\n"
           "42|COMPLETED|1-00:00:00\n42.batch|COMPLETED|00:07.500\n42.extern|COMPLETED|00:00.010\n"
           "42.0|COMPLETED|01:02:03\n")
    sacct, run, calls = _sacct(tmp_path, [out])
    got, why = total_cpu_s("42", sacct=sacct, run=run, wait_s=0)
    assert got == pytest.approx(3730.51) and why == "sacct TotalCPU"
    assert calls[0][1:] == ["-j", "42", "-n", "-P", "-o", "JobIDRaw,State,TotalCPU"]


@pytest.mark.parametrize(("raw", "text", "cpu_s"), [
    # captured on the test cluster (Slurm 22.05.8): `sacct -j 2113,2165 -n -P -o JobIDRaw,JobID,State,TotalCPU`
    ("2113", "2113|COMPLETED|00:00.003\n2113.batch|COMPLETED|00:00.001\n2113.extern|COMPLETED|00:00.001\n", 0.002),
    ("2165", "2165|COMPLETED|00:00.001\n2165.extern|COMPLETED|00:00.001\n", 0.001),
], ids=["array task 2103_8", "het component 2164+1"])
def test_an_array_task_and_a_het_component_are_found_by_their_raw_id_at_once(tmp_path, raw, text, cpu_s):
    """The finalizer asks by the raw id (2113); sacct's JobID prints 2103_8 (2164+1), which never
    matched it: every short array task or het component waited out the 15 s deadline and had its
    tail estimated (170x the CPU energy a tester measured). JobIDRaw matches on the first answer."""
    sacct, run, calls = _sacct(tmp_path, [text])
    got, why = total_cpu_s(raw, sacct=sacct, run=run, wait_s=15, sleep=lambda s: pytest.fail("waited"))
    assert got == pytest.approx(cpu_s) and why == "sacct TotalCPU" and len(calls) == 1  # CPU-s: the steps' sum


def test_waits_until_slurmdbd_has_the_job_finished(tmp_path):
    sacct, run, calls = _sacct(tmp_path, ["", "42|RUNNING|00:00:00\n",
                                          "42|CANCELLED by 1000|00:09.500\n42.batch|CANCELLED|00:09.500\n"])
    got, _ = total_cpu_s("42", sacct=sacct, run=run, wait_s=60, sleep=lambda s: None)
    assert got == pytest.approx(9.5) and len(calls) == 3


def test_allocation_value_when_no_step_listed(tmp_path):
    sacct, run, _ = _sacct(tmp_path, ["42|TIMEOUT|02:30.250\n"])
    assert total_cpu_s("42", sacct=sacct, run=run, wait_s=0)[0] == pytest.approx(150.25)


@pytest.mark.parametrize("out, why", [("", "no record"), ("42|RUNNING|00:01.000\n", "still RUNNING"),
                                      ("42|COMPLETED|\n", "TotalCPU is empty"),
                                      ("42|COMPLETED|soon\n", "TotalCPU")])
def test_unknown_is_none_with_why_never_zero(tmp_path, out, why):
    sacct, run, _ = _sacct(tmp_path, [out])
    got, label = total_cpu_s("42", sacct=sacct, run=run, wait_s=0)
    assert got is None and label.startswith("unavailable") and why in label


def test_missing_sacct_is_unavailable(tmp_path):
    got, why = total_cpu_s("42", sacct=str(tmp_path / "nope"))
    assert got is None and "not found" in why


def test_the_energy_plugin_is_read_once_per_ttl_by_a_long_lived_finalizer(tmp_path, monkeypatch):
    # the node's finalizer asks for every job; `scontrol show config` is asked once per PLUGIN_TTL_S
    from slurm_energy.slurm.clients import sacct

    calls = tmp_path / "calls"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\necho x >>{calls}\necho 'AcctGatherEnergyType    = acct_gather_energy/rapl'\n")
    scontrol.chmod(0o755)
    monkeypatch.setattr(sacct, "_PLUGIN", {})
    assert [sacct.energy_plugin(scontrol=str(scontrol)) for _ in range(3)] == ["acct_gather_energy/rapl"] * 3
    assert calls.read_text().count("x") == 1
    now = sacct.time.monotonic()
    monkeypatch.setattr(sacct.time, "monotonic", lambda: now + sacct.PLUGIN_TTL_S + 1)
    assert sacct.energy_plugin(scontrol=str(scontrol)) == "acct_gather_energy/rapl"
    assert calls.read_text().count("x") == 2  # read again once the 300 s are over


def test_sacct_line_and_scontrol_times_parse():
    from slurm_energy.slurm.clients.sacct import parse_sacct_line
    from slurm_energy.slurm.clients.scontrol import parse_show_job

    f = parse_sacct_line("CANCELLED by 2001|2026-12-01T05:00:00|2026-12-01T05:01:30")
    assert f["job_state"] == "CANCELLED" and f["end_time"] - f["start_time"] == 90.0
    assert "start_time" not in parse_sacct_line("PENDING|Unknown|Unknown")
    g = parse_show_job("JobId=5 JobName=x UserId=a(1) JobState=TIMEOUT StartTime=2026-12-01T05:00:00 "
                       "EndTime=2026-12-01T05:01:07")
    assert g["job_state"] == "TIMEOUT" and g["end_time"] - g["start_time"] == 67.0


# -- a capture from the test cluster (Slurm 22.05.8): a job name and work dir with newlines --
DATA = os.path.join(os.path.dirname(__file__), "data")


def test_sacct_json_of_22_05_gives_the_users_text_whole():
    """``sacct --json -j 1,2,3`` on the test cluster: job 1 named ``nm<LF>JobState=COMPLETED
    ReqMem=1M`` (FAILED, exit 3), 2 ``ok``, 3 ``cxl`` (cancelled), all in ``/var/tmp/i39/w<LF>X|y``."""
    from slurm_energy.slurm.clients.sacct import parse_sacct_json

    with open(os.path.join(DATA, "slurm-22.05-sacct.json"), encoding="utf-8") as f:
        got = parse_sacct_json(f.read())
    wd = "/var/tmp/i39/w\nX|y"
    assert got == {("1", 1796544424): {"job_name": "nm\nJobState=COMPLETED ReqMem=1M", "work_dir": wd},
                   ("2", 1796544424): {"job_name": "ok", "work_dir": wd},
                   ("3", 1796544425): {"job_name": "cxl", "work_dir": wd}}
    assert parse_sacct_json("sacct: error: ...") == {} and parse_sacct_json('{"jobs": [{"job_id": 1e999}]}') == {}


# -- ConsumedEnergyRaw (Slurm's own energy, beside ours), moved from tests/slurm/test_reqmem_slurm_energy.py --
def _runner(config_out, sacct_out, sacct_rc=0):
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        if argv[1:3] == ["show", "config"]:
            return subprocess.CompletedProcess(argv, 0, config_out, "")
        return subprocess.CompletedProcess(argv, sacct_rc, sacct_out, "sacct: error: accounting storage is disabled")
    return run, calls


@pytest.fixture
def exes(tmp_path):
    for n in ("sacct", "scontrol"):
        (tmp_path / n).write_text("")
    return str(tmp_path / "sacct"), str(tmp_path / "scontrol")


def test_consumed_energy_hand_values(exes):
    sacct, scontrol = exes
    run, calls = _runner("AcctGatherEnergyType   = acct_gather_energy/rapl\n", "12340\n")
    assert consumed_energy("77", sacct=sacct, scontrol=scontrol, run=run) == (
        12340.0, "Slurm's ConsumedEnergyRaw (sacct), plugin acct_gather_energy/rapl")
    assert calls[-1][1:] == ["-j", "77", "-X", "-n", "-P", "-o", "ConsumedEnergyRaw"]


def test_consumed_energy_not_collected_is_unavailable(exes):
    sacct, scontrol = exes
    run, _ = _runner("AcctGatherEnergyType    = acct_gather_energy/none\n", "0\n")
    j, why = consumed_energy("77", sacct=sacct, scontrol=scontrol, run=run)
    assert j is None and "collects no energy" in why
    run, _ = _runner("AcctGatherEnergyType = acct_gather_energy/ipmi\n", "0\n")
    j, why = consumed_energy("77", sacct=sacct, scontrol=scontrol, run=run)
    assert j is None and "0 J" in why  # 0 = not collected, never a measured 0
    run, _ = _runner("AcctGatherEnergyType = acct_gather_energy/ipmi\n", "", sacct_rc=1)
    assert consumed_energy("77", sacct=sacct, scontrol=scontrol, run=run)[0] is None
    run, _ = _runner("AcctGatherEnergyType = acct_gather_energy/ipmi\n", "\n")
    j, why = consumed_energy("77", sacct=sacct, scontrol=scontrol, run=run, wait_s=0, sleep=lambda s: None)
    assert j is None and "no record" in why


def test_the_pure_parsers_read_slurms_text_by_hand():
    # scontrol show config (22.05's "Key = value" with padding)
    assert S.parse_energy_plugin("AcctGatherNodeFreq      = 0 sec\nAcctGatherEnergyType    = acct_gather_energy/ipmi\n") \
        == "acct_gather_energy/ipmi"
    assert S.parse_energy_plugin("AcctGatherEnergyType = (null)\n") == "none" and S.parse_energy_plugin("") == "none"
    # ConsumedEnergyRaw, J: the newest run's line last; 0 is "not collected"
    assert S.parse_consumed_energy("500\n12340\n", "acct_gather_energy/rapl") == (
        12340.0, "Slurm's ConsumedEnergyRaw (sacct), plugin acct_gather_energy/rapl")
    assert S.parse_consumed_energy("0\n", None) == (None, "unavailable: Slurm recorded 0 J (not collected; plugin unknown)")
    # JobIDRaw|State: the newest run's final state, "CANCELLED by 2001" -> CANCELLED; RUNNING is not final
    assert S.parse_final_state("42|COMPLETED\n42|CANCELLED by 2001\n", "42") == "CANCELLED"
    assert S.parse_final_state("42|RUNNING\n", "42") is None and S.parse_final_state("4|FAILED\n", "42") is None
    # AllocCPUS|ReqMem|NNodes: 4 CPUs x 500 MiB per CPU (sacct < 21.08's "c" suffix) = 2000 MiB
    assert S.parse_allocation("4|500Mc|1\n") == {"cpus": 4, "nodes": 1, "req_mem_bytes": 2000 * 2**20}
    assert S.parse_allocation("") is None
    with pytest.raises(ValueError):
        S.parse_allocation("x|1G|1")

"""SlurmFacts: the one implementation over sacct/scontrol (which client, which query, which parser),
the rule for "has this attempt ended", and the process-wide seam tests use instead of patching."""

from __future__ import annotations

import json
import subprocess
import time

from slurm_energy.model import Status
from slurm_energy.slurm.clients import facts as F
from slurm_energy.slurm.clients.sacct import FIELDS, IDS_PER_QUERY
from tests.fakes.slurm_facts import FakeSlurmFacts


def _clients(tmp_path, answer):
    """sacct and scontrol paths that exist, and a runner answering ``answer(argv)`` -> (rc, stdout)."""
    for name in ("sacct", "scontrol"):
        (tmp_path / name).write_text("")
    calls: list[list[str]] = []

    def run(argv, **kw):
        calls.append(argv)
        rc, out = answer(argv)
        return subprocess.CompletedProcess(argv, rc, out, "" if rc == 0 else "error")

    return F.SlurmCommands(sacct=str(tmp_path / "sacct"), scontrol=str(tmp_path / "scontrol"), run=run,
                           sleep=lambda s: None), calls


def test_ended_takes_slurmctlds_state_and_asks_slurmdbd_only_when_slurmctld_forgot_the_job(tmp_path):
    def answer(argv):
        if "--json" in argv:  # data_parser's shape (23.02 on): job 7 RUNNING, restarted once; 8 unknown
            jobs = [{"job_id": 7, "job_state": ["RUNNING"], "restart_cnt": 1}] if "7" in argv else []
            return 0, json.dumps({"jobs": jobs})
        if "scontrol" in argv[0]:
            return 1, ""  # show job -o: "Invalid job id specified"
        return 0, "COMPLETED|2026-12-01T05:00:00|2026-12-01T05:01:30\n"  # sacct -X -o State,Start,End

    slurm, calls = _clients(tmp_path, answer)
    # attempt 1 is the one slurmctld shows running: not ended; attempt 0 was requeued: ended
    assert slurm.ended("7", 1) == (False, {"job_state": "RUNNING", "restarts": 1})
    assert slurm.ended("7", 0)[0] is True
    assert not any("sacct" in c[0] for c in calls)  # slurmctld knew the job: slurmdbd not asked
    fin, facts = slurm.ended("8", 0)
    assert fin is True and facts["job_state"] == "COMPLETED" and facts["end_time"] - facts["start_time"] == 90.0
    assert calls[-1][1:] == ["-X", "-n", "-P", "-j", "8", "-o", "State,Start,End"]


def test_ended_is_unknown_when_neither_slurmctld_nor_slurmdbd_knows_the_job(tmp_path):
    slurm, _ = _clients(tmp_path, lambda argv: (1, ""))
    assert slurm.ended("9", 0) == (None, None)
    assert F.SlurmCommands(sacct=str(tmp_path / "no-sacct"), scontrol=str(tmp_path / "no-scontrol")).ended("9") == (
        None, None)


def test_ended_since_asks_one_query_without_user_text_and_parses_each_line(tmp_path):
    t0 = time.mktime(time.strptime("2026-12-01T05:00:00", "%Y-%m-%dT%H:%M:%S"))
    out = ("850|849_3|COMPLETED|2026-12-01T05:00:00|2026-12-01T05:00:03|n[1-2]|alice|2001|2001|research|debug|0:0|lab\n"
           "852|852|CANCELLED by 0|None|2026-12-01T05:00:03|None assigned|bob|2002|2002|research|debug|0:0|lab\n")
    slurm, calls = _clients(tmp_path, lambda argv: (0, out))
    (rec,) = slurm.ended_since(t0)
    assert calls == [[str(tmp_path / "sacct"), "-X", "-n", "-P", "-a", "-S", "2026-12-01T05:00:00", "-E", "now",
                      "-o", ",".join(FIELDS)]]
    # 852 never ran on a node (cancelled while pending): no record; 850 ran 3 s on n1 and n2
    assert (rec.job_id, rec.array_job_id, rec.array_task_id, rec.expected_nodes, rec.status, rec.elapsed_s) == \
        ("850", "849", "3", ["n1", "n2"], Status.NO_DATA, 3.0)
    assert _clients(tmp_path, lambda argv: (1, ""))[0].ended_since(t0) is None  # sacct failed: nothing to do
    assert F.SlurmCommands(sacct=str(tmp_path / "none")).ended_since(t0) is None  # no accounting storage


def test_user_text_asks_sacct_json_for_at_most_200_ids_a_query(tmp_path):
    ids = [str(1000 + i) for i in range(450)]

    def answer(argv):
        asked = argv[argv.index("-j") + 1].split(",")
        return 0, json.dumps({"jobs": [{"job_id": int(j), "name": f"n{j}", "working_directory": "/w",
                                        "time": {"start": 5}} for j in asked]})

    slurm, calls = _clients(tmp_path, answer)
    got = slurm.user_text(ids)
    assert IDS_PER_QUERY == 200 and [len(c[c.index("-j") + 1].split(",")) for c in calls] == [200, 200, 50]
    assert len(got) == 450 and got[("1449", 5)] == {"job_name": "n1449", "work_dir": "/w"}
    assert slurm.user_text([]) == {} and len(calls) == 3  # nothing to ask: no query


def test_total_cpu_and_consumed_energy_run_their_queries(tmp_path):
    def answer(argv):
        if argv[1:3] == ["show", "config"]:
            return 0, "AcctGatherEnergyType    = acct_gather_energy/rapl\n"
        if "JobIDRaw,State,TotalCPU" in argv:  # batch 00:07.500 + step 0 01:00 -> 67.5 CPU-s
            return 0, "42|COMPLETED|00:00:00\n42.batch|COMPLETED|00:07.500\n42.0|COMPLETED|01:00.000\n"
        return 0, "3600000\n"  # ConsumedEnergyRaw, J

    slurm, _ = _clients(tmp_path, answer)
    assert slurm.total_cpu("42") == (67.5, "sacct TotalCPU")
    assert slurm.consumed_energy("42") == (3_600_000.0, "Slurm's ConsumedEnergyRaw (sacct), plugin acct_gather_energy/rapl")


def test_use_sets_the_facts_every_caller_gets_and_restores_them():
    real = F.current()
    assert isinstance(real, F.SlurmCommands) and real.sacct == "/usr/bin/sacct" and real.scontrol == "/usr/bin/scontrol"
    outer, inner = FakeSlurmFacts(cpu_s={"1": 2.0}), FakeSlurmFacts()
    with F.use(outer):
        assert F.current().total_cpu("1") == (2.0, "sacct TotalCPU")
        with F.use(inner):
            assert F.current() is inner
        assert F.current() is outer
    assert F.current() is real

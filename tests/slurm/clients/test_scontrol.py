"""Parsing `scontrol show job -o` (Slurm 22.05 output seen on the test cluster)."""

import os
import subprocess

import pytest

from slurm_energy.slurm.clients.scontrol import parse_show_job, show_job

LINE = ("JobId=171 ArrayJobId=170 ArrayTaskId=2 JobName=my sweep UserId=alice(2001) GroupId=alice(2001) "
        "MCS_label=N/A Priority=4294901634 Nice=0 Account=research QOS=normal JobState=CANCELLED Reason=None "
        "Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:02")
HET = ("JobId=142 HetJobId=141 HetJobOffset=1 JobName=het UserId=bob(2002) JobState=COMPLETED Reason=None "
       "Restarts=0 ExitCode=0:0")


def test_array_task_line():
    f = parse_show_job(LINE)
    assert f == {"array_job_id": "170", "array_task_id": "2", "job_name": "my sweep", "job_state": "CANCELLED",
                 "restarts": 1, "exit_code": "0:15"}


def test_het_component_line():
    f = parse_show_job(HET)
    assert (f["het_job_id"], f["het_job_offset"], f["job_state"]) == ("141", "1", "COMPLETED")
    assert "array_job_id" not in f


def test_het_component_name_stops_before_its_het_job_id_set():
    """Slurm 22.05 prints a het component's HetJobIdSet= between JobName= and UserId= (a fresh tester's
    het job 120: its second part was named 'het HetJobIdSet=120-121')."""
    f = parse_show_job(HET.replace("JobName=het UserId=", "JobName=het run HetJobIdSet=141-142 UserId="))
    assert f["job_name"] == "het run"


def test_waits_while_completing_on_slurmctlds_json_but_never_on_text(tmp_path):
    import json

    states = iter(["COMPLETING", "COMPLETING", "TIMEOUT"])
    calls = []

    def run_json(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, json.dumps({"jobs": [{"job_id": 5, "job_state": [next(states)]}]}), "")

    exe = tmp_path / "scontrol"
    exe.write_text("")
    f = show_job("5", scontrol=str(exe), run=run_json, sleep=lambda s: None)
    assert f["job_state"] == "TIMEOUT" and len(calls) == 3
    assert calls[0] == [str(exe), "--json", "show", "job", "5"]
    # this scontrol has no JSON (22.05): the text form, whose JobState= a user's text may have
    # written (``JobState=RUNNING`` in a job name), is taken as it is, never waited on
    calls.clear()

    def run_text(argv, **kw):
        calls.append(argv)
        if "--json" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "scontrol: unrecognized option '--json'")
        return subprocess.CompletedProcess(argv, 0, "JobId=5 JobName=x UserId=a(1) JobState=COMPLETING Restarts=0\n", "")
    f = show_job("5", scontrol=str(exe), run=run_text, sleep=lambda s: None)
    assert f["job_state"] == "COMPLETING" and calls[1] == [str(exe), "show", "job", "-o", "5"] and len(calls) == 2


def test_unknown_job_or_missing_scontrol_is_none(tmp_path):
    exe = tmp_path / "scontrol"
    exe.write_text("")
    fail = lambda argv, **kw: subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")
    assert show_job("5", scontrol=str(exe), run=fail) is None
    assert show_job("5", scontrol=str(tmp_path / "nope")) is None


def test_attempt_state_prefers_slurmctld_then_exit_code():
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.jobfacts import slurm_job_state

    ctx = JobContext(job_id="61", uid=1, gid=1, restart_count=0)
    assert slurm_job_state({"job_state": "TIMEOUT"}, ctx, "0:0") == "TIMEOUT"  # Epilog saw 0:0
    assert slurm_job_state({"job_state": "RUNNING", "restarts": 1}, ctx, "0:0") == "REQUEUED"
    assert slurm_job_state({"job_state": "COMPLETED", "restarts": 1}, ctx, "0:0") == "REQUEUED"  # late finalizer
    assert slurm_job_state(None, ctx, "3:0") == "FAILED"


def test_user_text_cannot_set_a_key_it_fakes_in_the_text_form():
    # issue 22: a job name faking an array id (read only before JobName=) and a memory request
    # Slurm prints only one of (MinMemoryNode / MinMemoryCPU): both are left out, and said so
    line = ("JobId=900 JobName=x ArrayJobId=901 MinMemoryCPU=999G UserId=alice(2001) JobState=FAILED "
            "Restarts=0 ExitCode=3:0 MinMemoryNode=4000M")
    f = parse_show_job(line)
    assert "array_job_id" not in f and "min_memory_node" not in f and "min_memory_cpu" not in f
    assert (f["job_state"], f["exit_code"], f["ambiguous"]) == ("FAILED", "3:0", ["MinMemory"])


def test_json_of_slurm_22_05_and_of_newer_versions():
    from slurm_energy.slurm.clients.scontrol import parse_show_job_json

    # the older openapi plugins' shape: plain numbers, job_state a string, exit_code the wait status (3 << 8)
    old = '{"jobs": [{"job_id": 171, "array_job_id": 170, "array_task_id": 2, "job_state": "CANCELLED", ' \
          '"exit_code": 768, "restart_cnt": 1, "name": "my sweep", "memory_per_node": 4000, "node_count": 2}]}'
    assert parse_show_job_json(old, "171") == {
        "job_state": "CANCELLED", "exit_code": "3:0", "restarts": 1, "array_job_id": "170", "array_task_id": "2",
        "job_name": "my sweep", "min_memory_node": "4000M", "num_nodes": "2"}
    # data_parser's shape: {"set", "infinite", "number"} numbers, job_state a list of flags
    n = lambda v, s=True: {"set": s, "infinite": False, "number": v}
    new = {"jobs": [{"job_id": 142, "het_job_id": n(141), "het_job_offset": n(1), "job_state": ["COMPLETED"],
                     "exit_code": {"return_code": n(0), "signal": {"id": n(15)}}, "restart_cnt": 0,
                     "array_job_id": n(0), "array_task_id": n(0, False), "start_time": n(1_700_000_000)}]}
    import json

    assert parse_show_job_json(json.dumps(new), "142") == {
        "job_state": "COMPLETED", "exit_code": "0:15", "restarts": 0, "het_job_id": "141", "het_job_offset": "1",
        "start_time": 1_700_000_000.0}
    assert parse_show_job_json("JobId=5 JobName=x", "5") is None and parse_show_job_json(json.dumps(new), "9") is None


# -- captures from the test cluster (Slurm 22.05.8): a job name, comment and work dir with newlines --
DATA = os.path.join(os.path.dirname(__file__), "data")


def test_scontrol_text_with_a_newline_gives_nothing_and_a_comment_key_is_not_the_state():
    from slurm_energy.slurm.clients.scontrol import parse_show_job_text

    with open(os.path.join(DATA, "slurm-22.05-scontrol-newline.txt"), encoding="utf-8") as f:
        assert parse_show_job_text(f.read(), "1") == {
            "untrusted": "its one-line output (-o) came as 6 lines (user text -- job name, "
                         "comment or work dir -- holding a newline); only the array/het ids before its JobName= "
                         "are used"}
    with open(os.path.join(DATA, "slurm-22.05-scontrol-cancelled.txt"), encoding="utf-8") as f:
        text = f.read()
    # the work dir's newline (a fresh line starts "X|y Comment=JobState=COMPLETED"): nothing taken
    assert set(parse_show_job_text(text, "3")) == {"untrusted"}
    # a forged line starting as the job's own record: not even the ids
    assert parse_show_job_text(text.replace("\nX|y Comment", "\nJobId=3 ArrayJobId=9 Comment", 1), "3") == {
        "untrusted": "its one-line output (-o) came as 4 lines (user text -- job name, "
                     "comment or work dir -- holding a newline)"}
    # an array's first task (its raw id the array's): every task listed, the ids of its own line taken
    tasks = "".join(f"JobId={11 + k} ArrayJobId=11 ArrayTaskId={k + 1} JobName=a UserId=x(1) JobState=COMPLETED\n"
                    for k in range(3))
    assert parse_show_job_text(tasks, "11")["array_task_id"] == "1" and "job_state" not in parse_show_job_text(tasks, "11")
    # and the record says what it is: Slurm's listing of the jobs, not user text (a het leader's too)
    assert parse_show_job_text(tasks, "11")["untrusted"].startswith(
        "it lists 3 jobs, one line each (a heterogeneous job's components or an array's tasks")
    het = "".join(f"JobId={20 + k} HetJobId=20 HetJobOffset={k} JobName=h UserId=x(1) JobState=COMPLETED\n"
                  for k in range(2))
    assert parse_show_job_text(het, "20") == {"het_job_id": "20", "het_job_offset": "0", "untrusted": (
        "it lists 2 jobs, one line each (a heterogeneous job's components or an array's tasks: Slurm lists them all "
        "for the first); only the array/het ids before its JobName= are used")}
    # on one line, "Comment=JobState=COMPLETED" is the comment's text, not a key: CANCELLED, 0:15
    f = parse_show_job_text(text.replace("\n", "", 3).replace("\n", " ", 1).strip() + "\n", "3")
    assert (f["job_state"], f["exit_code"]) == ("CANCELLED", "0:15")


def test_numbers_slurm_never_writes_are_dropped_not_raised():
    from slurm_energy.slurm.clients.formats import SlurmFormatError, parse_memory
    from slurm_energy.slurm.clients.scontrol import json_number, parse_show_job

    with pytest.raises(SlurmFormatError, match="more than 16 EiB"):
        parse_memory("9" * 400 + "T", "MinMemoryNode")
    assert parse_memory("15E", "MinMemoryNode") == (15 * 2**60, "")  # 15 EiB: still one
    assert json_number(1e999) is None and json_number(-1) is None and json_number(2**64) is None
    assert json_number({"set": True, "infinite": False, "number": 42}) == 42
    f = parse_show_job("JobId=5 ArrayJobId=" + "9" * 30 + " JobName=x UserId=a(1) JobState=FAILED Restarts=" + "9" * 30)
    assert "array_job_id" not in f and "restarts" not in f and f["job_state"] == "FAILED"

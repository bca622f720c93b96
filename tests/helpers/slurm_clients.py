"""Stand-in Slurm 22.05 clients (``sacct``, ``scontrol``) for the attack tests: executables that print
what the real ones print on the test cluster for a set of jobs, so an attack through user text can
run without slurmctld/slurmdbd in the test. Shapes from captures on the test cluster (Slurm 22.05.8,
``tests/slurm/clients/data/slurm-22.05-*``):

* ``sacct -P -o F1,F2`` prints each job's fields joined by ``|`` **as they are**: a newline in a
  work dir or job name ends the line there (seen: ``WorkDir=/var/tmp/i39/w<newline>X|y``);
* ``sacct --json`` prints openapi/dbv0.0.38's job list (``job_id``, ``name``,
  ``working_directory``, ``time.start``, ``state.current``, ...);
* ``scontrol --json`` is "unrecognized option" (exit 1); ``scontrol show job -o ID`` prints one
  ``Key=value`` line in 22.05's key order, user text raw in it (a newline in it cuts the line).
"""

from __future__ import annotations

import json
import os
import sys

_SCRIPT = r'''
import json, sys, time
JOBS = json.load(open(JOBS_FILE))
args = sys.argv[1:]
def ts(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))
def pick():
    if "-j" in args:
        want = args[args.index("-j") + 1].split(",")
        return [j for j in JOBS if j["JobIDRaw"] in want]
    return JOBS
if NAME == "sacct":
    with open(LOG, "a") as f:
        f.write(" ".join(args) + "\n")
    if "--json" in args:
        out = {"meta": {"plugin": {"type": "openapi/dbv0.0.38"}, "Slurm": {"release": "22.05.8"}}, "errors": [],
               "jobs": [{"job_id": int(j["JobIDRaw"]), "name": j["JobName"], "working_directory": j["WorkDir"],
                         "user": j["User"], "group": j["User"], "account": j["Account"], "cluster": j["Cluster"],
                         "nodes": j["NodeList"], "partition": j["Partition"],
                         "state": {"current": j["State"].split()[0], "reason": "None"},
                         "time": {"start": int(j["start"]), "end": int(j["end"])},
                         "exit_code": {"status": "SUCCESS", "return_code": 0}} for j in pick()]}
        print(json.dumps(out, indent=1))
        sys.exit(0)
    fields = args[args.index("-o") + 1].split(",")
    for j in pick():
        row = dict(j, Start=ts(j["start"]), End=ts(j["end"]))
        print("|".join(str(row[f]) for f in fields))
    sys.exit(0)
if "--json" in args:
    sys.stderr.write("scontrol: unrecognized option '--json'\nTry \"scontrol --help\" for more information\n")
    sys.exit(1)
for j in pick() if "-j" in args else [x for x in JOBS if x["JobIDRaw"] == args[-1]]:
    print(f"JobId={j['JobIDRaw']} JobName={j['JobName']} UserId={j['User']}({j['UID']}) GroupId={j['User']}({j['GID']}) "
          f"MCS_label=N/A Priority=4294901759 Nice=0 Account={j['Account']} QOS=normal "
          f"JobState={j.get('CtldState') or j['State'].split()[0]} "
          f"Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode={j['ExitCode']} "
          f"StartTime={ts(j['start'])} EndTime={ts(j['end'])} Partition={j['Partition']} NodeList={j['NodeList']} "
          f"NumNodes=1 NumCPUs=1 TRES=cpu=1,mem=8436M,node=1,billing=1 MinMemoryNode=0 WorkDir={j['WorkDir']} "
          f"Comment={j.get('Comment', '')} StdErr={j['WorkDir']}/slurm-{j['JobIDRaw']}.out Power=")
'''


def job(job_id: str, user: str, uid: int, work_dir: str, start: float, end: float, state: str = "COMPLETED",
        exit_code: str = "0:0", name: str = "train", comment: str = "", node: str = "n2", cluster: str = "t",
        ctld_state: str = "") -> dict:
    """One job as slurmdbd/slurmctld know it (sacct's field names); ``ctld_state``: what scontrol's
    JobState= says where it differs from slurmdbd's (``COMPLETING`` while the Epilogs run)."""
    return {"CtldState": ctld_state,
            "JobIDRaw": job_id, "JobID": job_id, "State": state, "start": start, "end": end, "NodeList": node,
            "User": user, "UID": uid, "GID": uid, "Account": "research", "Partition": "debug", "ExitCode": exit_code,
            "Cluster": cluster, "WorkDir": work_dir, "JobName": name, "Comment": comment}


def install(directory: str, jobs: list[dict]) -> dict[str, str]:
    """``sacct`` and ``scontrol`` executables in ``directory`` answering for ``jobs``; returns their
    paths (and ``log``: sacct's argv, one line per call)."""
    with open(os.path.join(directory, "slurm-jobs.json"), "w") as f:
        json.dump(jobs, f)
    paths = {"log": os.path.join(directory, "sacct.log")}
    for name in ("sacct", "scontrol"):
        p = paths[name] = os.path.join(directory, name)
        with open(p, "w") as f:
            f.write(f"#!{sys.executable}\nJOBS_FILE = {os.path.join(directory, 'slurm-jobs.json')!r}\n"
                    f"NAME = {name!r}\nLOG = {paths['log']!r}\n{_SCRIPT}")
        os.chmod(p, 0o755)
    return paths


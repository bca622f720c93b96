"""Parsing slurmd's Prolog/Epilog environment (as listed in shared/notes/slurm-on-debian12.md)."""

import json

import pytest

from slurm_energy.errors import SlurmEnvError
from slurm_energy.slurm.context import JobContext, cpus_on_node
from tests.helpers.jobrecord_factory import parse_slurm_env

PROLOG_ENV = {  # what slurmd 22.05 gave a Prolog on this machine (no PATH, HOME, USER)
    "SLURM_JOB_ID": "42", "SLURM_JOBID": "42", "SLURM_JOB_UID": "2001", "SLURM_JOB_GID": "2001",
    "SLURM_JOB_USER": "alice", "SLURM_JOB_ACCOUNT": "research", "SLURM_JOB_PARTITION": "debug",
    "SLURM_JOB_WORK_DIR": "/home/alice/run", "SLURM_JOB_CPUS_PER_NODE": "2(x2)", "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2", "SLURM_CLUSTER_NAME": "lab",
    "SLURM_JOB_RESTART_COUNT": "1", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_JOB_GPUS": "1,3",
    "CUDA_VISIBLE_DEVICES": "1,3",
}


def test_prolog_environment_parsed():
    c = parse_slurm_env(PROLOG_ENV)
    assert (c.job_id, c.uid, c.gid, c.user, c.account, c.partition) == ("42", 2001, 2001, "alice", "research", "debug")
    assert (c.node, c.cluster, c.nodelist, c.num_nodes, c.restart_count) == ("n2", "lab", "n[1-2]", 2, 1)
    assert c.work_dir == "/home/alice/run"
    assert c.job_gpus == "1,3"  # physical indices, as the Prolog sees them
    assert c.array_job_id is None and c.het_job_id is None


def test_array_and_het_ids_kept_apart_from_raw_job_id():
    env = dict(PROLOG_ENV, SLURM_JOB_ID="715242", SLURM_ARRAY_JOB_ID="715219", SLURM_ARRAY_TASK_ID="23",
               SLURM_HET_JOB_ID="", SLURM_JOB_EXIT_CODE2="3:0")
    c = parse_slurm_env(env)
    assert (c.job_id, c.array_job_id, c.array_task_id, c.het_job_id, c.exit_code) == ("715242", "715219", "23", None, "3:0")


def test_round_trip_json():
    c = parse_slurm_env(PROLOG_ENV)
    c.gpus = [{"backend": "nvml", "vendor": "nvidia", "device_id": "GPU-abc"}]
    assert JobContext.from_json(c.to_json()) == c


@pytest.mark.parametrize("drop", ["SLURM_JOB_ID", "SLURM_JOB_UID", "SLURM_JOB_GID"])
def test_missing_required_field_names_it(drop):
    env = {k: v for k, v in PROLOG_ENV.items() if k not in (drop, "SLURM_JOBID")}
    with pytest.raises(SlurmEnvError, match=drop):
        parse_slurm_env(env)


def test_non_numeric_uid_names_field_and_value():
    with pytest.raises(SlurmEnvError, match=r"SLURM_JOB_UID='alice'"):
        parse_slurm_env(dict(PROLOG_ENV, SLURM_JOB_UID="alice"))


@pytest.mark.parametrize("s,i,want", [("2", 0, 2), ("2(x3)", 2, 2), ("4,2(x2)", 0, 4), ("4,2(x2)", 2, 2),
                                      ("4,2(x2)", 3, None), ("", 0, None), ("x", 0, None)])
def test_cpus_on_node(s, i, want):
    assert cpus_on_node(s, i) == want


@pytest.mark.parametrize("ec,state", [("0:0", "COMPLETED"), ("3:0", "FAILED"), ("0:15", "CANCELLED"),
                                      ("0:9", "CANCELLED"), ("", ""), ("x:y", "")])
def test_job_state_from_epilog_exit_code(ec, state):
    from slurm_energy.model import job_state_from_exit_code

    assert job_state_from_exit_code(ec) == state


def test_a_jobs_own_environment_gives_its_name_and_umask_never_its_identity_or_request():
    # a user can export SLURM_ARRAY_* / SLURM_MEM_PER_NODE before any child: never taken (issue 22)
    from slurm_energy.slurm.context import job_env_facts

    env = {"SLURM_JOB_ID": "31", "SLURM_ARRAY_JOB_ID": "29", "SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_NAME": "sweep",
           "SLURM_MEM_PER_NODE": "999999", "SLURM_UMASK": "0077"}
    assert job_env_facts(env, "31") == {"job_name": "sweep", "umask": "0077"}
    assert job_env_facts({"SLURM_JOB_ID": "1234", "SLURM_HET_JOB_ID": "1234", "SLURM_HET_JOB_OFFSET": "0",
                          "SLURM_UMASK": "9;rm"}, "1234") == {}  # not an octal umask: left out
    assert job_env_facts({"PATH": "/usr/bin"}, "31") is None  # slurmstepd: slurmd's environment
    assert job_env_facts({"SLURM_JOB_ID": "30"}, "31") is None  # another job's process


def test_the_hooks_context_dict_is_job_contexts_json():
    # the Prolog writes the context without the dataclass (slurm_energy.slurm.context): every
    # field, every default and every parsed value as JobContext.to_json writes them
    from dataclasses import fields

    from slurm_energy.slurm.context import CONTEXT_DEFAULTS, context_dict, slurm_env_fields

    assert {f.name: getattr(JobContext(), f.name) for f in fields(JobContext)} == CONTEXT_DEFAULTS
    env = dict(PROLOG_ENV, SLURM_JOB_START_TIME="1700000000", SLURM_JOB_SLUID="sl_01J", SLURM_ARRAY_JOB_ID="N/A")
    assert context_dict(slurm_env_fields(env)) == json.loads(parse_slurm_env(env).to_json())
    a, b = context_dict({}), context_dict({})
    a["gpus"].append("GPU-1")
    assert b["gpus"] == [] and CONTEXT_DEFAULTS["gpus"] == []  # no list shared between jobs


def test_a_context_written_before_the_gpu_registry_keeps_its_gpus():
    # a job started under the previous version (its Prolog wrote gpu_uuids / drm_gpus) and finished
    # by the upgraded finalizer: its GPUs are still read, as the one Gpu type of every vendor

    from slurm_energy.devices.gpu import Gpu

    old = {"job_id": "77", "uid": 0, "gid": 0, "node": "n1", "nodelist": "n1", "job_gpus": "0,1",
           "gpu_uuids": ["GPU-4d1f0c5e-0000-0000-0000-000000000001"],
           "drm_gpus": [{"device_id": "0000:c1:00.0/xcp3", "pci_bus_id": "0000:c1:00.0", "vendor": "amd",
                         "model": "MI300X", "fraction": 0.125, "share": "partition", "share_detail": "CPX 3/8",
                         "fraction_unknown": False, "index": 3, "source": "SLURM_JOB_GPUS=1"}]}
    ctx = JobContext.from_json(json.dumps(old))
    gpus = [Gpu.from_dict(g) for g in ctx.gpus]
    assert [(g.backend, g.vendor, g.device_id, g.bus_id, g.fraction) for g in gpus] == [
        ("nvml", "nvidia", "GPU-4d1f0c5e-0000-0000-0000-000000000001", "", None),
        ("drm", "amd", "0000:c1:00.0/xcp3", "0000:c1:00.0", 0.125)]
    assert gpus[1].share_detail == "CPX 3/8" and gpus[1].index == 3
    # a context of this version is read as written
    assert JobContext.from_json(ctx.to_json()).gpus == ctx.gpus
    assert JobContext.from_json(json.dumps({**old, "gpus": []})).gpus == []

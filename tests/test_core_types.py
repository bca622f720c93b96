"""The stdlib-only types: enums readable from old JSON, MIG fraction typed, one JobMeta."""

from __future__ import annotations

import dataclasses

import pytest

from slurm_energy import errors
from slurm_energy.core import Flag, JobMeta, Method, Reading, Sample, Status, worst_method
from slurm_energy.model import JobRecord
from slurm_energy.slurm.context import JobContext


def test_method_is_read_from_its_old_string_value_and_unknown_is_unavailable():
    assert Reading("cpu", "x", "counter").method is Method.COUNTER
    assert Reading.from_dict({"device_class": "cpu", "device_id": "x", "method": "quantum"}).method is Method.UNAVAILABLE
    assert Reading("cpu", "x", "tdp_estimate").to_dict()["method"] == "tdp_estimate"


def test_enums_hash_and_print_as_their_values():
    assert {Flag.WRAP, "wrap"} == {"wrap"} and {"counter": 1}[Method.COUNTER] == 1
    assert f"{Status.RUNNING}" == "running" and Flag.NVML_ERROR.detail("GpuIsLost") == "nvml_error:GpuIsLost"
    assert worst_method(["counter", Method.TDP_ESTIMATE]) is Method.TDP_ESTIMATE


def test_mig_fraction_round_trips_and_old_sample_files_keep_theirs():
    r = Reading("gpu", "MIG-1", "counter", energy_uj=5, mig_fraction=3 / 7)
    assert Reading.from_dict(r.to_dict()).mig_fraction == pytest.approx(3 / 7)
    old = {"device_class": "gpu", "device_id": "MIG-1", "method": "counter", "flags": ["mig_estimated", "mig_fraction:0.428571"]}
    assert Reading.from_dict(old).mig_fraction == pytest.approx(0.428571)


def test_job_meta_is_shared_by_the_spool_context_and_the_record():
    names = {f.name for f in dataclasses.fields(JobMeta)}
    assert names <= set(JobRecord.model_fields) and names <= {f.name for f in dataclasses.fields(JobContext)}
    ctx = JobContext(job_id="5", uid=1, gid=2, user="bob", node="n1", array_job_id="4", array_task_id="1")
    rec = JobRecord.from_meta(ctx, start_time=1.0, end_time=2.0)
    assert all(getattr(rec, k) == getattr(ctx, k) for k in names) and rec.array_task_id == "1" and rec.uid == 1


def test_every_error_is_a_slurm_energy_error_and_keeps_its_builtin_base():
    from slurm_energy.config import ConfigError, DuplicateKeyError
    from slurm_energy.reporting.cite import CiteError
    from slurm_energy.reporting.report import ReportWriteError

    assert CiteError is errors.CiteError
    for cls in (ConfigError, errors.SlurmEnvError, errors.GpuResolveError, errors.HourlyDataError,
                errors.PredictionError, errors.MergeError, errors.StoreUrlError, CiteError):
        assert issubclass(cls, errors.SlurmEnergyError) and issubclass(cls, ValueError)
    assert issubclass(ReportWriteError, errors.SlurmEnergyError) and issubclass(ReportWriteError, OSError)
    assert issubclass(DuplicateKeyError, errors.SlurmEnergyError)


def test_sample_rows_of_every_version_are_read_typed(tmp_path):
    from slurm_energy.sampling.samplefile import read_sample_file

    p = tmp_path / "samples-n1.jsonl"
    p.write_text(
        # a hook's own reading (no job), an old row with the MIG fraction as a flag, a torn line
        '{"t": 10.0, "kind": "prolog", "job": null, "node": {"cpu_busy_s": 5.0, "ncpu": 4}, "readings": []}\n'
        '{"t": 15.0, "job": {"cpu_time_s": 1.5, "pids": [7], "source": "cgroup-v2", "future": 1}, "readings": '
        '[{"device_class": "gpu", "device_id": "MIG-a", "method": "counter", "energy_uj": 9, '
        '"flags": ["mig_fraction:0.25"]}]}\n'
        '{"t": 20.0, "kind": "fin')
    a, b = read_sample_file(str(p))
    assert a.kind == "prolog" and a.job is None and a.node.ncpu == 4 and a.node.mem_used_bytes is None
    assert b.kind == "sample" and b.job.cpu_time_s == 1.5 and b.job.pids == [7]
    (rd,) = b.readings
    assert rd.method is Method.COUNTER and rd.mig_fraction == 0.25 and rd.energy_uj == 9
    assert Sample.from_dict(b.to_dict()) == b


def test_a_node_summary_deep_copy_copies_its_power_trace_rows():
    from slurm_energy.model import NodeSummary

    ns = NodeSummary(node="n1", job_id="1", start_time=0.0, end_time=10.0, power_trace=[[5.0, 100.0, None, 2.5]],
                     errors=["e"])
    cp = ns.model_copy(deep=True)
    assert cp == ns and cp.power_trace is not ns.power_trace and cp.power_trace[0] is not ns.power_trace[0]
    cp.power_trace[0][1] = 1.0
    cp.errors.append("f")
    assert ns.power_trace == [[5.0, 100.0, None, 2.5]] and ns.errors == ["e"]


def test_record_json_compact_and_read_back_whole():
    """The stored JSON leaves a device's empty fields out and writes a node inventory equal to an
    earlier node's (host and pid aside) as ``same_as``; reading gives the same record back, and
    ``context={"full": True}`` (jobenergy --json) writes every field."""
    import json

    from slurm_energy.model import DeviceEnergy, JobRecord, NodeSummary

    inv = {"cpu_model": "EPYC 9654", "sockets": 2, "devices": [{"device_class": "cpu", "device_id": "intel-rapl:0"}]}
    nodes = [NodeSummary(node=f"n{k}", job_id="1", start_time=0.0, end_time=60.0,
                         static={**inv, "host": f"n{k}", "pid": 100 + k},
                         devices=[DeviceEnergy(device_class="cpu", device_id="intel-rapl:0", energy_j=3600.0)])
             for k in (1, 2)]
    nodes[1].devices[0].wraps = 2  # not at its default: written
    rec = JobRecord(job_id="1", start_time=0.0, end_time=60.0, nodes=nodes)
    d = json.loads(rec.model_dump_json())
    assert d["nodes"][1]["static"] == {"host": "n2", "pid": 102, "same_as": "n1"}
    dev1, dev2 = d["nodes"][0]["devices"][0], d["nodes"][1]["devices"][0]
    assert "idle_spans" not in dev1 and "wraps" not in dev1 and "unclamped" not in dev1
    assert dev2["wraps"] == 2 and dev1["energy_j"] == 3600.0 and dev1["flags"] == []
    back = JobRecord.model_validate_json(rec.model_dump_json())
    assert back == rec
    assert back.nodes[1].static == {**inv, "host": "n2", "pid": 102}
    full = json.loads(rec.model_dump_json(context={"full": True}))
    assert full["nodes"][1]["static"]["cpu_model"] == "EPYC 9654" and full["nodes"][0]["devices"][0]["idle_spans"] == []

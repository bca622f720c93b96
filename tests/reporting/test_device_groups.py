"""Devices per node and class for a job of many nodes: the report's provenance table and
``jobenergy -l`` (every device with ``--devices``). Hand-computed values."""

from __future__ import annotations

from slurm_energy.accounting.merge import merge_records
from slurm_energy.model import Method
from slurm_energy.reporting.device_groups import class_summary, shown_devices
from slurm_energy.reporting.report import render_html
from tests.helpers.jobrecord_factory import device, finished, job_record, run_jobenergy, store_with

KWH = 3.6e6  # J


def test_class_summary_sums_and_never_counts_unmeasured_as_zero():
    devs = [device("gpu", 1 * KWH, method=Method.COUNTER, device_id="GPU-a", coverage=1.0, mean_util=0.5, wraps=1),
            device("gpu", 2 * KWH, method=Method.POWER_INTEGRATION, device_id="GPU-b", coverage=0.9, mean_util=1.0),
            device("gpu", None, method=Method.UNAVAILABLE, device_id="GPU-c")]
    s = class_summary(devs, "n1")
    assert s.device_id == "3 devices" and s.count == 3 and s.node == "n1"
    assert s.energy_j == 3 * KWH  # 1 + 2 kWh; GPU-c unmeasured: flagged, not 0
    assert "unmeasured_devices:1" in s.flags
    assert s.method == Method.UNAVAILABLE  # the worst of counter, power_integration, unavailable
    assert s.coverage == 0.0  # the lowest (GPU-c's)
    assert s.wraps == 1
    assert s.mean_util is None  # GPU-c has none: no mean over part of the devices
    assert s.covers == "3 GPU devices summed (GPU-a ... GPU-c)"


def _job(nodes: int):
    names = [f"n{k}" for k in range(1, nodes + 1)]
    recs = [job_record(node=n, expected=names, devices=[
        device("cpu", 0.5 * KWH, node=n, device_id="intel-rapl:0"),
        device("gpu", 1 * KWH, node=n, device_id="GPU-0", method=Method.COUNTER),
        device("gpu", 2 * KWH, node=n, device_id="GPU-1", method=Method.COUNTER)]) for n in names]
    return finished(merge_records(recs))


def test_nine_nodes_shown_per_node_and_class(tmp_path, capsys):
    rec = _job(9)
    shown = shown_devices(rec)
    assert [(d.device_class, d.device_id, d.energy_j) for d in shown[0][1]] == [
        ("cpu", "intel-rapl:0", 0.5 * KWH), ("gpu", "2 devices", 3 * KWH)]
    url = store_with(tmp_path, rec)
    rc, out, _ = run_jobenergy(capsys, "--store", url, "-l", "-P", "-n", "100")
    assert rc == 0
    rows = [r.split("|") for r in out.splitlines() if r.split("|")[1].startswith("n")]
    assert len(rows) == 18  # 9 nodes x 2 classes
    gpu = next(r for r in rows if r[1] == "n1" and r[2] == "gpu")
    assert gpu[3] == "2 devices" and gpu[5] == "2" and gpu[7] == "3"  # kWh: 1 + 2
    rc, out, _ = run_jobenergy(capsys, "--store", url, "-l", "-P", "-n", "--devices", "100")
    assert len([r for r in out.splitlines() if r.split("|")[1].startswith("n")]) == 27  # 9 x 3 devices
    html = render_html(rec)
    assert "jobenergy -l --devices 100" in html and "2 GPU devices summed (GPU-0 ... GPU-1)" in html


def test_eight_nodes_shown_device_by_device():
    rec = _job(8)
    assert [d.device_id for d in shown_devices(rec)[0][1]] == ["intel-rapl:0", "GPU-0", "GPU-1"]
    assert "jobenergy -l --devices" not in render_html(rec)

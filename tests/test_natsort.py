"""Devices and nodes in numeric order everywhere: intel-rapl:2 before intel-rapl:10, GPU minor 2 before
10, n2 before n10 (Slurm's hostlist order) -- in records, the HTML report and jobenergy -l."""

import pytest

from slurm_energy.accounting.merge import merge_records
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.cli.jobenergy import main
from slurm_energy.model import DeviceEnergy
from slurm_energy.natsort import natural_key
from slurm_energy.reporting.report import render_html
from slurm_energy.sampling.readers.nvml import NvmlReader
from tests.fakes.nvml import FakeGpu, install
from tests.helpers.jobrecord_factory import finished, node_record, store_with

T0 = 1_700_000_000.0


def test_natural_key_orders_numbers_as_numbers():
    names = ["intel-rapl:10", "intel-rapl:2", "intel-rapl:1", "gpu10", "gpu2", "n10", "n2", "n1", "n01"]
    assert sorted(names, key=natural_key) == ["gpu2", "gpu10", "intel-rapl:1", "intel-rapl:2", "intel-rapl:10",
                                              "n01", "n1", "n2", "n10"]
    assert sorted(["intel-rapl:0:10", "intel-rapl:0:2", "intel-rapl:0"], key=natural_key) == [
        "intel-rapl:0", "intel-rapl:0:2", "intel-rapl:0:10"]


def _rapl(zone, uj):
    return {"device_class": "cpu", "device_id": zone, "method": "counter", "energy_uj": uj}


def test_summary_lists_rapl_zones_numerically():
    zones = ["intel-rapl:10", "intel-rapl:2", "intel-rapl:1"]
    rows = [{"t": T0 + t, "kind": "sample", "job": {"cpu_time_s": float(t), "pids": [1], "source": "cgroup-v1"},
             "node": {"cpu_busy_s": float(t), "cpu_total_s": 2.0 * t, "ncpu": 2},
             "readings": [_rapl(z, 10_000_000 * t) for z in zones]} for t in (0, 10)]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10)
    assert [d.device_id for d in s.devices] == ["intel-rapl:1", "intel-rapl:2", "intel-rapl:10"]
    assert [d.energy_j for d in s.devices] == [pytest.approx(100.0)] * 3  # 1e8 uJ each, share 1


def test_gpus_ordered_by_minor_number_not_uuid(monkeypatch):
    # the GPU with minor 10 has the "smaller" UUID; numeric order puts minor 2 first
    g10 = FakeGpu("GPU-00000000-0000-0000-0000-00000000000a", 10, power_mw=100_000, energy_mj=None)
    g2 = FakeGpu("GPU-ffffffff-0000-0000-0000-000000000002", 2, power_mw=100_000, energy_mj=None)
    install(monkeypatch, [g10, g2])
    r = NvmlReader([g10.uuid, g2.uuid])
    statics = r.devices()
    assert [d.extra["minor"] for d in statics] == [10, 2]
    rows = [{"t": T0 + t, "kind": "sample", "job": None, "node": {}, "readings": [x.to_dict() for x in r.read()]}
            for t in (0, 10)]
    s = summarise_node(rows, job_id="1", node="g1", start_time=T0, end_time=T0 + 10, statics=statics)
    assert [d.device_id for d in s.devices] == [g2.uuid, g10.uuid]
    assert [d.index for d in s.devices] == [2, 10]


def _two_node_record():
    recs = []
    for node in ("n10", "n2"):
        r = node_record(job_id="7", node=node, expected=("n2", "n10"), start=T0, end=T0 + 60)
        r.nodes[0].devices = [DeviceEnergy(device_class="cpu", device_id=z, node=node, energy_j=1.0, coverage=1.0)
                              for z in ("intel-rapl:10", "intel-rapl:2")]
        recs.append(r)
    return recs


def test_merge_orders_nodes_and_devices_numerically():
    m = merge_records(_two_node_record())
    assert [n.node for n in m.nodes] == ["n2", "n10"]
    assert [d.device_id for d in m.nodes[0].devices] == ["intel-rapl:2", "intel-rapl:10"]


def test_report_and_jobenergy_long_in_numeric_order(tmp_path, site_config, monkeypatch, capsys):
    recs = _two_node_record()
    rec = recs[0].model_copy(update={"nodes": recs[0].nodes + recs[1].nodes})  # stored in string order
    html = render_html(finished(rec))
    i = [html.index(f"<td>{n}</td>") for n in ("n2", "n10")]
    assert i[0] < i[1]
    j = [html.index(z) for z in ("intel-rapl:2<", "intel-rapl:10<")]
    assert j[0] < j[1]
    site_config.write(bare=True, cluster_name="c1")
    u = store_with(tmp_path, finished(rec))
    assert main(["--store", u, "-l", "-P", "-n", "7"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [(x.split("|")[1], x.split("|")[3]) for x in lines] == [
        ("n2", "intel-rapl:2"), ("n2", "intel-rapl:10"), ("n10", "intel-rapl:2"), ("n10", "intel-rapl:10")]

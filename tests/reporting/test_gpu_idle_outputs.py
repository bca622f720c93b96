"""GPU allocated but idle in every output: the report (a line and a band on the plot), ``jobenergy
-l``, ``--seff``, ``--json`` and the Prometheus textfile (promtool-clean). The job: 30 s idle at
60 W (0 %), then 30 s at 300 W (90 %) on an A100 (400 W rated): idle 30 s, 60 W x 30 s = 1800 J =
5.0e-4 kWh, measured by power integration."""

import json
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.cli import jobenergy_format as F
from slurm_energy.model import CarbonFacts, JobRecord
from slurm_energy.outputs.prometheus import PrometheusTextfile
from slurm_energy.reporting.plot import power_figure
from slurm_energy.reporting.report import render_html
from slurm_energy.reporting.seff import seff_block
from slurm_energy.sampling.readers.base import DeviceStatic

T0 = 1_796_034_000.0


def _record():
    def row(t, p, u):
        return {"t": T0 + t, "kind": "sample", "job": {"cpu_time_s": float(t), "mem_bytes": 1, "pids": [1],
                "source": "cgroup-v2"}, "node": {"cpu_busy_s": float(t), "cpu_total_s": 2.0 * t, "ncpu": 2,
                "mem_used_bytes": 10, "mem_total_bytes": 100},
                "readings": [{"device_class": "gpu", "device_id": "GPU-0", "method": "power_integration",
                              "power_w": p, "util": u}]}
    rows = [row(t, 60.0, 0.0) for t in range(0, 31, 5)] + [row(t, 300.0, 0.9) for t in range(35, 61, 5)]
    ns = summarise_node(rows, job_id="42", node="g1", start_time=T0, end_time=T0 + 60, cpus_alloc=1,
                        statics=[DeviceStatic("gpu", "GPU-0", "NVIDIA A100-SXM4-40GB", 1, 400.0)])
    rec = JobRecord(cluster="c1", job_id="42", user="alice", account="physics", partition="gpu", start_time=T0,
                    end_time=T0 + 60, nodes=[ns], expected_nodes=["g1"])
    return finalise_record(rec, CarbonFacts(pue=1.5, ci_g_per_kwh=400.0))


def test_long_rows_seff_and_json():
    rec = _record()
    [idle] = [r for r in F.long_rows(rec, "42") if r[2] == "gpu_idle"]
    assert idle[:4] == ["42", "g1", "gpu_idle", "GPU-0"]
    assert idle[F.LONG_FIELDS.index("Energy_kWh")] == "0.0005"  # 1800 J
    assert idle[F.LONG_FIELDS.index("Coverage")] == "0.500"  # 30 s of 60 s
    assert "measured energy in an idle state (power_integration)" in idle[-1] and "<= 100 W" in idle[-1]
    text = seff_block(rec, {})
    assert ("GPU allocated but idle: 30 s of 60 GPU-s (50.0 %), 0.0005 kWh -- measured energy in an idle state "
            "(power_integration)") in text
    [job] = json.loads(F.to_json([("42", rec)]))["jobs"]
    gi = job["gpu_idle"]
    assert gi["idle_s"] == pytest.approx(30.0) and gi["energy_j"] == pytest.approx(1800.0)
    assert gi["kwh"] == pytest.approx(5.0e-4) and gi["method"] == "power_integration"
    assert gi["label"] == "measured energy in an idle state (power_integration)"
    assert job["record"]["gpu_idle_energy_j"] == pytest.approx(1800.0)


def test_report_line_and_plot_band():
    rec = _record()
    html = render_html(rec)
    assert "GPU allocated but idle" in html and "0.0005 kWh" in html and "arXiv:2605.23918" in html
    from slurm_energy.reporting.gpu_idle import plot_spans

    spans, bound = plot_spans(rec)
    assert spans == [(0.0, 0.5)] and bound == pytest.approx(100.0)  # 0-30 s = 0-0.5 min; 0.25 x 400 W
    fig = power_figure(rec.nodes, rec.start_time, None, (spans, bound))
    ax = fig.axes[0]
    labels = [h.get_label() for h in ax.get_legend().legend_handles]
    assert "GPU allocated but idle" in labels and "GPU idle-draw bound (100 W)" in labels
    band = next(p for p in ax.patches if p.get_label() == "GPU allocated but idle")
    # seconds on a 60 s job (the x axis in s): 0 to 30 s
    assert band.get_x() == pytest.approx(0.0) and band.get_width() == pytest.approx(30.0)


def test_prometheus_metric(tmp_path):
    rec = _record()
    sink = PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), clock=lambda: T0 + 61)
    (tmp_path / "tf").mkdir()
    assert sink.publish(rec) == []
    text = (tmp_path / "tf" / "slurm_energy.prom").read_text()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    [s] = fams["slurm_energy_job_gpu_idle_seconds"].samples
    assert s.value == pytest.approx(30.0) and s.labels["job_id"] == "42"
    [j] = fams["slurm_energy_job_gpu_idle_joules"].samples
    assert j.value == pytest.approx(1800.0) and j.labels["method"] == "power_integration"
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr


def _two_node_record():
    """The same GPU job on nodes g1 and g2: each idle 0-30 s with a 100 W bound (0.25 x 400 W)."""
    from slurm_energy.accounting.merge import merge_records

    one = _record()
    recs = []
    for name in ("g1", "g2"):
        ns = one.nodes[0].model_copy(deep=True, update={"node": name})
        recs.append(one.model_copy(update={"nodes": [ns], "expected_nodes": ["g1", "g2"]}))
    return finalise_record(merge_records(recs), CarbonFacts(pue=1.5, ci_g_per_kwh=400.0))


def test_two_nodes_bound_on_the_summed_gpu_line():
    from slurm_energy.reporting.gpu_idle import plot_spans

    rec = _two_node_record()
    assert rec.job_trace is not None and rec.job_trace.nodes == 2
    spans, bound = plot_spans(rec)
    # both nodes idle 0-0.5 min: one band; two GPUs' bounds, 2 x 100 W, beside the GPU line summed over both
    assert spans == [(0.0, 0.5)] and bound == pytest.approx(200.0)
    fig = power_figure(rec.nodes, rec.start_time, None, (spans, bound), rec.job_trace)
    top, nodes_ax = fig.axes[0], fig.axes[-1]
    labels = [h.get_label() for h in top.get_legend().legend_handles]
    assert "GPU idle-draw bound (200 W)" in labels and "GPU, all nodes" in labels
    gpu = next(line for line in top.get_lines() if line.get_label() == "GPU, all nodes")
    # the job's GPU line, 2 x 300 W at the end: the bound's scale
    assert gpu.get_ydata()[-1] == pytest.approx(600.0)
    # below: the nodes' band (both nodes the same: 300 W at the end) and both nodes' own lines
    assert [t.get_text() for t in nodes_ax.get_legend().get_texts()] == [
        "lowest to highest node (2 nodes)", "node g1", "node g2"]


def test_older_multi_node_record_bound_per_node():
    from slurm_energy.reporting.gpu_idle import plot_spans

    rec = _two_node_record().model_copy(update={"job_trace": None})  # stored before job traces: drawn node by node
    assert plot_spans(rec)[1] == pytest.approx(100.0)  # one node's GPU, beside per-node lines

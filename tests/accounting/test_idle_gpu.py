"""GPUs allocated but idle: seconds at utilisation 0 and idle power, and the job's energy in them,
on both paths of the node summary (interval by interval, and on arrays for long series) and in the
running (interim) summary; values computed by hand."""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.accounting.idle_gpu import IdleRule, idle_sums, rule_from
from slurm_energy.accounting.running import RunningSummary
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.config.schema import SiteConfig
from slurm_energy.model import CarbonFacts, JobRecord
from slurm_energy.sampling.readers.base import DeviceStatic
from slurm_energy.sampling.samplefile import SampleWriter

T0 = 1_796_034_000.0
A100 = DeviceStatic("gpu", "GPU-0", "NVIDIA A100-SXM4-40GB", 1, 400.0)


def row(t, readings, kind="sample"):
    return {"t": T0 + t, "kind": kind,
            "job": {"cpu_time_s": float(t), "mem_bytes": 1, "pids": [1], "source": "cgroup-v2"},
            "node": {"cpu_busy_s": float(t), "cpu_total_s": 2.0 * t, "ncpu": 2, "mem_used_bytes": 10,
                     "mem_total_bytes": 100}, "readings": readings}


def gpu(power_w, util):
    return [{"device_class": "gpu", "device_id": "GPU-0", "method": "power_integration", "power_w": power_w,
             "util": util}]


def idle_then_busy(step=5, idle_s=30, busy_s=30):
    """``idle_s`` at 60 W and 0 % utilisation, then ``busy_s`` at 300 W and 90 %."""
    rows = [row(t, gpu(60.0, 0.0)) for t in range(0, idle_s + 1, step)]
    rows += [row(t, gpu(300.0, 0.9)) for t in range(idle_s + step, idle_s + busy_s + 1, step)]
    return rows


def test_idle_sums_rule():
    rule = IdleRule()  # util <= 0, power <= 0.25 x 400 W = 100 W
    ivs = [(0, 10, 600.0, 600.0, 0.0),     # 60 W, 0 %: idle, 10 s, 600 J
           (10, 20, 1200.0, 1200.0, 0.0),  # 120 W > 100 W: a context busy copying memory, not idle
           (20, 30, 500.0, 500.0, 0.05),   # 5 %: not idle
           (30, 40, 400.0, None, 0.0),     # the job's share unknown: not judged
           (40, 50, 500.0, 250.0, 0.0)]    # 50 W, half the card the job's (a shared GPU): 10 s, 250 J
    s = idle_sums(ivs, rule, 400.0)
    assert s.idle_s == 20.0 and s.idle_j == pytest.approx(850.0) and s.checked_s == 40.0
    assert not s.flags
    # no rated power and no site bound: utilisation alone, flagged
    s2 = idle_sums(ivs, rule, None)
    assert s2.idle_s == 30.0 and s2.idle_j == pytest.approx(2050.0) and s2.flags == {"gpu_idle_util_only"}
    # a site's absolute bound of 55 W: only the 50 W interval
    s3 = idle_sums(ivs, IdleRule(power_max_w=55.0), 400.0)
    assert s3.idle_s == 10.0 and s3.idle_j == pytest.approx(250.0)


def test_rule_from_site_config_and_untyped_view():
    site = SiteConfig(attribution={"gpu_idle": {"util_max": 0.02, "power_max_w": 80}})
    assert rule_from(site) == IdleRule(util_max=0.02, power_max_fraction=0.25, power_max_w=80.0)
    assert rule_from(SiteConfig()) == IdleRule()

    class View:  # the hooks' ConfigView: dicts with attribute access, or an older copy without the key
        attribution = type("A", (), {"gpu_idle": {"util_max": 0.0, "power_max_fraction": 0.3}})()
    assert rule_from(View()) == IdleRule(0.0, 0.3, None)
    assert rule_from(object()) == IdleRule()


def _summary(rows, **kw):
    return summarise_node(rows, job_id="1", node="n1", start_time=rows[0]["t"], end_time=rows[-1]["t"],
                          statics=[A100], cpus_alloc=1, **kw)


@pytest.mark.parametrize("fast", [False, True])
def test_30_s_idle_at_60_w_is_1800_j(fast):
    # 30 s at 60 W (0 %), then 30 s at 300 W (90 %); 5 s steps; power integration (trapezoid).
    # The interval 30 -> 35 s goes 60 -> 300 W at 90 % at its end: busy. Idle: 6 intervals x 5 s =
    # 30 s; 60 W x 30 s = 1800 J = 5.0e-4 kWh. The job's GPU energy: 1800 + (60+300)/2 x 5 + 300 x 25
    # = 1800 + 900 + 7500 = 10,200 J.
    rows = idle_then_busy()
    if fast:  # a long series (0.5 s steps, over 100 rows): the same sums
        rows = [row(t / 10, gpu(60.0, 0.0)) for t in range(0, 301, 5)]
        rows += [row(t / 10, gpu(300.0, 0.9)) for t in range(305, 601, 5)]
        assert len(rows) >= 100
    (d,) = _summary(rows).devices
    assert d.idle_s == pytest.approx(30.0)
    assert d.idle_energy_j == pytest.approx(1800.0)
    want_total = 1800 + (60 + 300) / 2 * (0.5 if fast else 5) + 300 * (29.5 if fast else 25)
    assert d.energy_j == pytest.approx(want_total)
    rec = finalise_record(JobRecord(job_id="1", start_time=T0, end_time=T0 + 60, nodes=[_summary(rows)]),
                          CarbonFacts())
    assert rec.gpu_idle_s == pytest.approx(30.0) and rec.gpu_idle_energy_j == pytest.approx(1800.0)
    assert rec.gpu_idle_energy_j / 3.6e6 == pytest.approx(5.0e-4)
    assert rec.gpu_idle_method == "power_integration"


def test_gpu_without_utilisation_has_no_idle_figure_not_zero():
    rows = [row(t, [{"device_class": "gpu", "device_id": "GPU-0", "method": "power_integration", "power_w": 60.0}])
            for t in range(0, 31, 5)]
    (d,) = _summary(rows).devices
    assert d.energy_j == pytest.approx(1800.0)
    assert d.idle_s is None and d.idle_energy_j is None  # unknown, never 0
    rec = finalise_record(JobRecord(job_id="1", start_time=T0, end_time=T0 + 30, nodes=[_summary(rows)]),
                          CarbonFacts())
    assert rec.gpu_idle_s is None and rec.gpu_idle_energy_j is None and rec.gpu_idle_method == ""


def test_cpu_only_job_has_no_idle_fields():
    rows = [row(t, [{"device_class": "cpu", "device_id": "cpu-tdp", "method": "tdp_estimate", "mean_power_w": 10.0}])
            for t in range(0, 21, 10)]
    (d,) = _summary(rows).devices
    assert d.idle_s is None and d.idle_energy_j is None


def test_interim_summary_gives_the_same_idle_figures(tmp_path):
    rows = idle_then_busy()
    p = tmp_path / "samples"
    w = SampleWriter(str(p), fsync=False)
    run = RunningSummary(str(p))
    kw = dict(job_id="1", node="n1", start_time=rows[0]["t"], statics=[A100], cpus_alloc=1)
    for k in range(0, len(rows), 4):
        for r in rows[k:k + 4]:
            w.write(r)
        run.update(statics=[A100], cpus_alloc=1)
        s = run.summary(end_time=rows[min(k + 3, len(rows) - 1)]["t"], **kw)
    w.close()
    (d,) = s.devices
    assert d.idle_s == pytest.approx(30.0) and d.idle_energy_j == pytest.approx(1800.0)


def test_idle_spans_and_bound_for_the_plot():
    rows = idle_then_busy() + [row(t, gpu(60.0, 0.0)) for t in range(65, 76, 5)]
    (d,) = _summary(rows).devices
    # idle 0-30 s, busy 30-60 s at 300 W, the interval 60 -> 65 s averages (300+60)/2 = 180 W > 100 W: busy;
    # idle again 65-75 s (10 s x 60 W = 600 J)
    assert d.idle_spans == [[T0, T0 + 30], [T0 + 65, T0 + 75]]
    assert d.idle_s == pytest.approx(40.0) and d.idle_energy_j == pytest.approx(2400.0)
    assert d.idle_bound_w == pytest.approx(100.0)  # 0.25 x 400 W


def test_through_the_nvml_reader_on_fake_nvml_counter_gpu(monkeypatch):
    """The real NvmlReader on a fake NVML A100 (enforced limit 400 W -> bound 100 W): 30 s at 60 W and
    0 %, then 30 s at 300 W and 90 %, read every 5 s; its energy counter advances at the power drawn.
    Idle: the 6 intervals 0-30 s, 60 W x 5 s = 300 J each = 1800 J (5.0e-4 kWh), method counter."""
    from slurm_energy.sampling.readers.nvml import NvmlReader
    from tests.fakes.nvml import FakeGpu, install

    uuid = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
    g = FakeGpu(uuid, 0, energy_mj=0, power_mw=60_000, limit_mw=400_000, util_gpu=0)
    install(monkeypatch, [g])
    reader = NvmlReader([uuid])
    rows = []
    for t in range(0, 61, 5):
        if t > 30:  # the card busy from 30 s on
            g.power_mw, g.util_gpu = 300_000, 90
            g.energy_mj += 300 * 5 * 1000
        elif t > 0:
            g.energy_mj += 60 * 5 * 1000
        rows.append(row(t, [rd.to_dict() for rd in reader.read()]))
    (st,) = reader.devices()
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 60, statics=[st], cpus_alloc=1)
    (d,) = s.devices
    assert d.method.value == "counter" and d.rated_power_w == pytest.approx(400.0)
    assert d.idle_s == pytest.approx(30.0) and d.idle_energy_j == pytest.approx(1800.0)
    assert d.energy_j == pytest.approx(1800.0 + 300 * 30)  # 10,800 J over the job
    rec = finalise_record(JobRecord(job_id="1", start_time=T0, end_time=T0 + 60, nodes=[s]), CarbonFacts())
    assert rec.gpu_idle_energy_j / 3.6e6 == pytest.approx(5.0e-4) and rec.gpu_idle_method == "counter"

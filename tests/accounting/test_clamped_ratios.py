"""Physically bounded ratios (CPU/GPU utilisation, shares, coverage) clamped AND flagged, raw kept."""

import pytest

from slurm_energy.accounting import attribution
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.core import Flag
from slurm_energy.sampling.readers.base import DeviceStatic

GIB = 1024 ** 3
T0 = 1_796_034_000.0


def row(t, job_cpu, node_busy, readings, job_mem=None, node_mem=None):
    return {"t": T0 + t, "kind": "sample",
            "job": {"cpu_time_s": job_cpu, "mem_bytes": job_mem, "pids": [1], "source": "cgroup-v1"},
            "node": {"cpu_busy_s": node_busy, "cpu_total_s": 4.0 * t, "ncpu": 4, "mem_used_bytes": node_mem,
                     "mem_total_bytes": 16 * GIB},
            "readings": readings}


def tdp(p):
    return {"device_class": "cpu", "device_id": "cpu-tdp", "method": "tdp_estimate", "mean_power_w": p}


def test_cpu_util_above_100_percent_is_clamped_and_flagged():
    # 1 allocated CPU; the job's cgroup counts 12 CPU-s in 10 s (hyperthread siblings, jitter):
    # raw utilisation 12 / (10 s x 1 CPU) = 1.2 -> 1.0, flagged, raw 1.2 kept.
    # node busy 12 CPU-s too -> share 12/12 = 1.0 (not clamped); energy = 40 W x 10 s x 1.0 = 400 J
    rows = [row(0, 0.0, 0.0, [tdp(None)]), row(10, 12.0, 12.0, [tdp(40.0)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=1,
                       statics=[DeviceStatic("cpu", "cpu-tdp", "Xeon", 4, 100.0)])
    (d,) = s.devices
    assert d.mean_util == pytest.approx(1.0)
    assert Flag.UTIL_CLAMPED in d.flags
    assert d.unclamped == {"cpu_util": pytest.approx(1.2)}
    assert d.energy_j == pytest.approx(400.0)
    assert Flag.SHARE_CLAMPED not in d.flags


def test_job_cpu_above_node_busy_share_clamped_and_flagged():
    # job 11 CPU-s, node busy only 10 CPU-s (read a moment apart): share 1.1 -> 1.0;
    # 4 CPUs allocated: util 11 / (10 x 4) = 0.275 (not clamped); energy 40 W x 10 s x 1.0 = 400 J
    rows = [row(0, 0.0, 0.0, [tdp(None)]), row(10, 11.0, 10.0, [tdp(40.0)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=4)
    (d,) = s.devices
    assert d.energy_j == pytest.approx(400.0)
    assert Flag.SHARE_CLAMPED in d.flags and Flag.UTIL_CLAMPED not in d.flags
    assert d.unclamped == {"cpu_share": pytest.approx(1.1)}
    assert d.mean_util == pytest.approx(0.275)


def test_memory_share_above_one_and_gpu_util_above_100():
    ram = {"device_class": "ram", "device_id": "ram-model", "method": "tdp_estimate", "mean_power_w": 3.0}
    gpu = {"device_class": "gpu", "device_id": "GPU-1", "method": "power_integration", "power_w": 100.0, "util": 1.05}
    # job holds 10 GiB, the node reports only 8 GiB used: share 1.25 -> 1.0; RAM 3 W x 10 s = 30 J
    rows = [row(0, 0.0, 0.0, [ram, gpu], 10 * GIB, 8 * GIB), row(10, 5.0, 5.0, [ram, gpu], 10 * GIB, 8 * GIB)]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10)
    r = next(d for d in s.devices if d.device_class == "ram")
    g = next(d for d in s.devices if d.device_class == "gpu")
    assert r.energy_j == pytest.approx(30.0)
    assert r.unclamped == {"ram_share": pytest.approx(1.25)} and Flag.SHARE_CLAMPED in r.flags
    # NVML said 105 %: utilisation 1.0, flagged, raw 1.05; GPU energy 100 W x 10 s = 1000 J
    assert g.mean_util == pytest.approx(1.0) and g.unclamped == {"gpu_util": pytest.approx(1.05)}
    assert Flag.UTIL_CLAMPED in g.flags and g.energy_j == pytest.approx(1000.0)


def test_rows_past_the_epilog_start_give_coverage_at_most_one_unflagged():
    # as on the test cluster (job 134): Prolog at T0, its row 0.008 s later; the Epilog starts at
    # T0 + 25.32 s and its TERM makes the sampler's final row at T0 + 25.72 s. Measured: the rows'
    # 25.712 s; the job's span as measured: T0 .. T0 + 25.72 = 25.72 s -> coverage
    # 25.712 / 25.72 = 0.99969, no clamp (before: 25.712 / 25.32 = 1.0155, clamped, flagged).
    # GPU 50 W over the rows: 50 W x 25.712 s = 1285.6 J, all of it the job's
    gpu = {"device_class": "gpu", "device_id": "GPU-1", "method": "power_integration", "power_w": 50.0}
    rows = [row(0.008, 0.0, 0.0, [gpu]), row(10.0, 1.0, 1.0, [gpu]), row(20.0, 2.0, 2.0, [gpu]),
            row(25.72, 3.0, 3.0, [gpu])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 25.32)
    (d,) = s.devices
    assert d.coverage == pytest.approx(25.712 / 25.72) and d.coverage < 1.0
    assert "coverage" not in d.unclamped and Flag.COVERAGE_CLAMPED not in d.flags
    assert d.energy_j == pytest.approx(50.0 * 25.712)  # J
    assert d.duration_s == pytest.approx(25.32)  # the job's elapsed time stays Prolog -> Epilog


def test_rows_covering_the_span_exactly_give_coverage_one():
    # Prolog row at T0, final row at T0 + 10 s = the Epilog's start: 10 s measured of 10 s -> 1.0
    gpu = {"device_class": "gpu", "device_id": "GPU-1", "method": "power_integration", "power_w": 50.0}
    s = summarise_node([row(0, 0.0, 0.0, [gpu]), row(10, 1.0, 1.0, [gpu])], job_id="1", node="n1",
                       start_time=T0, end_time=T0 + 10)
    (d,) = s.devices
    assert d.coverage == 1.0 and Flag.COVERAGE_CLAMPED not in d.flags


def test_coverage_above_one_is_clamped_and_flagged():
    # a real anomaly: the same 10 s counted twice (a stretch merged into itself): 20 s measured
    # over a 10 s span -> coverage 2.0 -> 1.0, flagged, raw 2.0 kept
    from slurm_energy.accounting.device_agg import DeviceAgg
    from slurm_energy.model import Method

    agg = DeviceAgg("gpu", "GPU-1", {Method.POWER_INTEGRATION}, 500.0, 500.0, 10.0)
    agg.merge(DeviceAgg("gpu", "GPU-1", {Method.POWER_INTEGRATION}, 500.0, 500.0, 10.0))
    d = agg.energy(None, policy="shared", elapsed=10.0, span_known=True, node="n1", node_flags=[], span_s=10.0)
    assert d.coverage == 1.0 and d.unclamped["coverage"] == pytest.approx(2.0)
    assert Flag.COVERAGE_CLAMPED in d.flags


def test_clamp_ratio_keeps_the_most_extreme_raw_value():
    c: dict = {}
    assert attribution.clamp_ratio(1.1, "cpu_util", c) == 1.0
    assert attribution.clamp_ratio(1.3, "cpu_util", c) == 1.0
    assert attribution.clamp_ratio(1.2, "cpu_util", c) == 1.0
    assert attribution.clamp_ratio(0.5, "cpu_util", c) == 0.5
    assert c == {"cpu_util": 1.3}
    assert attribution.clamp_ratio(None, "x", c) is None


def test_node_busy_fraction_above_one_for_the_tdp_model_is_flagged():
    # node counters read a moment apart: busy 21 CPU-s of 20 total -> 1.05 -> 1.0; TDP 100 W x 1.0
    # x 10 s = 1000 J for the node; the job used all of the busy time (share 1.0 after its own clamp)
    rows = [row(0, 0.0, 0.0, [tdp(None)]), row(10, 21.0, 21.0, [tdp(None)])]
    rows[1]["node"]["cpu_total_s"] = 20.0
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=4,
                       statics=[DeviceStatic("cpu", "cpu-tdp", "Xeon", 4, 100.0)])
    (d,) = s.devices
    assert d.device_energy_j == pytest.approx(1000.0)
    assert Flag.UTIL_CLAMPED in d.flags and "node_busy_raw:1.05" in d.flags


def test_gpu_process_utilisation_above_100_percent_is_clamped_and_flagged():
    # NVML smUtil 104 % for the job's PID 1 and 52 % for another job's PID 9: 1.04 -> 1.0;
    # share = 1.0 / (1.0 + 0.52) = 0.6579; GPU 100 W x 10 s = 1000 J -> 657.9 J
    gpu = {"device_class": "gpu", "device_id": "GPU-1", "method": "power_integration", "power_w": 100.0,
           "proc_util": {"1": 1.04, "9": 0.52}}
    rows = [row(0, 0.0, 0.0, [gpu]), row(10, 1.0, 1.0, [gpu])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10)
    (d,) = s.devices
    assert d.energy_j == pytest.approx(1000.0 / 1.52)
    assert Flag.UTIL_CLAMPED in d.flags and d.unclamped["gpu_proc_util"] == pytest.approx(1.04)
    with pytest.raises(ValueError, match="proc_util"):
        attribution.gpu_process_share({1}, {1: 60.0}, {})  # a percent passed as a fraction: a unit error


def test_node_busy_fraction_a_tick_per_cpu_over_one_is_clamped_without_a_flag():
    # a saturated 4-CPU node (row()'s ncpu), 10 s: total 40.00 CPU-s, busy 40.04 (iowait stepped
    # back 4 ticks = 1 per CPU, within 2 per CPU) -> 1.001, clamped to 1.0 without a flag; the
    # job's 30 CPU-s are under 4 CPUs x 10 s (no util clamp). TDP 100 W x 1.0 x 10 s = 1000 J
    rows = [row(0, 0.0, 0.0, [tdp(None)]), row(10, 30.0, 40.04, [tdp(None)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=4,
                       statics=[DeviceStatic("cpu", "cpu-tdp", "Xeon", 4, 100.0)])
    (d,) = s.devices
    assert d.device_energy_j == pytest.approx(1000.0)
    assert Flag.UTIL_CLAMPED not in d.flags and not any(f.startswith("node_busy_raw") for f in d.flags)

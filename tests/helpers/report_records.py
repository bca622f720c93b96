"""Hand-built finalised JobRecords for the report tests (totals set by hand, arithmetic in comments)."""

from __future__ import annotations

from slurm_energy.model import CarbonFacts, DeviceEnergy, JobRecord, Method, NodeSummary

T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
ELAPSED = 3600.0  # s


def sample_record() -> JobRecord:
    """One node, 1 h: CPU by RAPL counter, RAM by TDP model, GPU not measured (None, not 0).

    CPU job share 0.2 kWh = 720_000 J; full package 0.3 kWh = 1_080_000 J.
    RAM: n=64 GB x u=0.5 x P=0.3725 W/GB x t=3600 s = 42_912 J = 0.01192 kWh.
    IT (measured classes) = 720_000 + 42_912 = 762_912 J = 0.21192 kWh.
    Facility = 0.21192 x PUE 1.5 = 0.31788 kWh.
    CO2e = 0.31788 kWh x 200 gCO2e/kWh x alpha 1.0 = 63.576 g = 0.063576 kg.
    """
    trace = [[T0 + 60 * k, 200.0 if k < 30 else 150.0, None, 11.92] for k in range(61)]
    node = NodeSummary(
        node="node001", job_id="4242", start_time=T0, end_time=T0 + ELAPSED, cpu_time_s=50_000.0,
        max_mem_bytes=32 * 2**30, n_samples=720, interval_s=5.0, cpu_time_source="cgroup-v1",
        devices=[
            DeviceEnergy(device_class="cpu", device_id="rapl:intel-rapl:0", node="node001",
                         model="Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", count=1,
                         method=Method.COUNTER, energy_j=720_000.0, device_energy_j=1_080_000.0,
                         rated_power_w=150.0, mean_util=0.7, duration_s=ELAPSED, coverage=1.0,
                         wraps=1, covers="package-0, job share by CPU time"),
            DeviceEnergy(device_class="ram", device_id="ram", node="node001", count=64,
                         method=Method.TDP_ESTIMATE, energy_j=42_912.0, device_energy_j=42_912.0,
                         rated_power_w=0.3725, mean_util=0.5, duration_s=ELAPSED, coverage=0.95,
                         dropped_samples=3, flags=["no_dram_zone"]),
            DeviceEnergy(device_class="gpu", device_id="GPU-0000", node="node001",
                         model="NVIDIA A100-SXM4-40GB", count=1, method=Method.UNAVAILABLE,
                         energy_j=None, device_energy_j=None, rated_power_w=400.0, coverage=0.0,
                         flags=["nvml_error:NVML_ERROR_GPU_IS_LOST"]),
        ],
        static={"cpu_model": "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "cpu_cores": 40,
                "gpu_models": ["NVIDIA A100-SXM4-40GB"], "ram_total_bytes": 192 * 2**30,
                "os": "Debian GNU/Linux 12 (bookworm)", "python": "3.11.2", "host": "node001", "pid": 4711,
                "devices": [{"device_class": "gpu", "device_id": "GPU-0000", "model": "NVIDIA A100-SXM4-40GB",
                             "count": 1, "rated_power_w": 400.0, "rated_power_source": "NVML enforced limit",
                             "extra": {"memory_bytes": 40 * 2**30}}]},
        power_trace=trace,
    )
    return JobRecord(
        cluster="testc", job_id="4242", job_name="train <b>model</b>", user="alice", uid=1000, gid=1000,
        account="physics", partition="gpu", work_dir="/home/alice/run", exit_code="0:0",
        expected_nodes=["node001"], start_time=T0, end_time=T0 + ELAPSED, nodes=[node],
        carbon=CarbonFacts(pue=1.5, pue_source="site config: measured 2024", ci_g_per_kwh=200.0,
                           ci_source="table: OWID GB", ci_basis="lifecycle", ci_year=2024,
                           alpha=1.0, alpha_source="site config"),
        energy_it_j={"cpu": 720_000.0, "gpu": None, "ram": 42_912.0},
        device_energy_j={"cpu": 1_080_000.0, "gpu": None, "ram": 42_912.0},
        methods={"cpu": Method.COUNTER, "gpu": Method.UNAVAILABLE, "ram": Method.TDP_ESTIMATE},
        it_kwh=762_912.0 / 3.6e6, facility_kwh=762_912.0 / 3.6e6 * 1.5,
        co2e_kg=762_912.0 / 3.6e6 * 1.5 * 200.0 / 1000.0,
        coverage_complete=False,
    )


def tdp_cpu_record(*, count: int = 2, rated_w: float = 24.0, util: float = 0.984, elapsed: float = 42.0,
                   energy_j: float = 492.84, coverage: float = 1.0, cpu_time_s=None,
                   defaults: bool = False) -> JobRecord:
    """One node, CPU by the TDP model only (the new user's job, by default).

    Default numbers are the user's report: 2 cores, rated power 24 W for both cores, job utilisation
    of its allocated CPUs 0.984, 42 s, job share by CPU time 0.0001369 kWh = 0.0001369 x 3.6e6 J =
    492.84 J. The naive 2 x 0.984 x 24 W x 42 s = 1983.7 J does NOT equal it.
    IT = 492.84 J = 1.369e-4 kWh; facility and CO2e filled with PUE 1.58 / CI 475 when
    ``defaults`` (the shipped defaults, listed in ``defaults_used``), else PUE 1.2 / CI 100 (site).
    """
    node = NodeSummary(
        node="cn01", job_id="77", start_time=T0, end_time=T0 + elapsed, cpu_time_s=cpu_time_s,
        cpu_time_source="cgroup-v1" if cpu_time_s is not None else "",
        devices=[DeviceEnergy(device_class="cpu", device_id="cpu-tdp", node="cn01", model="AMD EPYC",
                              count=count, method=Method.TDP_ESTIMATE, energy_j=energy_j,
                              device_energy_j=energy_j * 1.2, rated_power_w=rated_w, mean_util=util,
                              duration_s=elapsed, coverage=coverage)],
    )
    if defaults:
        carbon = CarbonFacts(defaults_used=["pue", "alpha", "ci"])  # 1.58, 475 gCO2e/kWh, alpha 1
    else:
        carbon = CarbonFacts(pue=1.2, pue_source="site config: pue", ci_g_per_kwh=100.0,
                             ci_source="site config", alpha=1.0, alpha_source="site config")
    it_kwh = energy_j / 3.6e6
    fac = it_kwh * carbon.pue
    return JobRecord(
        job_id="77", user="bob", start_time=T0, end_time=T0 + elapsed, nodes=[node], expected_nodes=["cn01"],
        carbon=carbon, energy_it_j={"cpu": energy_j}, device_energy_j={"cpu": energy_j * 1.2},
        methods={"cpu": Method.TDP_ESTIMATE}, it_kwh=it_kwh, facility_kwh=fac,
        co2e_kg=fac * carbon.ci_g_per_kwh * carbon.alpha / 1000.0, coverage_complete=coverage >= 0.95,
    )

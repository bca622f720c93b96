"""Sample rows -> NodeSummary: integration, attribution to the job, coverage, hourly split."""

import pytest

from slurm_energy.accounting.running import RunningSummary
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.core import DeviceStatic
from slurm_energy.model import Method
from slurm_energy.sampling.readers.base import DeviceStatic
from slurm_energy.sampling.samplefile import SampleWriter, read_sample_table

GIB = 1024 ** 3
T0 = 1_796_034_000.0  # 2026-11-30T10:20:00Z (1_796_036_400 is 11:00:00Z)


def row(t, job_cpu, node_busy, node_total, readings, job_mem=None, node_mem=None, kind="sample"):
    return {"t": T0 + t, "kind": kind,
            "job": None if job_cpu is None else {"cpu_time_s": job_cpu, "mem_bytes": job_mem, "pids": [1], "source": "cgroup-v1"},
            "node": {"cpu_busy_s": node_busy, "cpu_total_s": node_total, "ncpu": 2, "mem_used_bytes": node_mem,
                     "mem_total_bytes": 16 * GIB},
            "readings": readings}


def tdp(p):
    return {"device_class": "cpu", "device_id": "cpu-tdp", "method": "tdp_estimate", "mean_power_w": p}


def ram(p):
    return {"device_class": "ram", "device_id": "ram-model", "method": "tdp_estimate", "mean_power_w": p}


def test_tdp_model_job_share_by_cpu_time():
    # node: 2 CPUs, half busy (10 busy-s per 20 CPU-s per 10 s) -> TDP 100 W x 0.5 = 50 W modelled
    # job: 5 CPU-s per 10 s = half of the node's busy time
    rows = [row(0, 0.0, 0, 0, [tdp(None)]),
            row(10, 5.0, 10, 20, [tdp(50.0)]),
            row(20, 10.0, 20, 40, [tdp(50.0)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 20, cpus_alloc=1,
                       statics=[DeviceStatic("cpu", "cpu-tdp", "Xeon", 2, 100.0)])
    (d,) = s.devices
    # device: 50 W x 10 s x 2 intervals = 1000 J; job: x 0.5 = 500 J (= 100 W / 2 CPUs x 10 CPU-s)
    assert d.device_energy_j == pytest.approx(1000.0)
    assert d.energy_j == pytest.approx(500.0)
    assert d.method == Method.TDP_ESTIMATE
    assert d.coverage == pytest.approx(1.0)
    assert d.mean_power_w == pytest.approx(25.0)  # 500 J / 20 s
    assert d.mean_util == pytest.approx(0.5)  # 5 CPU-s / (10 s x 1 allocated CPU)
    assert s.cpu_time_s == 10.0 and s.cpu_time_source == "cgroup-v1"
    assert d.rated_power_w == 100.0 and d.model == "Xeon"


def test_ram_model_share_by_memory():
    # node uses 8 GiB at 0.3725 W/GB -> 2.98 W; job holds 2 GiB -> share 0.25 -> 0.745 W x 20 s = 14.9 J
    p = 0.3725 * 8
    rows = [row(0, 0.0, 0, 0, [ram(p)], 2 * GIB, 8 * GIB),
            row(10, 1.0, 1, 20, [ram(p)], 2 * GIB, 8 * GIB),
            row(20, 2.0, 2, 40, [ram(p)], 2 * GIB, 8 * GIB)]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 20)
    (d,) = s.devices
    assert d.device_energy_j == pytest.approx(p * 20)
    assert d.energy_j == pytest.approx(14.9)


def test_rapl_counter_with_wrap_attributed():
    # package counter wraps at 1000 J: 900 J -> 100 J is +200 J; then +300 J. Job share 0.5 then 0.25.
    rng = 1_000_000_000
    pkg = lambda e: {"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter", "energy_uj": e,
                     "max_energy_range_uj": rng, "max_power_w": 200.0}
    rows = [row(0, 0.0, 0, 0, [pkg(900_000_000)]),
            row(10, 5.0, 10, 20, [pkg(100_000_000)]),
            row(20, 7.5, 20, 40, [pkg(400_000_000)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 20)
    (d,) = s.devices
    assert d.device_energy_j == pytest.approx(500.0)  # 200 + 300 J
    assert d.energy_j == pytest.approx(200 * 0.5 + 300 * 0.25)  # 175 J
    assert d.wraps == 1 and d.method == Method.COUNTER


def test_two_jobs_on_a_node_never_sum_to_more_than_the_node():
    pkg = lambda e: {"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter", "energy_uj": e,
                     "max_energy_range_uj": 10 ** 12}
    node_rows = [(0, 0, 0, 0), (10, 10, 20, 1_000_000_000), (20, 20, 40, 2_000_000_000)]
    jobs = {"A": [0.0, 6.0, 12.0], "B": [0.0, 4.0, 8.0]}  # A + B = all of the node's busy time
    total = 0.0
    for jid, cpu in jobs.items():
        rows = [row(t, c, b, tot, [pkg(e)]) for (t, b, tot, e), c in zip(node_rows, cpu)]
        s = summarise_node(rows, job_id=jid, node="n1", start_time=T0, end_time=T0 + 20)
        total += s.devices[0].energy_j
        assert s.devices[0].device_energy_j == pytest.approx(2000.0)
    # A: 2000 J x 0.6 = 1200 J; B: 2000 J x 0.4 = 800 J; together exactly the node's 2000 J
    assert total == pytest.approx(2000.0)


def test_exclusive_whole_node_policy_charges_idle_too():
    rows = [row(0, 0.0, 0, 0, [tdp(None)]), row(10, 1.0, 2, 20, [tdp(10.0)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=2,
                       policy="exclusive_whole_node")
    assert s.devices[0].energy_j == pytest.approx(100.0)  # 10 W x 10 s, share 1: holds both CPUs
    # a job holding 1 of the 2 CPUs is not exclusive: shared by CPU time, 100 J x 1/2 = 50 J
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=1,
                       policy="exclusive_whole_node")
    assert s.devices[0].energy_j == pytest.approx(50.0)
    assert "not_exclusive:shared_policy_used" in s.devices[0].flags


def test_unavailable_gpu_is_none_not_zero():
    gpu = {"device_class": "gpu", "device_id": "gpu-index-0", "method": "unavailable", "flags": ["gpu_not_resolved"]}
    rows = [row(0, 0.0, 0, 0, [gpu]), row(10, 1.0, 2, 20, [gpu])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10)
    (d,) = s.devices
    assert d.energy_j is None and d.method == Method.UNAVAILABLE and d.coverage == 0.0
    assert "gpu_not_resolved" in d.flags


def test_zero_length_job_is_zero_without_division_by_zero():
    s = summarise_node([row(0, 0.0, 0, 0, [tdp(None)])], job_id="1", node="n1", start_time=T0, end_time=T0)
    (d,) = s.devices
    assert d.energy_j == 0.0 and d.method == Method.TDP_ESTIMATE and d.coverage == 1.0


def test_cgroup_not_yet_there_counts_as_zero_then_carries_last_value():
    # the first row (Prolog time) has no job usage; after the cgroup is gone the last value holds
    rows = [row(0, None, 0, 0, [tdp(None)]), row(10, 4.0, 8, 20, [tdp(40.0)]),
            {**row(20, None, 8, 40, [tdp(0.0)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 20)
    d = s.devices[0]
    # interval 1: 40 W x 10 s = 400 J x (4 / 8) = 200 J; interval 2: 0 W -> 0 J (node idle)
    assert d.energy_j == pytest.approx(200.0)
    assert s.cpu_time_s == 4.0


def test_hourly_split_across_the_hour_boundary():
    # T0 = 10:20; a 3600 s interval of 36 W = 129600 J: 40 min in hour 10, 20 min in hour 11
    rows = [row(0, 0.0, 0, 0, [tdp(None)]), row(3600, 3600.0, 3600, 7200, [tdp(36.0)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 3600)
    assert s.hourly_energy_j == pytest.approx({"2026-11-30T10:00:00Z": 129600 * 2 / 3,
                                               "2026-11-30T11:00:00Z": 129600 / 3})


def test_utilisation_weighted_policy_uses_rated_power():
    # rated 100 W for 2 CPUs, job allocated 1 CPU -> P = 50 W; u = 5 CPU-s / (10 s x 1) = 0.5 -> 250 J
    rows = [row(0, 0.0, 0, 0, [tdp(None)]), row(10, 5.0, 10, 20, [tdp(50.0)])]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 10, cpus_alloc=1,
                       policy="utilisation_weighted", statics=[DeviceStatic("cpu", "cpu-tdp", "X", 2, 100.0)])
    assert s.devices[0].energy_j == pytest.approx(250.0)


def test_unknown_policy_names_field():
    with pytest.raises(ValueError, match="attribution.policy"):
        summarise_node([], job_id="1", node="n1", start_time=0, end_time=0, policy="fair")


def test_sampler_killed_mid_job_tail_estimated_from_last_observed_share():
    # samples at 0 and 10 s, then the sampler died; the Epilog read the counters at 60 s; nothing
    # knows the job's true CPU time: the 50 s stretch gets the last observed share, 5 / 10 = 0.5
    rows = [row(0, 0.0, 0, 0, [tdp(None), ram(1.0)], 1 * GIB, 4 * GIB),
            row(10, 5.0, 10, 20, [tdp(50.0), ram(1.0)], 1 * GIB, 4 * GIB),
            {**row(60, None, 60, 120, [tdp(50.0), ram(1.0)], None, 4 * GIB), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 60)
    cpu = next(d for d in s.devices if d.device_class == "cpu")
    ram_ = next(d for d in s.devices if d.device_class == "ram")
    # 50 W x 10 s x 0.5 = 250 J observed + 50 W x 50 s x 0.5 = 1250 J estimated
    assert cpu.energy_j == pytest.approx(1500.0)
    assert cpu.coverage == pytest.approx(1.0)  # the stretch is charged (labelled), not dropped
    assert "tail_estimated" in cpu.flags and "share_unknown" not in cpu.flags
    assert ram_.coverage == pytest.approx(10 / 60)  # memory in the gap is still unknown
    assert "tail_estimated" not in ram_.flags


def test_sampler_killed_tail_charged_from_slurm_totalcpu():
    # 0-10 s observed: device 10 W x 10 s = 100 J, job 2 CPU-s of 5 busy -> 40 J.
    # 10-20 s unobserved (sampler killed): 100 J of package energy, node busy 15 - 5 = 10 CPU-s;
    # sacct TotalCPU 6 s -> 6 - 2 = 4 CPU-s beyond the observed -> 100 J x 4 / 10 = 40 J
    rows = [row(0, 0.0, 0, 0, [tdp(10.0)]),
            row(10, 2.0, 5, 20, [tdp(10.0)]),
            {**row(20, None, 15, 40, [tdp(10.0)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 20, job_cpu_total_s=6.0)
    (d,) = s.devices
    assert d.device_energy_j == pytest.approx(200.0)
    assert d.energy_j == pytest.approx(40.0 + 40.0)
    assert d.coverage == pytest.approx(1.0)
    assert "tail_from_slurm_totalcpu" in d.flags and "tail_estimated" not in d.flags
    assert "share_unknown" not in d.flags


def test_job_never_observed_gets_its_totalcpu_share_not_zero():
    # a job shorter than a poll: only the Prolog's and the Epilog's rows; 50 W x 2 s = 100 J on the
    # node, busy 14 - 10 = 4 CPU-s; sacct TotalCPU 1 s -> 100 J x 1 / 4 = 25 J
    rows = [{**row(0, None, 10.0, 100.0, [tdp(50.0)]), "kind": "prolog"},
            {**row(2, None, 14.0, 104.0, [tdp(50.0)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 2, job_cpu_total_s=1.0)
    (d,) = s.devices
    assert d.energy_j == pytest.approx(25.0)
    assert "tail_from_slurm_totalcpu" in d.flags


def test_job_never_observed_without_totalcpu_estimated_by_allocated_cpus():
    # same node stretch, nothing knows the job's CPU time: 1 allocated CPU of 2 -> 100 J x 0.5 = 50 J
    rows = [{**row(0, None, 10.0, 100.0, [tdp(50.0)]), "kind": "prolog"},
            {**row(2, None, 14.0, 104.0, [tdp(50.0)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 2, cpus_alloc=1)
    (d,) = s.devices
    assert d.energy_j == pytest.approx(50.0)
    assert "tail_estimated" in d.flags and d.method == Method.TDP_ESTIMATE


def test_tail_without_any_basis_stays_unknown_never_zero():
    # never observed, no TotalCPU, no allocation known: the stretch stays unmeasured (None), flagged
    rows = [{**row(0, None, 10.0, 100.0, [tdp(50.0)]), "kind": "prolog"},
            {**row(2, None, 14.0, 104.0, [tdp(50.0)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 2)
    (d,) = s.devices
    assert d.energy_j is None and "share_unknown" in d.flags


def test_exclusive_policy_is_not_touched_by_the_tail_fill():
    rows = [row(0, 0.0, 0, 0, [tdp(10.0)]),
            row(10, 2.0, 5, 20, [tdp(10.0)]),
            {**row(20, None, 15, 40, [tdp(10.0)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 20, cpus_alloc=2,
                       policy="exclusive_whole_node", job_cpu_total_s=6.0)
    (d,) = s.devices
    assert d.energy_j == pytest.approx(200.0)  # the whole node, share 1 throughout
    assert "tail_from_slurm_totalcpu" not in d.flags


def test_job_shorter_than_one_interval_measured_between_prolog_and_epilog_rows():
    # only the Prolog's and the Epilog's readings exist (each a reader's first read: no mean power);
    # the node was 30 % busy over 2 CPUs x 1 s -> TDP 100 W x 0.3 = 30 W for 1 s = 30 J on the device
    rows = [{**row(0, None, 10.0, 100.0, [tdp(None)]), "kind": "prolog"},
            {**row(1, 0.6, 10.6, 102.0, [tdp(None)]), "kind": "final"},
            {**row(1.5, None, 10.6, 103.0, [tdp(None)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 1.5,
                       statics=[DeviceStatic("cpu", "cpu-tdp", "X", 2, 100.0)])
    (d,) = s.devices
    # interval 1: 100 W x (0.6 / 2.0) x 1 s = 30 J, job share 0.6 / 0.6 = 1 -> 30 J
    # interval 2: node idle (busy delta 0) -> 0 J
    assert d.device_energy_j == pytest.approx(30.0)
    assert d.energy_j == pytest.approx(30.0)
    assert d.coverage == pytest.approx(1.0)
    assert "util_from_node_counters" in d.flags


def test_job_never_observed_is_unmeasured_not_zero():
    # a `true` job: gone before the sampler's first poll; only node counters and readings exist
    rows = [{**row(0, None, 10.0, 100.0, [tdp(None)]), "kind": "prolog"},
            {**row(0.4, None, 10.2, 100.8, [tdp(None)]), "kind": "epilog"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 0.4,
                       statics=[DeviceStatic("cpu", "cpu-tdp", "X", 2, 100.0)])
    (d,) = s.devices
    assert d.energy_j is None and d.method == Method.UNAVAILABLE and d.coverage == 0.0
    assert d.device_energy_j == pytest.approx(100.0 * 0.2 / 0.8 * 0.4)  # the node's part is still known: 10 J
    assert "job_never_observed" in d.flags
    assert s.cpu_time_s is None


def test_cgroup_read_at_zero_ns_is_a_reading_not_never_observed():
    # the job's cgroup read 0 ns at every look (an idle job): zero is a measurement, so the job is
    # observed, uses none of the package (0 J), and gets no fallback share (no job_never_observed)
    rows = [row(0, 0.0, 0, 0, [tdp(None)]), {**row(1, 0.0, 1, 2, [tdp(50.0)]), "kind": "cgroup_gone"},
            {**row(1.2, 0.0, 1, 2.4, [tdp(50.0)]), "kind": "final"}]
    s = summarise_node(rows, job_id="1", node="n1", start_time=T0, end_time=T0 + 1.2)
    d = s.devices[0]
    assert d.energy_j == 0.0 and d.method == Method.TDP_ESTIMATE
    assert "job_never_observed" not in d.flags and "tail_estimated" not in d.flags
    assert s.cpu_time_s == 0.0


# --------------------------------------------------------------------------------------------------
# An idle job on a node loaded by other processes (the Slurm path, from a sample file): its CPU time
# reads 0 at every look, which is a measurement, so it gets none of the package's energy; it is not
# "never observed" and gets no allocated/node CPUs fallback share.

MIB = 2 ** 20
RAPL_RANGE_UJ = 262_143_328_850
STATICS = [DeviceStatic("cpu", "intel-rapl:0", "package-0", 1, 24.0)]


def _rows(job_cpu_s=0.0):
    """A 30 s job on a 2-CPU node: the Prolog's row, a sample every 5 s, the cgroup's end, the
    final row. Other processes keep both CPUs busy (busy += 2 CPU-s per s of 2 CPU-s per s) and the
    package draws 24 W (RAPL counter += 120 J per 5 s); the job's cgroup reads ``job_cpu_s`` CPU-s."""
    out = []
    for k, kind in enumerate(["prolog"] + ["sample"] * 5 + ["cgroup_gone", "final"]):
        t = min(5.0 * k, 30.0)
        out.append({"t": T0 + t, "kind": kind,
                    "job": {"cpu_time_s": job_cpu_s, "mem_bytes": 8 * MIB, "pids": [4242], "source": "cgroup-v2"},
                    "node": {"cpu_busy_s": 1000.0 + 2 * t, "cpu_total_s": 5000.0 + 2 * t, "ncpu": 2,
                             "mem_used_bytes": 4096 * MIB, "mem_total_bytes": 8192 * MIB},
                    "readings": [{"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter",
                                  "energy_uj": int(7e9 + 24.0 * t * 1e6), "max_energy_range_uj": RAPL_RANGE_UJ}]})
    return out


def _file(tmp_path, rows):
    p = tmp_path / "samples"
    w = SampleWriter(str(p), fsync=False)
    for r in rows:
        w.write(r)
    w.close()
    return str(p)


def test_idle_job_on_a_busy_node_gets_zero_cpu_energy_from_the_sample_file(tmp_path):
    path = _file(tmp_path, _rows())
    s = summarise_node(read_sample_table(path), job_id="7", node="n1", start_time=T0, end_time=T0 + 30,
                       statics=STATICS, cpus_alloc=1)
    (d,) = s.devices
    # the package: 24 W x 30 s = 720 J; the job's share: 0 CPU-s / 60 busy CPU-s = 0 -> 0 J (the old
    # rule read 0 as "not started", flagged job_never_observed and charged 1 of 2 CPUs: 360 J)
    assert d.device_energy_j == pytest.approx(720.0)
    assert d.energy_j == 0.0
    assert d.method == Method.COUNTER and d.coverage == pytest.approx(1.0)
    assert not {"job_never_observed", "tail_estimated", "share_unknown"} & set(d.flags)
    assert s.cpu_time_s == 0.0


def test_idle_job_interim_summary_agrees(tmp_path):
    rows = _rows()
    path = _file(tmp_path, rows[:4])  # the first three samples: an interim record while it runs
    run = RunningSummary(path)
    run.update(statics=STATICS, cpus_alloc=1)
    s = run.summary(job_id="7", node="n1", start_time=T0, end_time=T0 + 15, statics=STATICS, cpus_alloc=1)
    (d,) = s.devices
    assert d.device_energy_j == pytest.approx(24.0 * 15)  # 360 J of the package so far
    assert d.energy_j == 0.0 and "job_never_observed" not in d.flags


def test_a_job_that_used_cpu_on_the_same_busy_node_is_charged_its_share(tmp_path):
    # the control: the same node, the job's cgroup at 3 CPU-s after the first 5 s and no more:
    # share 3 / 10 busy CPU-s of the first interval -> 120 J x 0.3 = 36 J
    rows = _rows()
    for r in rows[1:]:
        r["job"]["cpu_time_s"] = 3.0
    s = summarise_node(read_sample_table(_file(tmp_path, rows)), job_id="7", node="n1", start_time=T0,
                       end_time=T0 + 30, statics=STATICS, cpus_alloc=1)
    assert s.devices[0].energy_j == pytest.approx(36.0)

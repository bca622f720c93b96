"""An idle job on a node loaded by other processes (the Slurm path, from a sample file): its CPU time
reads 0 at every look, which is a measurement, so it gets none of the package's energy; it is not
"never observed" and gets no allocated/node CPUs fallback share."""

import pytest

from slurm_energy.accounting.running import RunningSummary
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.core import DeviceStatic
from slurm_energy.model import Method
from slurm_energy.sampling.samplefile import SampleWriter, read_sample_table

T0 = 1_796_034_000.0  # 2026-11-30T10:20:00Z
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

"""Interim summaries: added update by update, each reading only the rows added since the previous
one, they give the whole file's summary (to float rounding), labels included."""

import os

import pytest

from slurm_energy.accounting.running import RunningSummary
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.core import DeviceStatic, Status
from slurm_energy.model import Method
from slurm_energy.sampling.samplefile import SampleWriter, read_sample_table
from tests.helpers.samplefile_rows import legacy_write, node_rows, static_inventory

STATICS = [DeviceStatic(**d) for d in static_inventory()["devices"]]


def _kw(rows, end=None):
    return {"job_id": "1", "node": "n1", "start_time": rows[0]["t"], "end_time": rows[-1]["t"] if end is None else end,
            "statics": STATICS, "cpus_alloc": 64}


def _interim(run, rows, end=None):
    """The sampler's interim flush: the new rows summed, then the summary so far."""
    run.update(statics=STATICS, cpus_alloc=64)
    return run.summary(**_kw(rows, end))


def _same(run, full):
    assert [d.device_id for d in run.devices] == [d.device_id for d in full.devices]
    for a, b in zip(run.devices, full.devices):
        assert a.energy_j == pytest.approx(b.energy_j, rel=1e-12), a.device_id
        assert a.device_energy_j == pytest.approx(b.device_energy_j, rel=1e-12)
        assert (a.method, a.flags, a.wraps) == (b.method, b.flags, b.wraps)
        assert a.coverage == pytest.approx(b.coverage, rel=1e-12)
        assert a.mean_power_w == pytest.approx(b.mean_power_w, rel=1e-9)
        assert a.var_power_w2 == pytest.approx(b.var_power_w2, rel=1e-6)
        assert a.mean_util == pytest.approx(b.mean_util, rel=1e-9)
    assert run.hourly_energy_j == pytest.approx(full.hourly_energy_j, rel=1e-12)
    assert (run.n_samples, run.cpu_time_s, run.max_mem_bytes) == (full.n_samples, full.cpu_time_s, full.max_mem_bytes)
    assert run.mean_mem_bytes == pytest.approx(full.mean_mem_bytes, rel=1e-12)


def test_updates_minute_by_minute_add_up_to_the_whole_file(tmp_path):
    rows, _ = node_rows(2 * 720 + 1)  # 2 h: RAPL wraps, hours crossed
    p = tmp_path / "samples"
    w = SampleWriter(str(p), fsync=False)
    run = RunningSummary(str(p))
    for k in range(0, len(rows), 12):
        for r in rows[k:k + 12]:
            w.write(r)
        s = _interim(run, rows[:k + 12])
        assert run._reader.offset == os.path.getsize(p)  # read up to the end, once
    w.close()
    assert s.status == Status.RUNNING and s.power_trace == [] and s.windows == []
    _same(s, summarise_node(read_sample_table(str(p)), **_kw(rows)))
    rapl = s.devices[0]
    assert rapl.wraps > 0 and rapl.method == Method.COUNTER and rapl.coverage == pytest.approx(1.0)


def test_a_job_seen_only_from_its_third_row_is_charged_from_its_start(tmp_path):
    rows, _ = node_rows(40)
    for r in rows[:3]:
        r["job"]["cpu_time_s"] = 0.0  # the cgroup at 0 CPU-s: the job not started yet (0 J, measured)
    p = tmp_path / "samples"
    w = SampleWriter(str(p), fsync=False)
    run = RunningSummary(str(p))
    for k in range(0, len(rows), 2):
        for r in rows[k:k + 2]:
            w.write(r)
        s = _interim(run, rows[:k + 2])
    _same(s, summarise_node(read_sample_table(str(p)), **_kw(rows)))


def test_a_row_out_of_time_order_starts_the_sums_again_from_the_file(tmp_path):
    rows, _ = node_rows(30)
    p = tmp_path / "samples"
    legacy_write(str(p), rows[:10])  # an old-format file: read the same way
    run = RunningSummary(str(p))
    _interim(run, rows[:10])
    late = dict(rows[20], t=rows[9]["t"] - 2.5, kind="epilog", job=None)  # another writer's row, late
    legacy_write(str(p), [late] + rows[10:], mode="a")
    s = _interim(run, rows)
    _same(s, summarise_node(read_sample_table(str(p)), **_kw(rows)))
    assert s.n_samples == 31

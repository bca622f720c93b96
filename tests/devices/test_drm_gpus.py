"""AMD (amdgpu) and Intel (xe, i915) GPUs: discovery, Slurm allocation -> physical card, hwmon
readings, and the job's energy through the node summary -- on fake sysfs trees in the drivers'
real layouts (tests/fakes/drm.py). Values computed by hand below."""

import pytest

from slurm_energy.accounting.summary import summarise_node
from slurm_energy.devices.drm import discover_drm_gpus
from slurm_energy.devices.gpu import GpuResolveError
from slurm_energy.devices.gpu.drm import resolve_drm_gpus
from slurm_energy.model import Method
from slurm_energy.sampling.readers import drm_hwmon
from slurm_energy.sampling.readers.drm_hwmon import DrmHwmonReader
from tests.fakes.drm import FakeSysfs, put

T0 = 1_796_034_000.0
MI300X, MI250X, MAX1550, FLEX170 = "1002:74a1", "1002:7408", "8086:0bd5", "8086:56c0"


@pytest.fixture
def sysfs(tmp_path):
    return FakeSysfs(tmp_path / "sys")


def _resolve(fs, **kw):
    return resolve_drm_gpus(drm_root=str(fs.drm_root), kfd_root=str(fs.kfd_root), **kw)


def _reader(fs, gpus, **kw):
    return DrmHwmonReader(list(gpus), str(fs.drm_root), str(fs.kfd_root), **kw)


def _rows(samples):
    """[(t, [Reading])] -> sample rows (the job's CPU/memory do not matter for a GPU)."""
    return [{"t": T0 + t, "kind": "sample", "job": {"cpu_time_s": t, "mem_bytes": 1, "pids": [1]},
             "node": {"cpu_busy_s": 2 * t, "cpu_total_s": 4 * t, "ncpu": 4, "mem_used_bytes": 2},
             "readings": [r.to_dict() for r in rs]} for t, rs in samples]


def _summary(rows, statics=()):
    return summarise_node(rows, job_id="7", node="n1", start_time=rows[0]["t"], end_time=rows[-1]["t"],
                          statics=list(statics))


def test_discovery_names_amd_and_intel_cards_and_skips_others(sysfs):
    sysfs.other("0000:02:00.0", "1a03:2000", card=0)  # the BMC's ASPEED VGA
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=1, render=128, hwmon={"power1_average": 1},
              extra={"unique_id": "6a5e3c21b04d11e2", "current_compute_partition": "SPX"})
    sysfs.gpu("0000:8a:00.0", MAX1550, "i915", card=2, render=129, hwmon={"energy1_input": 0}, tiles=2)
    gpus = discover_drm_gpus(str(sysfs.drm_root), str(sysfs.kfd_root))
    assert [(g.pci_bus_id, g.vendor, g.driver, g.model) for g in gpus] == [
        ("0000:8a:00.0", "intel", "i915", "Intel Data Center GPU Max 1550"),
        ("0000:c1:00.0", "amd", "amdgpu", "AMD Instinct MI300X"),
    ]
    assert gpus[0].n_tiles == 2 and gpus[0].render_minors == [129]
    assert gpus[1].partition_mode == "SPX" and gpus[1].n_partitions == 1 and gpus[1].unique_id == "6a5e3c21b04d11e2"


def test_missing_root_is_no_gpu(tmp_path):
    assert discover_drm_gpus(str(tmp_path / "nope"), str(tmp_path / "nope2")) == []
    res = resolve_drm_gpus("0", drm_root=str(tmp_path / "nope"), kfd_root=str(tmp_path / "nope"))
    assert list(res) == [] and "no AMD/Intel GPU" in res.reason


def test_intel_xe_counter_card_channel_and_energy_by_hand(sysfs):
    # xe labels its channels: energy1 = card, energy2 = pkg; the card channel covers the board
    hw = sysfs.gpu("0000:8a:00.0", MAX1550, "xe", card=0, render=128, tiles=2,
                   hwmon={"energy1_input": 5_000_000, "energy1_label": "card", "energy2_input": 4_000_000,
                          "energy2_label": "pkg", "power1_rated_max": 600_000_000})
    (g,) = _resolve(sysfs, slurm_job_gpus="0")
    assert (g.device_id, g.fraction, g.source) == ("0000:8a:00.0", None, "SLURM_JOB_GPUS=0")
    r = _reader(sysfs, [g])
    (st,) = r.devices()
    assert (st.rated_power_w, st.rated_power_source) == (600.0, "hwmon power1_rated_max")
    samples = []
    for t, uj in ((0, 5_000_000), (5, 5_000_000 + 5 * 450 * 10**6), (10, 5_000_000 + 5 * 450 * 10**6 + 5 * 550 * 10**6)):
        put(hw / "energy1_input", uj)
        put(hw / "energy2_input", 1)  # the pkg channel must not be the one read
        (rd,) = r.read()
        assert rd.method == "counter" and rd.max_energy_range_uj is None
        samples.append((t, [rd]))
    (d,) = _summary(_rows(samples), r.devices()).devices
    # 450 W x 5 s + 550 W x 5 s = 5000 J, all the job's (whole card allocated)
    assert d.method == Method.COUNTER and d.energy_j == pytest.approx(5000.0) and d.coverage == 1.0
    assert d.device_id == "0000:8a:00.0" and d.model == "Intel Data Center GPU Max 1550"


def test_i915_counter_reset_on_driver_reload_is_dropped_not_negative(sysfs):
    # i915/xe keep a 64-bit accumulator (one register wrap between reads is accounted for by the
    # driver), so the value never wraps; after a driver reload it restarts from 0
    hw = sysfs.gpu("0000:8a:00.0", FLEX170, "i915", card=0, render=128, hwmon={"energy1_input": 0})
    r = _reader(sysfs, _resolve(sysfs, slurm_job_gpus="0"))
    samples = []
    for t, uj in ((0, 900_000_000), (5, 900_000_000 + 5 * 100 * 10**6), (10, 2_000_000), (15, 2_000_000 + 5 * 120 * 10**6)):
        put(hw / "energy1_input", uj)
        samples.append((t, r.read()))
    (d,) = _summary(_rows(samples)).devices
    # 100 W x 5 s + (reset: dropped) + 120 W x 5 s = 1100 J over 10 of 15 s
    assert d.energy_j == pytest.approx(1100.0) and d.resets == 1 and d.coverage == pytest.approx(10 / 15)


def test_amd_power_only_card_integrates_power1_average(sysfs):
    hw = sysfs.gpu("0000:c1:00.0", MI250X, "amdgpu", card=0, render=128,
                   hwmon={"power1_average": 0, "power1_cap": 500_000_000},
                   extra={"gpu_busy_percent": 80, "mem_info_vram_used": 2 * 1024**3})
    r = _reader(sysfs, _resolve(sysfs, slurm_job_gpus="0"))
    samples = []
    for t, uw in ((0, 300_000_000), (10, 500_000_000), (20, 500_000_000)):
        put(hw / "power1_average", uw)
        samples.append((t, r.read()))
    rd = samples[0][1][0]
    assert (rd.method, rd.power_w, rd.util, rd.mem_bytes) == ("power_integration", 300.0, 0.8, 2 * 1024**3)
    (d,) = _summary(_rows(samples), r.devices()).devices
    # trapezoids: (300 + 500) / 2 x 10 s + 500 x 10 s = 4000 + 5000 = 9000 J
    assert d.method == Method.POWER_INTEGRATION and d.energy_j == pytest.approx(9000.0)
    assert d.rated_power_w == 500.0 and d.model == "AMD Instinct MI250X"


def test_no_energy_or_power_file_is_unavailable_never_zero_or_labelled_fallback(sysfs):
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, hwmon={"temp1_input": 40000},
              extra={"gpu_busy_percent": 50})
    g = _resolve(sysfs, slurm_job_gpus="0")
    (rd,) = _reader(sysfs, g).read()
    assert rd.method == "unavailable" and rd.energy_uj is None and rd.power_w is None
    assert "no_energy_or_power" in rd.flags
    (rd,) = _reader(sysfs, g, fallback_w=750.0).read()
    # site fallback 750 W x gpu_busy_percent 50 % = 375 W, labelled
    assert (rd.method, rd.mean_power_w) == ("tdp_estimate", 375.0) and "gpu_fallback_w" in rd.flags


def test_unreadable_counter_is_labelled_unavailable(sysfs, monkeypatch):
    sysfs.gpu("0000:8a:00.0", MAX1550, "xe", card=0, render=128, hwmon={"energy1_input": 7})
    r = _reader(sysfs, _resolve(sysfs, slurm_job_gpus="0"))
    real = drm_hwmon._read_int

    def eacces(path):
        if path.endswith("energy1_input"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(drm_hwmon, "_read_int", eacces)
    (rd,) = r.read()
    assert rd.method == "unavailable" and rd.energy_uj is None and "eacces" in rd.flags


def test_two_jobs_on_one_node_get_their_own_cards(sysfs):
    hw_a = sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=1, render=128, hwmon={"power1_average": 200_000_000})
    hw_b = sysfs.gpu("0000:c2:00.0", MI300X, "amdgpu", card=2, render=129, hwmon={"power1_average": 600_000_000})
    (a,) = _resolve(sysfs, slurm_job_gpus="0")
    (b,) = _resolve(sysfs, slurm_job_gpus="1")
    assert (a.device_id, b.device_id) == ("0000:c1:00.0", "0000:c2:00.0")
    ra, rb = _reader(sysfs, [a]), _reader(sysfs, [b])
    rows_a, rows_b = [], []
    for t in (0, 10):
        rows_a.append((t, ra.read()))
        rows_b.append((t, rb.read()))
    put(hw_a / "power1_average", 0)  # the other card's reading must not leak in
    put(hw_b / "power1_average", 0)
    (da,) = _summary(_rows(rows_a)).devices
    (db,) = _summary(_rows(rows_b)).devices
    assert (da.energy_j, db.energy_j) == (pytest.approx(2000.0), pytest.approx(6000.0))  # 200 W, 600 W x 10 s


def test_partitioned_mi300x_cpx_gets_one_eighth_labelled(sysfs):
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, partitions=8,
                   hwmon={"power1_average": 800_000_000, "power1_cap": 750_000_000},
                   extra={"current_compute_partition": "CPX"})
    (g,) = _resolve(sysfs, slurm_job_gpus="3")
    assert (g.device_id, g.fraction, g.share, g.share_detail) == ("0000:c1:00.0/xcp3", 1 / 8, "partition", "CPX 3/8")
    r = _reader(sysfs, [g])
    (st,) = r.devices()
    assert st.rated_power_w == pytest.approx(750 / 8)  # the cap x 1/8
    samples = [(0, r.read()), (10, r.read())]
    assert "partition_fraction:0.125" in samples[0][1][0].flags and "share_estimated" in samples[0][1][0].flags
    (d,) = _summary(_rows(samples)).devices
    # the card: 800 W x 10 s = 8000 J; the partition's share: 8000 / 8 = 1000 J
    assert d.device_energy_j == pytest.approx(8000.0) and d.energy_j == pytest.approx(1000.0)
    assert "partition_fraction:0.125" in d.flags


def test_partition_count_from_mode_and_unknown_cpx_is_unavailable(sysfs):
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, partitions=2,
              hwmon={"power1_average": 1}, extra={"current_compute_partition": "DPX"})
    sysfs.gpu("0000:c2:00.0", MI300X, "amdgpu", card=1, render=130, kfd=False,
              hwmon={"power1_average": 1}, extra={"current_compute_partition": "CPX"})
    g = _resolve(sysfs, slurm_job_gpus="0,1,2")
    assert [(x.device_id, x.fraction) for x in g] == [("0000:c1:00.0/xcp0", 0.5), ("0000:c1:00.0/xcp1", 0.5),
                                                      ("0000:c2:00.0/xcp0", None)]
    assert g[2].fraction_unknown  # CPX with no KFD nodes to count: never charged the whole card
    rds = _reader(sysfs, g).read()
    assert [x.method for x in rds] == ["power_integration", "power_integration", "unavailable"]
    assert "partition_fraction_unknown" in rds[2].flags


def test_intel_tile_from_ze_affinity_mask_through_the_allocation(sysfs):
    sysfs.gpu("0000:18:00.0", MAX1550, "xe", card=0, render=128, tiles=2, hwmon={"energy1_input": 0})
    hw = sysfs.gpu("0000:8a:00.0", MAX1550, "xe", card=1, render=129, tiles=2, hwmon={"energy1_input": 0})
    # COMPOSITE: in-job ordinal 0 = the job's first card = GRES index 1 = card1; ".1" = its second tile
    (g,) = _resolve(sysfs, slurm_job_gpus="1", ze_affinity_mask="0.1", ze_flat_device_hierarchy="COMPOSITE")
    assert (g.device_id, g.fraction, g.share_detail) == ("0000:8a:00.0/tile1", 0.5, "tile 1/2")
    r = _reader(sysfs, [g])
    samples = []
    for t, uj in ((0, 10**9), (10, 10**9 + 10 * 400 * 10**6)):
        put(hw / "energy1_input", uj)
        samples.append((t, r.read()))
    (d,) = _summary(_rows(samples)).devices
    assert d.energy_j == pytest.approx(2000.0)  # 400 W x 10 s = 4000 J on the card; one of 2 tiles: 2000 J


def test_rocm_names_and_ordinals(sysfs):
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, hwmon={}, extra={"unique_id": "aa11"})
    sysfs.gpu("0000:c2:00.0", MI300X, "amdgpu", card=1, render=129, hwmon={}, extra={"unique_id": "bb22"})
    (g,) = _resolve(sysfs, rocr_visible_devices="GPU-bb22")
    assert g.bus_id == "0000:c2:00.0"
    (g,) = _resolve(sysfs, slurm_job_gpus="/dev/dri/renderD129")
    assert g.bus_id == "0000:c2:00.0"
    # a numeric ROCR_VISIBLE_DEVICES is an in-job ordinal: mapped through the allocation ...
    (g,) = _resolve(sysfs, slurm_job_gpus="0,1", rocr_visible_devices="1")
    assert g.bus_id == "0000:c2:00.0"
    # ... and an error without one (never read as a physical index)
    with pytest.raises(GpuResolveError, match="ROCR_VISIBLE_DEVICES=0: .*job-relative ordinal"):
        _resolve(sysfs, rocr_visible_devices="0")
    with pytest.raises(GpuResolveError, match="SLURM_JOB_GPUS=5: GRES index 5 but this node has 2"):
        _resolve(sysfs, slurm_job_gpus="5")


def test_integrated_graphics_is_neither_visible_nor_counted_in_the_gres_order(sysfs, monkeypatch):
    from slurm_energy.config import SiteConfig
    from slurm_energy.devices.gpu import GPU_BACKENDS
    from slurm_energy.sampling.local import visible_gpus as visible_drm_gpus

    monkeypatch.delitem(GPU_BACKENDS, "nvml")  # the AMD/Intel backend alone, also on a node with NVIDIA GPUs

    sysfs.gpu("0000:00:02.0", "8086:46a6", "i915", card=0, render=128, hwmon={})  # iGPU: hwmon without energy...
    import shutil
    shutil.rmtree(sysfs.root / "devices" / "pci0000:00" / "0000:00:02.0" / "hwmon")  # ...or none at all
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=1, render=129, hwmon={"power1_average": 1})
    sysfs.gpu("0000:c2:00.0", MI300X, "amdgpu", card=2, render=130, hwmon={"power1_average": 1})
    cfg = SiteConfig.model_validate({"hardware": {"drm_root": str(sysfs.drm_root), "kfd_root": str(sysfs.kfd_root)}})
    assert [g["device_id"] for g in visible_drm_gpus(cfg, {})] == ["0000:c1:00.0", "0000:c2:00.0"]
    # outside Slurm a ROCm ordinal counts the node's own GPUs; inside, SLURM_JOB_GPUS is the allocation
    assert [g["device_id"] for g in visible_drm_gpus(cfg, {"ROCR_VISIBLE_DEVICES": "1"})] == ["0000:c2:00.0"]
    # GRES index 1 = the second compute GPU by render minor (the iGPU's renderD128 is not counted)
    assert [g["device_id"] for g in visible_drm_gpus(cfg, {"SLURM_JOB_GPUS": "1", "ROCR_VISIBLE_DEVICES": "0"})] == \
        ["0000:c2:00.0"]


def test_i915_tile_read_from_its_own_counter_is_measured_not_a_share(sysfs):
    sysfs.gpu("0000:8a:00.0", MAX1550, "i915", card=0, render=128, tiles=2,
              hwmon={"energy1_input": 0, "power1_rated_max": 600_000_000})
    sysfs.tile_hwmon("0000:8a:00.0", 0, {"energy1_input": 0})
    gt1 = sysfs.tile_hwmon("0000:8a:00.0", 1, {"energy1_input": 0})
    (g,) = _resolve(sysfs, slurm_job_gpus="0", ze_affinity_mask="0.1", ze_flat_device_hierarchy="COMPOSITE")
    assert (g.device_id, g.index) == ("0000:8a:00.0/tile1", 1)
    r = _reader(sysfs, [g])
    samples = []
    for t, uj in ((0, 7_000_000), (10, 7_000_000 + 10 * 280 * 10**6)):
        put(gt1 / "energy1_input", uj)
        samples.append((t, r.read()))
    rd = samples[0][1][0]
    assert rd.method == "counter" and "tile_counter" in rd.flags and not any("fraction" in f for f in rd.flags)
    (d,) = _summary(_rows(samples)).devices
    assert d.energy_j == pytest.approx(2800.0)  # the tile's own counter: 280 W x 10 s, no 1/2 applied

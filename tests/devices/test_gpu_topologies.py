"""GPUs as their kernels show them: multi-die packages (MI250X), AMD compute/memory partitions as
KFD encodes them, and Intel Level Zero hierarchy modes -- on the capture-built fake sysfs
(tests/fakes/drm.py, every path and value cited there). Energies computed by hand in each test."""

import pytest

from slurm_energy.devices.drm import discover_drm_gpus, kfd_location
from slurm_energy.devices.gpu import GpuResolveError
from slurm_energy.model import Method
from tests.devices.test_drm_gpus import MAX1550, MI250X, MI300X, _reader, _resolve, _rows, _summary
from tests.fakes.drm import MI250X_PRIMARY_HWMON, MI250X_SECONDARY_HWMON, MI300X_HWMON, XE_HWMON, FakeSysfs, put


@pytest.fixture
def sysfs(tmp_path):
    return FakeSysfs(tmp_path / "sys")


def _mi250x_node(fs, package_w: float):
    """One MI250X: GCD 0 (primary, c1) reports the package's power1_average; GCD 1 (c6) 0 W, caps 0."""
    prim = fs.gpu("0000:c1:00.0", MI250X, "amdgpu", card=0, render=128,
                  hwmon={**MI250X_PRIMARY_HWMON, "power1_average": int(package_w * 1e6)},
                  extra={"gpu_busy_percent": 90})
    fs.gpu("0000:c6:00.0", MI250X, "amdgpu", card=1, render=129, hwmon=dict(MI250X_SECONDARY_HWMON),
           extra={"gpu_busy_percent": 95})
    return prim


def _energy(fs, gpus, secs=10):
    r = _reader(fs, gpus)
    return _summary(_rows([(0, r.read()), (secs, r.read())])).devices


# -- 1. multi-die packages ---------------------------------------------------------------------------

def test_mi250x_dies_paired_secondary_detected_from_its_zero_caps(sysfs):
    _mi250x_node(sysfs, 400.0)
    a, b = discover_drm_gpus(str(sysfs.drm_root), str(sysfs.kfd_root))
    assert (a.secondary_die, b.secondary_die) == (False, True)
    assert a.package == b.package == ["0000:c1:00.0", "0000:c6:00.0"]


def test_job_on_the_secondary_die_gets_half_the_package_never_its_own_zero(sysfs):
    # package 400 W for 10 s = 4000 J (reported on die 0); the job on die 1 (which reads 0 W):
    # share 1/2 -> 2000 J, method power_integration, labelled a package share
    _mi250x_node(sysfs, 400.0)
    (g,) = _resolve(sysfs, slurm_job_gpus="1")
    assert (g.bus_id, g.share, g.fraction) == ("0000:c6:00.0", "package", 0.5)
    assert g.share_detail == "die 1/2 of package 0000:c1:00.0"
    (d,) = _energy(sysfs, [g])
    assert d.device_energy_j == pytest.approx(4000.0) and d.energy_j == pytest.approx(2000.0)
    assert d.method == Method.POWER_INTEGRATION
    assert "package_fraction:0.5" in d.flags and "share_estimated" in d.flags
    st = _reader(sysfs, [g]).devices()[0]
    assert st.rated_power_w == pytest.approx(280.0)  # the package's 560 W cap x 1/2


def test_two_jobs_on_the_two_dies_sum_to_the_package(sysfs):
    _mi250x_node(sysfs, 400.0)
    (g0,) = _resolve(sysfs, slurm_job_gpus="0")
    (g1,) = _resolve(sysfs, slurm_job_gpus="1")
    (d0,), (d1,) = _energy(sysfs, [g0]), _energy(sysfs, [g1])
    assert d0.energy_j + d1.energy_j == pytest.approx(4000.0)  # 2000 J + 2000 J, never 4000 + 0


def test_secondary_die_without_a_primary_is_unmeasured_not_zero(sysfs):
    sysfs.gpu("0000:c6:00.0", MI250X, "amdgpu", card=0, render=128, hwmon=dict(MI250X_SECONDARY_HWMON))
    (g,) = _resolve(sysfs, slurm_job_gpus="0")
    assert g.fraction_unknown and g.share == "package"
    (rd,) = _reader(sysfs, [g]).read()
    assert rd.method == "unavailable" and "partition_fraction_unknown" in rd.flags
    (d,) = _energy(sysfs, [g])
    assert d.energy_j is None and d.method == Method.UNAVAILABLE


def test_zero_watts_while_busy_is_not_a_measurement(sysfs):
    # an MI300X whose power1_input reads 0 uW while gpu_busy_percent says 80 %: unavailable, not 0 J
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, hwmon=dict(MI300X_HWMON),
              extra={"gpu_busy_percent": 80})
    (g,) = _resolve(sysfs, slurm_job_gpus="0")
    (rd,) = _reader(sysfs, [g]).read()
    assert rd.method == "unavailable" and "zero_power_while_busy" in rd.flags
    (d,) = _energy(sysfs, [g])
    assert d.energy_j is None


# -- 2a. AMD partitions as KFD encodes them ---------------------------------------------------------

@pytest.mark.parametrize("encoding,loc5", [("low", 0xC105), ("high", 0x5000C100)])
def test_cpx_partitions_have_their_own_location_ids_and_are_eighths(sysfs, encoding, loc5):
    # MI300X in CPX: 8 KFD nodes, each location_id = pci_dev_id 0xc100 with its node id ORed in
    assert kfd_location(loc5) == ("0000:c1:00.0", 5)
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, partitions=8, kfd_encoding=encoding,
                   hwmon={**MI300X_HWMON, "power1_input": 640_000_000},
                   extra={"current_compute_partition": "CPX", "current_memory_partition": "NPS4"})
    locs = sorted(int(line.split()[1]) for p in sysfs.kfd_root.glob("*/properties")
                  for line in p.read_text().splitlines() if line.startswith("location_id") and line != "location_id 0")
    assert len(set(locs)) == 8 and loc5 in locs  # distinct per partition, as real kernels write them
    (g,) = _resolve(sysfs, slurm_job_gpus="5")
    assert (g.device_id, g.fraction, g.share_detail) == ("0000:c1:00.0/xcp5", 1 / 8, "CPX 5/8, NPS4")
    # card 640 W x 10 s = 6400 J; one eighth -> 800 J
    (d,) = _energy(sysfs, [g])
    assert d.energy_j == pytest.approx(800.0) and "partition_fraction:0.125" in d.flags
    all8 = _resolve(sysfs, slurm_job_gpus="0,1,2,3,4,5,6,7")
    assert sum(x.fraction for x in all8) == pytest.approx(1.0)  # the shares of one card sum to the card
    assert sorted(x.index for x in all8) == list(range(8))


def test_qpx_partition_is_a_quarter(sysfs):
    sysfs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=0, render=128, partitions=4,
              hwmon={**MI300X_HWMON, "power1_input": 400_000_000}, extra={"current_compute_partition": "QPX"})
    (g,) = _resolve(sysfs, slurm_job_gpus="2")
    assert (g.device_id, g.fraction) == ("0000:c1:00.0/xcp2", 0.25)
    (d,) = _energy(sysfs, [g])
    assert d.energy_j == pytest.approx(1000.0)  # 400 W x 10 s = 4000 J x 1/4


# -- 2b. Intel Level Zero hierarchy modes -----------------------------------------------------------

def _two_max1550(fs):
    """Two Data Center GPU Max 1550 on xe, 2 tiles each; card1's card energy counter returned."""
    fs.gpu("0000:18:00.0", MAX1550, "xe", card=0, render=128, tiles=2, hwmon=dict(XE_HWMON))
    return fs.gpu("0000:8a:00.0", MAX1550, "xe", card=1, render=129, tiles=2, hwmon=dict(XE_HWMON))


@pytest.mark.parametrize("mode", [None, "FLAT", "COMBINED"])
def test_flat_and_combined_ordinals_count_tiles(sysfs, mode):
    _two_max1550(sysfs)
    # job holds both cards; FLAT/COMBINED root devices: card0 tile0, card0 tile1, card1 tile0, card1 tile1
    (g,) = _resolve(sysfs, slurm_job_gpus="0,1", ze_affinity_mask="3", ze_flat_device_hierarchy=mode)
    assert (g.device_id, g.fraction, g.share) == ("0000:8a:00.0/tile1", 0.5, "tile")
    (g,) = _resolve(sysfs, slurm_job_gpus="0,1", ze_affinity_mask="1", ze_flat_device_hierarchy=mode)
    assert g.device_id == "0000:18:00.0/tile1"
    with pytest.raises(GpuResolveError, match="ordinal 4 but the job has 4 tile"):
        _resolve(sysfs, slurm_job_gpus="0,1", ze_affinity_mask="4", ze_flat_device_hierarchy=mode)


def test_composite_ordinals_count_cards_and_k_t_names_a_tile(sysfs):
    _two_max1550(sysfs)
    (g,) = _resolve(sysfs, slurm_job_gpus="0,1", ze_affinity_mask="1", ze_flat_device_hierarchy="COMPOSITE")
    assert (g.device_id, g.fraction) == ("0000:8a:00.0", None)  # the whole card
    (g,) = _resolve(sysfs, slurm_job_gpus="0,1", ze_affinity_mask="1.0", ze_flat_device_hierarchy="composite")
    assert (g.device_id, g.fraction) == ("0000:8a:00.0/tile0", 0.5)


def test_flat_tiles_of_one_card_sum_to_the_card(sysfs):
    hw = _two_max1550(sysfs)
    gs = _resolve(sysfs, slurm_job_gpus="1", ze_affinity_mask="0,1")  # FLAT: both tiles of card1
    assert [g.device_id for g in gs] == ["0000:8a:00.0/tile0", "0000:8a:00.0/tile1"]
    r = _reader(sysfs, gs)
    samples = []
    for t, uj in ((0, 10**9), (10, 10**9 + 10 * 500 * 10**6)):  # card energy: 500 W x 10 s = 5000 J
        put(hw / "energy1_input", uj)
        samples.append((t, r.read()))
    ds = _summary(_rows(samples)).devices
    assert [d.energy_j for d in ds] == [pytest.approx(2500.0), pytest.approx(2500.0)]  # 5000 J in all


def test_a_card_chosen_whole_is_not_charged_again_through_its_tile(sysfs):
    _two_max1550(sysfs)
    gs = _resolve(sysfs, slurm_job_gpus="0", ze_affinity_mask="0,0.1", ze_flat_device_hierarchy="COMPOSITE")
    assert [(g.device_id, g.fraction) for g in gs] == [("0000:18:00.0", None)]


def test_unknown_hierarchy_mode_is_a_clear_error(sysfs):
    _two_max1550(sysfs)
    with pytest.raises(GpuResolveError, match="ZE_FLAT_DEVICE_HIERARCHY=SPLIT: expected one of COMPOSITE, FLAT, COMBINED"):
        _resolve(sysfs, slurm_job_gpus="0", ze_affinity_mask="0", ze_flat_device_hierarchy="SPLIT")


def test_prolog_reads_slurms_own_ze_affinity_mask_as_card_ordinals(sysfs):
    """slurmd writes the Prolog's ZE_AFFINITY_MASK from the GRES allocation (Slurm's
    src/plugins/gres/common/gres_common.c: one local index per GRES device, gres.conf File= a card's
    render node): ``--gres=gpu:1`` on card1 gives SLURM_JOB_GPUS=1, ZE_AFFINITY_MASK=0 = the card
    whole, not its tile 0 as the FLAT runtime default would read an in-job mask."""
    from types import SimpleNamespace

    from slurm_energy.slurm.context import JobFacts
    from slurm_energy.slurm.hooks.gpus import resolve_gpus

    _two_max1550(sysfs)
    cfg = SimpleNamespace(hardware=SimpleNamespace(drm_root=str(sysfs.drm_root), kfd_root=str(sysfs.kfd_root)))
    ctx = JobFacts(dict(job_gpus="1", cuda_visible_devices=None, gpus=[], gpu_resolution_error=""))
    resolve_gpus(ctx, cfg, {"ZE_AFFINITY_MASK": "0"})
    assert [(g["device_id"], g.get("fraction")) for g in ctx.gpus] == [("0000:8a:00.0", None)]
    # a mode named in slurmd's environment is honoured: FLAT ordinal 1 = card1's tile 1, half the card
    ctx = JobFacts(dict(job_gpus="1", cuda_visible_devices=None, gpus=[], gpu_resolution_error=""))
    resolve_gpus(ctx, cfg, {"ZE_AFFINITY_MASK": "1", "ZE_FLAT_DEVICE_HIERARCHY": "FLAT"})
    assert [(g["device_id"], g.get("fraction")) for g in ctx.gpus] == [("0000:8a:00.0/tile1", 0.5)]

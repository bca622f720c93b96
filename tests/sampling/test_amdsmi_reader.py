"""AMD GPUs through amdsmi, against a LABELLED stand-in module (tests/fakes/amdsmi.py says why the
real binding cannot be imported here), with the hwmon reader on a fake sysfs tree filling the
gaps. Energies computed by hand."""

import pytest

from slurm_energy.accounting.summary import summarise_node
from slurm_energy.devices.gpu.drm import resolve_drm_gpus
from slurm_energy.model import Method
from slurm_energy.sampling.readers.amdsmi_reader import AmdSmiReader, import_amdsmi
from slurm_energy.sampling.readers.drm_hwmon import DrmHwmonReader
from tests.fakes.amdsmi import FakeAmdSmi, FakeGpu
from tests.fakes.drm import FakeSysfs

T0 = 1_796_034_000.0
BDF = "0000:c1:00.0"


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


@pytest.fixture
def sysfs(tmp_path):
    return FakeSysfs(tmp_path / "sys")


def _reader(fs, smi, clock=None, **resolve):
    gpus = resolve_drm_gpus(drm_root=str(fs.drm_root), kfd_root=str(fs.kfd_root), **(resolve or {"slurm_job_gpus": "0"}))
    hw = DrmHwmonReader(list(gpus), str(fs.drm_root), str(fs.kfd_root))
    return AmdSmiReader(hw, amdsmi_module=smi, clock=clock or Clock())


def _summary(samples, pids=(1,)):
    rows = [{"t": T0 + t, "kind": "sample", "job": {"cpu_time_s": t, "mem_bytes": 1, "pids": list(pids)},
             "node": {"cpu_busy_s": 2 * t, "cpu_total_s": 4 * t, "ncpu": 4, "mem_used_bytes": 2},
             "readings": [r.to_dict() for r in rs]} for t, rs in samples]
    return summarise_node(rows, job_id="7", node="n1", start_time=rows[0]["t"], end_time=rows[-1]["t"])


def test_real_amdsmi_is_not_importable_without_rocm_and_that_is_a_reason_not_a_crash():
    mod, why = import_amdsmi()
    if mod is not None:  # a machine with ROCm: nothing to check here
        pytest.skip("amdsmi importable on this machine")
    assert why.startswith("amdsmi not importable")


def test_energy_counter_with_its_resolution_beats_hwmon_power(sysfs):
    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={"power1_average": 1, "power1_cap": 750_000_000})
    g = FakeGpu(BDF)
    g.energy_accumulator, g.gfx_activity = 1_000_000, 95
    r = _reader(sysfs, FakeAmdSmi([g]))
    assert r.devices()[0].extra["energy_source"] == "amdsmi counter"
    samples = [(0, r.read())]
    g.energy_accumulator += 326_797_386  # counts over 10 s
    samples.append((10, r.read()))
    rd = samples[0][1][0]
    assert (rd.method, rd.energy_uj, rd.util) == ("counter", int(1_000_000 * 15.3), 0.95)
    (d,) = _summary(samples).devices
    # 326 797 386 counts x 15.3 µJ = 5 000 000 006 µJ = 5000.0 J (500 W for 10 s)
    assert d.method == Method.COUNTER and d.energy_j == pytest.approx(326_797_386 * 15.3e-6)


def test_no_amdsmi_counter_hwmon_counter_second_then_amdsmi_power(sysfs):
    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={"energy1_input": 0})
    g = FakeGpu(BDF)
    g.current_socket_power = 640
    r = _reader(sysfs, FakeAmdSmi([g]))
    (rd,) = r.read()
    assert rd.method == "counter" and "amdsmi" not in rd.flags  # the driver's energy file (hwmon) wins over power


def test_power_only_card_reads_average_socket_power_when_current_is_na(sysfs):
    hw = sysfs.gpu(BDF, "1002:7408", "amdgpu", card=0, render=128, hwmon={"temp1_input": 1})
    g = FakeGpu(BDF)
    g.average_socket_power = 400  # MI200: average only; current is "N/A"
    r = _reader(sysfs, FakeAmdSmi([g]))
    samples = [(0, r.read())]
    g.average_socket_power = 500
    samples.append((10, r.read()))
    assert samples[0][1][0].power_w == 400.0 and samples[0][1][0].method == "power_integration"
    (d,) = _summary(samples).devices
    assert d.energy_j == pytest.approx(4500.0)  # (400 + 500) / 2 W x 10 s
    assert not (hw / "power1_average").exists()  # nothing but amdsmi could have given the power


def test_init_failure_falls_back_to_hwmon_files(sysfs):
    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={"power1_average": 250_000_000})
    smi = FakeAmdSmi([FakeGpu(BDF)], init_error=True)
    r = _reader(sysfs, smi)
    assert r.reason.startswith("amdsmi cannot initialise")
    (rd,) = r.read()
    assert (rd.method, rd.power_w) == ("power_integration", 250.0)


def test_per_process_gfx_time_splits_a_shared_card(sysfs):
    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={})
    g = FakeGpu(BDF)
    g.energy_accumulator = 1  # counting since driver load (a counter at 0 is a secondary die's)
    g.counter_resolution = 1.0  # 1 µJ per count, to keep the arithmetic visible
    g.processes = [{"pid": 100, "gfx_ns": 0}, {"pid": 200, "gfx_ns": 0}]
    clock = Clock()
    r = _reader(sysfs, FakeAmdSmi([g]), clock)
    samples = [(0, r.read())]
    assert samples[0][1][0].proc_util == {}  # no interval yet
    clock.t += 10
    g.energy_accumulator = 1 + 4_000_000_000  # 4000 J in 10 s
    g.processes = [{"pid": 100, "gfx_ns": 6_000_000_000}, {"pid": 200, "gfx_ns": 2_000_000_000}]
    samples.append((10, r.read()))
    assert samples[1][1][0].proc_util == {100: pytest.approx(0.6), 200: pytest.approx(0.2)}
    (d,) = _summary(samples, pids=(100,)).devices
    # the job (pid 100) ran 6 of the 8 GFX-seconds: 4000 J x 0.6 / (0.6 + 0.2) = 3000 J
    assert d.device_energy_j == pytest.approx(4000.0) and d.energy_j == pytest.approx(3000.0)


def test_partition_share_kept_on_amdsmi_readings(sysfs):
    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, partitions=4, hwmon={},
              extra={"current_compute_partition": "QPX"})
    g = FakeGpu(BDF)
    g.energy_accumulator, g.counter_resolution = 1, 1.0
    r = _reader(sysfs, FakeAmdSmi([g]), slurm_job_gpus="2")
    samples = [(0, r.read())]
    g.energy_accumulator = 1 + 2_000_000_000
    samples.append((10, r.read()))
    assert "partition_fraction:0.25" in samples[0][1][0].flags
    (d,) = _summary(samples).devices
    assert d.device_id == f"{BDF}/xcp2" and d.energy_j == pytest.approx(500.0)  # 2000 J x 1/4


def test_prolog_reading_row_never_imports_amdsmi(sysfs, monkeypatch):
    import importlib.util
    import sys

    from slurm_energy.config import SiteConfig
    from slurm_energy.devices.hardware import HardwareConfig
    from slurm_energy.sampling.setup import build_readers

    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={"power1_average": 1})
    cfg = SiteConfig.model_validate({"hardware": {"drm_root": str(sysfs.drm_root), "kfd_root": str(sysfs.kfd_root)}})
    gpus = [g.to_dict() for g in resolve_drm_gpus("0", drm_root=str(sysfs.drm_root), kfd_root=str(sysfs.kfd_root))]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "amdsmi" else real(n, *a))
    readers, notes = build_readers(HardwareConfig.of(cfg.hardware), gpus=gpus, light=True)
    assert not [r for r in readers if r.device_class == "gpu"] and "amdsmi" not in sys.modules
    assert any("start with the sampler" in n for n in notes)
    # without amdsmi installed the Prolog reads the same hwmon file the sampler will
    monkeypatch.setattr(importlib.util, "find_spec", real)
    readers, _ = build_readers(HardwareConfig.of(cfg.hardware), gpus=gpus, light=True)
    assert [r.name for r in readers if r.device_class == "gpu"] == ["drm-hwmon"]


# -- library versions, hand-over, packages (tests/fakes/amdsmi.py cites each release's shapes) ------

@pytest.mark.parametrize("rocm", ["6.0", "6.1", "6.2", "6.3", "7.0"])
def test_energy_and_process_results_of_every_rocm_6_and_7_release(sysfs, rocm):
    # energy dict key 'power' (6.0-6.2), both (6.3), 'energy_accumulator' (7.x); process list of
    # handles (6.0/6.1) or dicts (6.2+). 1 uJ per count: 4000 J in 10 s; pid 100 ran 6 of 8 GFX-seconds
    sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={})
    g = FakeGpu(BDF)
    g.energy_accumulator, g.counter_resolution = 1_000_000, 1.0
    g.processes = [{"pid": 100, "gfx_ns": 0}, {"pid": 200, "gfx_ns": 0}]
    clock = Clock()
    r = _reader(sysfs, FakeAmdSmi([g], rocm=rocm), clock)
    samples = [(0, r.read())]
    clock.t += 10
    g.energy_accumulator += 4_000_000_000
    g.processes = [{"pid": 100, "gfx_ns": 6_000_000_000}, {"pid": 200, "gfx_ns": 2_000_000_000}]
    samples.append((10, r.read()))
    assert samples[1][1][0].proc_util == {100: pytest.approx(0.6), 200: pytest.approx(0.2)}
    (d,) = _summary(samples, pids=(100,)).devices
    assert d.method == Method.COUNTER
    assert d.device_energy_j == pytest.approx(4000.0) and d.energy_j == pytest.approx(3000.0)  # 4000 x 0.6/0.8


def test_amdsmi_failing_at_every_read_hands_over_to_hwmon_power(sysfs):
    # amdsmi's counter reads for 10 s (600 J at 1 uJ/count), then every call fails (NO_PERM): the card
    # is read from hwmon power1_input (MI300X) from then on: 300 W for the next 20 s = 6000 J. The
    # interval across the switch (10 -> 20 s) is dropped (method_changed), never 0 J, never unavailable.
    from tests.fakes.drm import MI300X_HWMON, put

    hw = sysfs.gpu(BDF, "1002:74a1", "amdgpu", card=0, render=128, hwmon={**MI300X_HWMON, "power1_input": 300_000_000})
    g = FakeGpu(BDF)
    g.energy_accumulator, g.counter_resolution = 1, 1.0
    r = _reader(sysfs, FakeAmdSmi([g]))
    samples = [(0, r.read())]
    g.energy_accumulator += 600_000_000
    samples.append((10, r.read()))
    g.fail_energy = True
    for t in (20, 30, 40):
        put(hw / "power1_input", 300_000_000)
        samples.append((t, r.read()))
    rds = [rs[0] for _, rs in samples]
    assert [x.method for x in rds] == ["counter", "counter", "power_integration", "power_integration", "power_integration"]
    assert all("amdsmi_handed_over:AmdSmiLibraryException" in x.flags for x in rds[2:])
    (d,) = _summary(samples).devices
    assert d.energy_j == pytest.approx(600.0 + 300.0 * 20)  # 6600 J over 30 of the 40 s
    assert d.method == Method.POWER_INTEGRATION and "method_changed" in d.flags
    assert d.coverage == pytest.approx(30.0 / 40.0)


def test_mi250x_secondary_die_charged_half_the_primary_counter_as_a_share(sysfs):
    # 2 dies, package 400 W for 10 s = 4000 J on the primary's accumulator (1 uJ/count); the secondary's
    # accumulator reads 0 (rocm-smi's secondary-die test). The job on die 1: share 0.5 -> 2000 J,
    # method counter, labelled package_fraction:0.5.
    from tests.fakes.drm import MI250X_PRIMARY_HWMON, MI250X_SECONDARY_HWMON

    sysfs.gpu("0000:c1:00.0", "1002:7408", "amdgpu", card=0, render=128, hwmon=dict(MI250X_PRIMARY_HWMON))
    sysfs.gpu("0000:c6:00.0", "1002:7408", "amdgpu", card=1, render=129, hwmon=dict(MI250X_SECONDARY_HWMON))
    prim, sec = FakeGpu("0000:c1:00.0"), FakeGpu("0000:c6:00.0")
    prim.energy_accumulator, prim.counter_resolution = 7_000_000, 1.0
    sec.energy_accumulator, sec.counter_resolution = 0, 1.0
    r = _reader(sysfs, FakeAmdSmi([prim, sec]), slurm_job_gpus="1")
    samples = [(0, r.read())]
    prim.energy_accumulator += 4_000_000_000
    samples.append((10, r.read()))
    (d,) = _summary(samples).devices
    assert d.device_id == "0000:c6:00.0" and d.method == Method.COUNTER
    assert d.device_energy_j == pytest.approx(4000.0) and d.energy_j == pytest.approx(2000.0)
    assert "package_fraction:0.5" in d.flags and "share_estimated" in d.flags


def test_secondary_die_zero_counter_is_never_read_as_its_energy(sysfs):
    # the same secondary die with no hwmon caps to say so: amdsmi's 0 counter is not chosen as a
    # counter (it would integrate to 0 J); the card falls to its hwmon source, here nothing: unavailable
    sysfs.gpu(BDF, "1002:7408", "amdgpu", card=0, render=128, hwmon={})
    g = FakeGpu(BDF)
    g.energy_accumulator = 0
    r = _reader(sysfs, FakeAmdSmi([g]))
    (rd,) = r.read()
    assert rd.method == "unavailable" and rd.energy_uj is None

"""NvmlReader with fake devices behind the real pynvml (NotSupported raised as pynvml does)."""

import pynvml
import pytest

from slurm_energy.accounting.attribution import gpu_process_share
from slurm_energy.core import Reading
from slurm_energy.devices.gpu.nvidia import resolve_job_gpus
from slurm_energy.sampling.readers.nvml import NvmlReader
from tests.fakes.nvml import FakeGpu, FakeMig, install
from tests.helpers.series_points import series_from_readings

VOLTA = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
KEPLER = "GPU-bbbbbbbb-0000-0000-0000-000000000002"  # power only, no energy counter
OLD = "GPU-cccccccc-0000-0000-0000-000000000003"  # neither
PARENT = "GPU-dddddddd-0000-0000-0000-000000000004"
MA = "MIG-eeeeeeee-0000-0000-0000-00000000000a"
MB = "MIG-eeeeeeee-0000-0000-0000-00000000000b"


def gpus():
    return [
        FakeGpu(VOLTA, 0, energy_mj=1_000_000, power_mw=250_000, limit_mw=300_000, util_gpu=80,
                mem_used=2 * 2**30, proc_samples=[(100, 60), (200, 20)]),
        FakeGpu(KEPLER, 1, energy_mj=None, power_mw=100_000, util_gpu=50),
        FakeGpu(OLD, 2, energy_mj=None, power_mw=None, util_gpu=25),
        FakeGpu(PARENT, 3, energy_mj=5_000_000, limit_mw=700_000,
                migs=[FakeMig(MA, 1, 0, gi_slices=3), FakeMig(MB, 2, 0, gi_slices=4)]),
    ]


def test_counter_preferred_and_in_uj(monkeypatch):
    devs = gpus()
    install(monkeypatch, devs)
    r = NvmlReader([VOLTA])
    a = r.read()[0]
    # 1_000_000 mJ x 1000 = 1e9 uJ; counter wins although power is supported too
    # power (250 W) is read beside the counter, for the cross-check; the counter is the method
    assert (a.method, a.energy_uj, a.max_energy_range_uj, a.power_w) == ("counter", 1_000_000_000, None, 250.0)
    assert a.util == pytest.approx(0.80)  # 80 % -> 0.8
    assert a.mem_bytes == 2 * 2**30
    assert a.proc_util == {100: pytest.approx(0.6), 200: pytest.approx(0.2)}
    devs[0].energy_mj += 1_250_000  # +1250 J over 5 s = 250 W, as the power reads
    b = r.read()[0]
    assert series_from_readings([(0.0, a), (5.0, b)]).total_j == pytest.approx(1250.0)
    (d,) = r.devices()
    assert d.rated_power_w == pytest.approx(300.0) and d.rated_power_source == "NVML enforced power limit"


def test_power_integration_when_counter_not_supported(monkeypatch):
    devs = gpus()
    install(monkeypatch, devs)
    r = NvmlReader([KEPLER])
    a = r.read()[0]
    devs[1].power_mw = 200_000
    b = r.read()[0]
    assert (a.method, a.power_w, b.power_w) == ("power_integration", pytest.approx(100.0), pytest.approx(200.0))
    # trapezoid: (100 + 200) / 2 W x 10 s = 1500 J
    assert series_from_readings([(0.0, a), (10.0, b)]).total_j == pytest.approx(1500.0)


def test_neither_counter_nor_power_is_unavailable_never_zero(monkeypatch):
    install(monkeypatch, gpus())
    a, b = NvmlReader([OLD]).read(), NvmlReader([OLD]).read()
    assert a[0].method == "unavailable" and a[0].energy_uj is None and a[0].power_w is None
    assert "no_energy_or_power" in a[0].flags
    assert series_from_readings([(0.0, a[0]), (5.0, b[0])]).total_j is None


def test_site_fallback_wattage_is_labelled_estimate(monkeypatch):
    install(monkeypatch, gpus())
    r = NvmlReader([OLD], fallback_w=200.0)
    (rd,) = r.read()
    # 200 W x util 0.25 = 50 W mean power, labelled
    assert rd.method == "tdp_estimate" and rd.mean_power_w == pytest.approx(50.0)
    assert "gpu_fallback_w" in rd.flags
    assert r.devices()[0].rated_power_source == "site config gpu_fallback_w"
    with pytest.raises(ValueError, match="fallback_w"):
        NvmlReader([OLD], fallback_w=-1)


def test_mig_slices_get_parent_energy_flagged_with_fraction(monkeypatch):
    devs = gpus()
    install(monkeypatch, devs)
    ra, rb = NvmlReader([MA]), NvmlReader([MB])
    a0, b0 = ra.read()[0], rb.read()[0]
    devs[3].energy_mj += 70_000  # parent +70 J
    devs[3].power_mw = 14_000  # 14 W x 5 s = 70 J: the power read beside the counter agrees
    a1, _b1 = ra.read()[0], rb.read()[0]
    assert a0.energy_uj == 5_000_000_000  # the parent's counter, mJ x 1000
    assert "mig_estimated" in a0.flags and a0.mig_fraction == pytest.approx(0.428571, abs=1e-6)  # 3/7
    assert b0.mig_fraction == pytest.approx(0.571429, abs=1e-6)  # 4/7
    parent_j = series_from_readings([(0.0, a0), (5.0, a1)]).total_j
    assert parent_j == pytest.approx(70.0)
    fa, fb = a0.mig_fraction, b0.mig_fraction
    # the fraction survives the sample file (a typed field, not a flag string)
    assert Reading.from_dict(a0.to_dict()).mig_fraction == fa
    # 70 J x 3/7 = 30 J and 70 J x 4/7 = 40 J: the two jobs sum to the parent, never more
    assert parent_j * fa == pytest.approx(30.0, rel=1e-5)
    assert parent_j * fb == pytest.approx(40.0, rel=1e-5)
    assert parent_j * (fa + fb) <= parent_j * (1 + 1e-6)
    # rated power: 700 W limit x 3/7 = 300 W
    assert ra.devices()[0].rated_power_w == pytest.approx(300.0)


def test_resolved_gpus_feed_the_reader(monkeypatch):
    install(monkeypatch, gpus())
    resolved = resolve_job_gpus(slurm_job_gpus="0,1")
    r = NvmlReader(resolved)
    assert [(x.device_id, x.method) for x in r.read()] == [(VOLTA, "counter"), (KEPLER, "power_integration")]


def test_shared_gpu_split_by_process_utilisation(monkeypatch):
    install(monkeypatch, gpus())
    (rd,) = NvmlReader([VOLTA]).read()
    # job A pid 100 at 0.6, job B pid 200 at 0.2: A = 0.6 / 0.8 = 0.75, B = 0.2 / 0.8 = 0.25
    a, b = gpu_process_share({100}, rd.proc_util), gpu_process_share({200}, rd.proc_util)
    assert (a, b) == (pytest.approx(0.75), pytest.approx(0.25))
    assert a + b <= 1.0 + 1e-12


def test_process_util_not_found_is_empty_not_supported_is_none(monkeypatch):
    devs = gpus()
    devs[0].proc_samples = []
    devs[1].proc_samples = None
    install(monkeypatch, devs)
    v, k = NvmlReader([VOLTA, KEPLER]).read()
    assert v.proc_util == {} and k.proc_util is None


def test_gpu_lost_mid_job_reads_unavailable(monkeypatch):
    install(monkeypatch, gpus())
    r = NvmlReader([VOLTA])

    def lost(h):
        raise pynvml.NVMLError_GpuIsLost()

    monkeypatch.setattr(pynvml, "nvmlDeviceGetTotalEnergyConsumption", lost)
    (rd,) = r.read()
    assert rd.method == "unavailable" and "nvml_error:NVMLError_GpuIsLost" in rd.flags


def test_init_failure_never_raises(monkeypatch):
    install(monkeypatch, gpus(), init_error=pynvml.NVMLError_LibraryNotFound)
    r = NvmlReader([VOLTA])
    (rd,) = r.read()
    assert rd.method == "unavailable" and rd.flags == ["nvml_init_failed"]
    assert "NVMLError_LibraryNotFound" in r.reason
    assert r.devices()[0].device_id == VOLTA


def test_unknown_uuid_is_unavailable(monkeypatch):
    install(monkeypatch, gpus())
    (rd,) = NvmlReader(["GPU-nope"]).read()
    assert rd.method == "unavailable" and rd.flags == ["nvml_error:NVMLError_NotFound"]


def test_instant_power_field_read_where_the_driver_has_it(monkeypatch):
    # An H100 without its energy counter (e.g. a driver that refuses it): nvmlDeviceGetPowerUsage is the
    # 1 s average (300 W), NVML_FI_DEV_POWER_INSTANT reads 500 W now: the instant one is integrated,
    # 500 W x 10 s = 5000 J; the inventory says which source.
    gpu = FakeGpu(VOLTA, 0, name="NVIDIA H100 80GB HBM3", energy_mj=None, power_mw=300_000,
                  power_instant_mw=500_000, limit_mw=700_000)
    install(monkeypatch, [gpu])
    r = NvmlReader([VOLTA])
    assert r.devices()[0].extra["power_source"] == "NVML_FI_DEV_POWER_INSTANT"
    a, b = r.read()[0], r.read()[0]
    assert (a.method, a.power_w) == ("power_integration", 500.0)
    s = series_from_readings([(0.0, a), (10.0, b)])
    assert s.total_j == pytest.approx(5000.0)


def test_without_the_instant_field_the_averaged_power_is_read(monkeypatch):
    # an A100 on an older driver: the field answers NOT_SUPPORTED; nvmlDeviceGetPowerUsage (250 W)
    gpu = FakeGpu(VOLTA, 0, energy_mj=None, power_mw=250_000, power_instant_mw=None)
    install(monkeypatch, [gpu])
    r = NvmlReader([VOLTA])
    assert r.devices()[0].extra["power_source"] == "nvmlDeviceGetPowerUsage"
    assert r.read()[0].power_w == 250.0


def test_counter_failing_mid_job_hands_over_to_power_never_unavailable(monkeypatch):
    # counter reads 0 -> 2500 J over 10 s (250 W), then every nvmlDeviceGetTotalEnergyConsumption
    # raises (NotSupported): the GPU is read by power from then on, 250 W for 20 s = 5000 J; the
    # interval across the switch (10 -> 20 s) is dropped, not guessed. Total 2500 + 2500 = 5000 J.
    from tests.helpers.series_points import series_from_readings as series

    gpu = FakeGpu(VOLTA, 0, energy_mj=0, power_mw=250_000, limit_mw=400_000)
    install(monkeypatch, [gpu])
    r = NvmlReader([VOLTA])
    rds = [r.read()[0]]
    gpu.energy_mj = 2_500_000
    rds.append(r.read()[0])
    gpu.energy_mj = None
    rds += [r.read()[0], r.read()[0]]
    assert [x.method for x in rds] == ["counter", "counter", "power_integration", "power_integration"]
    assert all("nvml_counter_handed_over:NVMLError_NotSupported" in x.flags for x in rds[2:])
    s = series([(0.0, rds[0]), (10.0, rds[1]), (20.0, rds[2]), (30.0, rds[3])])
    assert s.total_j == pytest.approx(2500.0 + 2500.0)
    assert "method_changed" in s.flags and s.dropped == 1


GH200 = "GPU-ffffffff-0000-0000-0000-00000000000f"


def test_superchip_gpu_charged_its_gpu_scope_never_the_module(monkeypatch):
    # GH200: the power fields answer at NVML_POWER_SCOPE_MODULE (650 W: GPU + Grace + memory) and at
    # NVML_POWER_SCOPE_GPU (400 W, then 420 W); the GPU is charged the GPU scope by power
    # integration, (400 + 420) / 2 W x 10 s = 4100 J, never the module's 650 W nor the energy counter.
    gpu = FakeGpu(GH200, 0, name="NVIDIA GH200 480GB", energy_mj=9_000_000, power_mw=640_000,
                  power_instant_mw=400_000, module_power_mw=650_000, limit_mw=900_000)
    install(monkeypatch, [gpu])
    r = NvmlReader([GH200])
    (dev,) = r.devices()
    assert dev.extra["energy_source"] == "power_integration"
    assert dev.extra["power_scope"].startswith("NVML_POWER_SCOPE_GPU")
    a = r.read()[0]
    gpu.power_instant_mw = 420_000
    b = r.read()[0]
    assert (a.method, a.power_w, a.energy_uj, a.flags) == ("power_integration", 400.0, None, ["superchip_gpu_scope"])
    assert series_from_readings([(0.0, a), (10.0, b)]).total_j == pytest.approx(4100.0)


def test_superchip_without_gpu_scope_field_keeps_counter_flagged(monkeypatch):
    gpu = FakeGpu(GH200, 0, name="NVIDIA GH200 480GB", energy_mj=9_000_000, power_instant_mw=None,
                  module_power_mw=650_000)
    install(monkeypatch, [gpu])
    (x,) = NvmlReader([GH200]).read()
    assert (x.method, x.energy_uj, x.flags) == ("counter", 9_000_000_000, ["superchip_scope_unverified"])


def test_discrete_gpu_without_module_scope_is_no_superchip(monkeypatch):
    gpu = FakeGpu(VOLTA, 0, name="NVIDIA H100 80GB HBM3", energy_mj=1_000, power_instant_mw=500_000)
    install(monkeypatch, [gpu])
    r = NvmlReader([VOLTA])
    (x,) = r.read()
    assert (x.method, x.energy_uj, x.flags) == ("counter", 1_000_000, [])
    assert "power_scope" not in r.devices()[0].extra


def test_discrete_gpu_answering_module_scope_keeps_its_counter(monkeypatch):
    # a discrete H100 whose driver answers the module scope too (board = module): not a superchip by
    # name, so its energy counter stays the method
    gpu = FakeGpu(VOLTA, 0, name="NVIDIA H100 80GB HBM3", energy_mj=2_000, power_instant_mw=500_000,
                  module_power_mw=500_000)
    install(monkeypatch, [gpu])
    (x,) = NvmlReader([VOLTA]).read()
    assert (x.method, x.energy_uj, x.flags) == ("counter", 2_000_000, [])

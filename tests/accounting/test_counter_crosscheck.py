"""The counter-vs-power rule (slurm_energy/accounting/crosscheck.py) on NVML and hwmon readings.

The real ``pynvml`` module with its functions patched (tests/fakes/nvml.py): the reader reads the
counter (whole mJ), the power (mW, a 1 s average on Ampere and newer) and the enforced power limit
each sample. Tolerance per interval = the counter's resolution (1 mJ) + the power reading's accuracy
(5 W x dt) + the trapezoid's sampling error (|P1 - P0| / 2 x dt) + a 10 % margin. A moving counter
that disagrees is KEPT (flag ``power_disagrees``); a stuck one (0 J while power is high) or a
runaway one (above the 400 W limit x 1.1 + 5 W) is charged by power integration for that interval
(``counter_inconsistent``); a reset skips that interval only.
"""

import pytest

from slurm_energy.accounting.integrate import cross_check_tolerance_j
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.core import Flag
from slurm_energy.model import Method
from slurm_energy.sampling.readers.nvml import NvmlReader
from tests.fakes.nvml import FakeGpu, install
from tests.helpers.series_points import counter_series, cross_check_counter

UUID = "GPU-aaaaaaaa-0000-0000-0000-0000000000c1"
T0 = 1_796_034_000.0


def _job(gpu: FakeGpu, steps: list[tuple[int, int]], monkeypatch, dt: float = 5.0):
    """Read the fake GPU through NvmlReader at t = 0, dt, 2dt...; before read k the counter moves by
    steps[k-1][0] mJ (or is set to -value if negative: a reset) and power is steps[k-1][1] mW.
    Returns the GPU's DeviceEnergy from summarise_node."""
    install(monkeypatch, [gpu])
    r = NvmlReader([UUID])
    rows = []
    for k in range(len(steps) + 1):
        if k:
            d_mj, p_mw = steps[k - 1]
            gpu.energy_mj = -d_mj if d_mj < 0 else gpu.energy_mj + d_mj
            gpu.power_mw = p_mw
        rows.append({"t": T0 + k * dt, "kind": "sample", "job": {"cpu_time_s": float(k), "pids": [1], "source": "cgroup-v1"},
                     "node": {"cpu_busy_s": float(k), "cpu_total_s": 2.0 * k, "ncpu": 2},
                     "readings": [x.to_dict() for x in r.read()]})
    s = summarise_node(rows, job_id="1", node="g1", start_time=T0, end_time=T0 + len(steps) * dt)
    (d,) = [x for x in s.devices if x.device_class == "gpu"]
    return d


def test_stuck_counter_while_300_w_uses_power(monkeypatch):
    # counter stays at 1000 J while power reads 300 W for 3 x 5 s: counter says 0 J
    gpu = FakeGpu(UUID, 0, energy_mj=1_000_000, power_mw=300_000)
    d = _job(gpu, [(0, 300_000)] * 3, monkeypatch)
    assert d.energy_j == pytest.approx(300.0 * 15)  # 4500 J by power integration, not 0 J
    assert d.method == Method.POWER_INTEGRATION
    assert Flag.COUNTER_INCONSISTENT in d.flags


def test_counter_reset_skips_only_that_interval(monkeypatch):
    # +1500 J, then the counter restarts at 1 mJ (driver reload), then +1500 J; power 300 W throughout.
    # Only the backwards interval is skipped (None, flag reset): 1500 + 1500 = 3000 J by the counter,
    # coverage 10 s of 15 s; never the whole device by power integration.
    gpu = FakeGpu(UUID, 0, energy_mj=5_000_000, power_mw=300_000)
    d = _job(gpu, [(1_500_000, 300_000), (-1, 300_000), (1_500_000, 300_000)], monkeypatch)
    assert d.energy_j == pytest.approx(3000.0)
    assert d.method == Method.COUNTER and Flag.COUNTER_INCONSISTENT not in d.flags
    assert d.resets == 1 and "reset" in d.flags
    assert d.coverage == pytest.approx(10.0 / 15.0)


def test_runaway_counter_above_the_power_limit_uses_power_for_that_interval(monkeypatch):
    # 200 W for 10 s by power, but the counter claims 2000 J then 50 000 J (5000 W mean) on a card
    # whose enforced limit is 400 W: 50 000 J > (400 x 1.1 + 5) W x 10 s + 0.001 J = 4450.001 J ->
    # runaway: that interval by power, 200 W x 10 s = 2000 J; the first keeps its counter 2000 J.
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=200_000, limit_mw=400_000)
    d = _job(gpu, [(2_000_000, 200_000), (50_000_000, 200_000)], monkeypatch, dt=10.0)
    assert d.energy_j == pytest.approx(4000.0)
    assert d.method == Method.POWER_INTEGRATION
    assert {"counter_runaway", Flag.COUNTER_INCONSISTENT} <= set(d.flags)


def test_counter_within_tolerance_is_trusted(monkeypatch):
    # power 300 W x 5 s = 1500 J by the trapezoid; tolerance = 0.001 J + 5 W x 5 s + 0 + 0.1 x 1500 J
    # = 175.001 J. A counter delta of 1600 J (100 J off) agrees: the counter's 1600 J is used.
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=300_000)
    d = _job(gpu, [(1_600_000, 300_000)], monkeypatch)
    assert d.energy_j == pytest.approx(1600.0)
    assert d.method == Method.COUNTER and Flag.COUNTER_INCONSISTENT not in d.flags


def test_moving_counter_beyond_tolerance_is_kept_over_averaged_power(monkeypatch):
    # 1700 J by the counter vs 300 W x 5 s = 1500 J by the (1 s averaged) power: |1700 - 1500| = 200 J
    # > 0.001 + 25 + 0.1 x 1700 = 195.001 J, but the counter moved: it is kept, 1700 J, method
    # counter, flagged power_disagrees (not corrected).
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=300_000)
    d = _job(gpu, [(1_700_000, 300_000)], monkeypatch)
    assert d.energy_j == pytest.approx(1700.0)
    assert d.method == Method.COUNTER
    assert "power_disagrees" in d.flags and Flag.COUNTER_INCONSISTENT not in d.flags


def test_step_load_on_hopper_averaged_power_lags_counter_wins(monkeypatch):
    # H100: power.draw is a 1 s average. Load steps 100 W -> 700 W just before the sample at 1 s:
    # the counter saw 100 W x 0.9 s + 700 W x 0.1 s = 160 J; the averaged power read 100 W then 160 W,
    # trapezoid (100 + 160) / 2 x 1 s = 130 J; tolerance 0.001 + 5 x 1 + |160 - 100| / 2 x 1 +
    # 0.1 x 160 = 51.001 J, |160 - 130| = 30 J -> agree. Next second at
    # 700 W: counter 700 J, averaged power 160 -> 700 W, trapezoid 430 J; tolerance 0.001 + 5 + 270 +
    # 70 = 345.001 J, |700 - 430| = 270 J -> agree. Third second: counter 700 J, power 700/700 W,
    # trapezoid 700 J. Total by the counter 1560 J (the trapezoid would say 1260 J).
    gpu = FakeGpu(UUID, 0, name="NVIDIA H100 80GB HBM3", energy_mj=0, power_mw=100_000, limit_mw=700_000)
    d = _job(gpu, [(160_000, 160_000), (700_000, 700_000), (700_000, 700_000)], monkeypatch, dt=1.0)
    assert d.energy_j == pytest.approx(1560.0) and d.method == Method.COUNTER


def test_counter_stuck_for_one_interval_only_that_interval_by_power(monkeypatch):
    # 250 W for 3 x 4 s; the counter moves 1000 J, sticks (0 J) for one interval, moves 1000 J again
    # without catching up. Interval 2 is charged 250 W x 4 s = 1000 J by power, flagged; the others
    # keep the counter: 1000 + 1000 + 1000 = 3000 J; methods counter + power_integration (worst shown).
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=250_000)
    d = _job(gpu, [(1_000_000, 250_000), (0, 250_000), (1_000_000, 250_000)], monkeypatch, dt=4.0)
    assert d.energy_j == pytest.approx(3000.0)
    assert d.method == Method.POWER_INTEGRATION
    assert {"counter_stuck", Flag.COUNTER_INCONSISTENT} <= set(d.flags)


def test_runaway_counter_without_a_power_limit_is_kept(monkeypatch):
    # no enforced power limit readable: nothing says 5000 W is impossible; the counter moved, so it
    # is kept (2000 + 50 000 J = 52 000 J), flagged power_disagrees for the interval that disagrees.
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=200_000, limit_mw=None)
    d = _job(gpu, [(2_000_000, 200_000), (50_000_000, 200_000)], monkeypatch, dt=10.0)
    assert d.energy_j == pytest.approx(52_000.0) and d.method == Method.COUNTER
    assert "power_disagrees" in d.flags


def test_changing_power_widens_the_tolerance():
    # power 100 W -> 300 W over 10 s: trapezoid 2000 J; sampling error |300-100|/2 x 10 = 1000 J
    tol = cross_check_tolerance_j(10.0, 100.0, 300.0, 2900.0, 2000.0, resolution_j=1e-3, power_accuracy_w=5.0)
    assert tol == pytest.approx(1e-3 + 50.0 + 1000.0 + 0.1 * 2900.0)  # 1340.001 J
    c = counter_series([(0.0, 0), (10.0, 2_900_000_000)], None)  # 2900 J: a ramp can do that
    out, bad = cross_check_counter(c, [(0.0, 100.0), (10.0, 300.0)], resolution_j=1e-3, power_accuracy_w=5.0)
    assert bad == [] and out.total_j == pytest.approx(2900.0)


def test_cross_check_needs_aligned_samples():
    c = counter_series([(0.0, 0), (5.0, 10), (10.0, 20)], None)
    with pytest.raises(ValueError, match="2 samples for 2 counter intervals"):
        cross_check_counter(c, [(0.0, 1.0), (5.0, 1.0)])


def test_missing_power_keeps_counter(monkeypatch):
    # power not supported beside the counter: nothing to check against; counter trusted as before
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=None)
    d = _job(gpu, [(1_000_000, None)], monkeypatch)
    assert d.energy_j == pytest.approx(1000.0) and d.method == Method.COUNTER


def test_amdsmi_counter_stuck_while_socket_power_reads_300_w(tmp_path):
    # the same rule on AMD SMI (amdgpu's hwmon has no energy file: tests/fakes/drm.py): the MI300X's
    # accumulator sticks while current_socket_power reads 300 W: 300 W x 10 s = 3000 J by power
    from slurm_energy.devices.gpu.drm import resolve_drm_gpus
    from slurm_energy.sampling.readers.amdsmi_reader import AmdSmiReader
    from slurm_energy.sampling.readers.drm_hwmon import DrmHwmonReader
    from tests.fakes.amdsmi import FakeAmdSmi
    from tests.fakes.amdsmi import FakeGpu as SmiGpu
    from tests.fakes.drm import MI300X_HWMON, FakeSysfs

    fs = FakeSysfs(tmp_path / "sys")
    fs.gpu("0000:c1:00.0", "1002:74a1", "amdgpu", card=1, render=128, hwmon=dict(MI300X_HWMON))
    hw = DrmHwmonReader(resolve_drm_gpus(drm_root=str(fs.drm_root), kfd_root=str(fs.kfd_root), slurm_job_gpus="0"),
                        str(fs.drm_root), str(fs.kfd_root))
    g = SmiGpu("0000:c1:00.0")
    g.energy_accumulator, g.current_socket_power = 457_516, 300  # stuck at 7 J (15.3 uJ counts)
    r = AmdSmiReader(hw, amdsmi_module=FakeAmdSmi([g]))
    rows = []
    for k in range(3):
        rows.append({"t": T0 + 5 * k, "kind": "sample", "job": {"cpu_time_s": float(k), "pids": [1]},
                     "node": {"cpu_busy_s": float(k), "cpu_total_s": 2.0 * k, "ncpu": 2},
                     "readings": [x.to_dict() for x in r.read()]})
    (d,) = summarise_node(rows, job_id="7", node="n1", start_time=T0, end_time=T0 + 10).devices
    assert d.energy_j == pytest.approx(300.0 * 10)  # 3000 J by power, not the counter's 0 J
    assert d.method == Method.POWER_INTEGRATION and "counter_stuck" in d.flags


def test_counter_that_updates_late_and_catches_up_is_trusted(monkeypatch):
    # 60 W, 0.5 s samples: 30 J per interval by power. The counter shows 24 J then 36 J (it updated
    # 100 ms late): interval 0 alone is 6 J off > 0.001 + 5 x 0.5 + 0 + 0.1 x 30 = 5.501 J, but both
    # intervals together agree (60 J vs 60 J): the counter is trusted, 60 J, method counter.
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=60_000)
    d = _job(gpu, [(24_000, 60_000), (36_000, 60_000)], monkeypatch, dt=0.5)
    assert d.energy_j == pytest.approx(60.0) and d.method == Method.COUNTER
    assert Flag.COUNTER_INCONSISTENT not in d.flags


def test_counter_short_twice_in_a_row_is_kept_and_flagged(monkeypatch):
    # 24 J then 24 J against 30 J + 30 J: 48 vs 60 J, 12 J off > 2 x 5.501 J, not settled; the
    # counter moved both times: kept, 48 J, method counter, flagged power_disagrees.
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=60_000)
    d = _job(gpu, [(24_000, 60_000), (24_000, 60_000)], monkeypatch, dt=0.5)
    assert d.energy_j == pytest.approx(48.0) and d.method == Method.COUNTER
    assert "power_disagrees" in d.flags


def test_stuck_counter_that_catches_up_next_interval_is_trusted(monkeypatch):
    # 60 W, 0.5 s samples: the counter shows 0 J then 60 J (its update came one sample late); alone
    # interval 0 is stuck, together 60 J vs 60 J agree: the counter is trusted, 60 J, no flag.
    gpu = FakeGpu(UUID, 0, energy_mj=0, power_mw=60_000)
    d = _job(gpu, [(0, 60_000), (60_000, 60_000)], monkeypatch, dt=0.5)
    assert d.energy_j == pytest.approx(60.0) and d.method == Method.COUNTER
    assert "counter_stuck" not in d.flags

"""Integration of counter / power / modelled-power series into per-interval energies (J)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_energy.accounting.integrate import unavailable_series
from slurm_energy.sampling.readers.base import Reading
from tests.helpers.series_points import counter_series, intervals, mean_power_series, power_series, series_from_readings


def test_counter_plain_deltas():
    # counter 1_000_000 -> 6_000_000 -> 16_000_000 uJ over t = 0, 5, 10 s
    # deltas 5 J and 10 J -> total 15 J over 10 s measured
    s = counter_series([(0.0, 1_000_000), (5.0, 6_000_000), (10.0, 16_000_000)], max_range_uj=None)
    assert [iv.energy_j for iv in intervals(s)] == [pytest.approx(5.0), pytest.approx(10.0)]
    assert s.total_j == pytest.approx(15.0)
    assert s.measured_s == pytest.approx(10.0)
    assert (s.wraps, s.resets, s.dropped) == (0, 0, 0)


def test_counter_wrap_unwrapped_with_zone_range():
    # range 262_143_328_850 uJ (a real Intel package range). prev = range - 2_000_000 uJ,
    # cur = 3_000_000 uJ -> delta = 3e6 + range - (range - 2e6) = 5_000_000 uJ = 5 J
    rng = 262_143_328_850
    s = counter_series([(0.0, rng - 2_000_000), (5.0, 3_000_000)], max_range_uj=rng)
    assert intervals(s)[0].energy_j == pytest.approx(5.0)
    assert s.wraps == 1
    assert "wrap" in intervals(s)[0].flags
    assert "possible_multiple_wrap" not in s.flags


def test_counter_possible_multiple_wrap_flagged():
    # range 100 J (1e8 uJ), max power 10 W -> counter can wrap every 100 J / 10 W = 10 s.
    # gap of 25 s > 10 s: flagged. Value 20e6 -> 30e6 uJ: 10 J single-wrap-free delta kept.
    s = counter_series([(0.0, 20_000_000), (25.0, 30_000_000)], max_range_uj=100_000_000, max_power_w=10.0)
    assert intervals(s)[0].energy_j == pytest.approx(10.0)
    assert s.flags == ["possible_multiple_wrap"]
    # gap of 9 s < 10 s: not flagged
    s2 = counter_series([(0.0, 20_000_000), (9.0, 30_000_000)], max_range_uj=100_000_000, max_power_w=10.0)
    assert s2.flags == []


def test_counter_backwards_without_range_is_reset_not_negative():
    # 10 J -> 2 J (backwards, no range): reset, interval skipped; then 2 J -> 7 J = 5 J.
    s = counter_series([(0.0, 10_000_000), (5.0, 2_000_000), (10.0, 7_000_000)], max_range_uj=None)
    assert intervals(s)[0].energy_j is None
    assert "reset" in intervals(s)[0].flags
    assert intervals(s)[1].energy_j == pytest.approx(5.0)
    assert (s.resets, s.dropped) == (1, 1)
    assert s.total_j == pytest.approx(5.0)
    assert s.measured_s == pytest.approx(5.0)  # only (5, 10] measured


def test_counter_backwards_with_unreadable_range_drops_interval():
    s = counter_series([(0.0, 10_000_000), (5.0, 2_000_000)], max_range_uj=None, range_unreadable=True)
    assert intervals(s)[0].energy_j is None
    assert s.flags == ["range_unreadable"]
    assert (s.resets, s.dropped) == (0, 1)
    assert s.total_j is None  # nothing measured: None, never 0


def test_counter_missing_reading_drops_both_adjacent_intervals():
    # None at t=5: (0,5] and (5,10] dropped; (10,15] = 3 J
    s = counter_series([(0, 0), (5, None), (10, 4_000_000), (15, 7_000_000)], max_range_uj=None)
    assert [iv.energy_j for iv in intervals(s)] == [None, None, pytest.approx(3.0)]
    assert s.dropped == 2
    assert s.flags == ["missing_reading"]


def test_counter_rejects_nonpositive_range():
    with pytest.raises(ValueError, match="max_range_uj"):
        counter_series([(0, 1), (1, 2)], max_range_uj=0)


def test_power_trapezoid():
    # (100 + 200)/2 W x 5 s = 750 J; (200 + 200)/2 W x 10 s = 2000 J -> 2750 J
    s = power_series([(0.0, 100.0), (5.0, 200.0), (15.0, 200.0)])
    assert [iv.energy_j for iv in intervals(s)] == [pytest.approx(750.0), pytest.approx(2000.0)]
    assert s.total_j == pytest.approx(2750.0)


def test_power_none_dropped_and_negative_rejected():
    s = power_series([(0.0, 100.0), (5.0, None)])
    assert s.total_j is None and s.dropped == 1
    with pytest.raises(ValueError, match=r"points\[1\].power_w"):
        power_series([(0.0, 100.0), (5.0, -1.0)])


def test_mean_power_uses_value_at_interval_end():
    # first value ignored; 50 W x 5 s = 250 J; 80 W x 10 s = 800 J
    s = mean_power_series([(0.0, 999.0), (5.0, 50.0), (15.0, 80.0)])
    assert [iv.energy_j for iv in intervals(s)] == [pytest.approx(250.0), pytest.approx(800.0)]


def test_each_method_on_one_interval():
    assert counter_series([(0, 0), (1, 1_000_000)], None).total_j == pytest.approx(1.0)
    assert power_series([(0, 2.0), (1, 4.0)]).total_j == pytest.approx(3.0)  # (2+4)/2 x 1
    assert mean_power_series([(0, 2.0), (1, 4.0)]).total_j == pytest.approx(4.0)  # 4 x 1
    u = unavailable_series(np.array([0.0, 1.0]))
    assert u.total_j is None and u.dropped == 1 and u.flags == ["unavailable"]


def test_series_from_readings_method_change_mid_job():
    # counter 0 -> 5 J over (0,5]; counter becomes EACCES (unavailable) at t=10: (5,10] dropped
    # as method_changed; (10,15] unavailable -> dropped. total 5 J, coverage 5 s of 15 s.
    rs = [
        (0.0, Reading("cpu", "intel-rapl:0", "counter", energy_uj=0, max_energy_range_uj=10**9)),
        (5.0, Reading("cpu", "intel-rapl:0", "counter", energy_uj=5_000_000, max_energy_range_uj=10**9)),
        (10.0, Reading("cpu", "intel-rapl:0", "unavailable", flags=["eacces"])),
        (15.0, Reading("cpu", "intel-rapl:0", "unavailable", flags=["eacces"])),
    ]
    s = series_from_readings(rs)
    assert [iv.energy_j for iv in intervals(s)] == [pytest.approx(5.0), None, None]
    assert s.total_j == pytest.approx(5.0)
    assert s.measured_s / (s.t1[-1] - s.t0[0]) == pytest.approx(5.0 / 15.0)  # measured 5 s of the 15 s span
    assert {"method_changed", "eacces", "unavailable"} <= set(s.flags)


def test_series_from_readings_uses_reading_range_for_wrap():
    # range 1e9 uJ; 999e6 -> 1e6: delta = 1e6 + 1e9 - 999e6 = 2e6 uJ = 2 J
    rs = [
        (0.0, Reading("ram", "intel-rapl:0:0", "counter", energy_uj=999_000_000, max_energy_range_uj=10**9)),
        (5.0, Reading("ram", "intel-rapl:0:0", "counter", energy_uj=1_000_000, max_energy_range_uj=10**9)),
    ]
    s = series_from_readings(rs)
    assert s.total_j == pytest.approx(2.0) and s.wraps == 1


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.lists(st.one_of(st.none(), st.integers(0, 10**9 - 1)), min_size=2, max_size=30),
       st.one_of(st.none(), st.just(10**9)))
def test_property_counter_never_negative_and_bounded(values, rng):
    # any sequence of readings, with or without a range: no interval is negative, and with a
    # range no interval exceeds one full range (1e9 uJ = 1000 J)
    s = counter_series([(float(i), v) for i, v in enumerate(values)], max_range_uj=rng)
    for iv in intervals(s):
        assert iv.energy_j is None or 0.0 <= iv.energy_j <= 1000.0
    assert s.dropped == sum(iv.energy_j is None for iv in intervals(s))


# --------------------------------------------------------------------------------------------------
# The array integration (accounting/integrate.py) against a scalar oracle: the interval-by-interval
# rules as the package wrote them before the one path on arrays (counter deltas in uJ -> J, one wrap
# unwrapped with the range, a backwards step without a range a reset, with an unreadable range a drop,
# a missing endpoint or a non-increasing time a drop; power by the trapezoid, E = (P0 + P1) / 2 x dt).

def oracle_counter(points, max_range_uj, max_power_w=None, range_unreadable=False):
    """[(energy J or None, sorted flags)] per interval, wraps, resets."""
    wrap_s = (max_range_uj / 1e6) / max_power_w if max_range_uj and max_power_w else None
    out, wraps, resets = [], 0, 0
    for (t0, e0), (t1, e1) in itertools.pairwise(points):
        if t1 <= t0:
            out.append((None, ["non_increasing_time"]))
            continue
        if e0 is None or e1 is None:
            out.append((None, ["missing_reading"]))
            continue
        flags = ["possible_multiple_wrap"] if wrap_s is not None and t1 - t0 > wrap_s else []
        if e1 >= e0:
            out.append(((e1 - e0) / 1e6, flags))
        elif max_range_uj is not None and e1 + max_range_uj - e0 >= 0:
            wraps += 1
            out.append(((e1 + max_range_uj - e0) / 1e6, sorted(flags + ["wrap"])))
        elif max_range_uj is None and range_unreadable:
            out.append((None, sorted(flags + ["range_unreadable"])))
        else:
            resets += 1
            out.append((None, sorted(flags + ["reset"])))
    return out, wraps, resets


def oracle_power(points):
    out = []
    for (t0, p0), (t1, p1) in itertools.pairwise(points):
        if t1 <= t0:
            out.append((None, ["non_increasing_time"]))
        elif p0 is None or p1 is None:
            out.append((None, ["missing_reading"]))
        else:
            out.append(((p0 + p1) / 2.0 * (t1 - t0), []))
    return out


times = st.lists(st.sampled_from([0.0, 0.5, 5.0, 30.0, -1.0]), min_size=1, max_size=30).map(
    lambda steps: [sum(steps[:i + 1]) for i in range(len(steps))])


@settings(max_examples=300, deadline=None)
@given(times, st.data(), st.sampled_from([None, 10**8, 262_143_328_850]), st.sampled_from([None, 5.0, 400.0]),
       st.booleans())
def test_counter_series_matches_the_scalar_rules(t, data, rng, max_w, unreadable):
    values = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 2 * 10**8)), min_size=len(t), max_size=len(t)))
    points = list(zip(t, values))
    want, wraps, resets = oracle_counter(points, rng, max_w, unreadable)
    got = counter_series(points, rng, max_w, unreadable)
    assert [(iv.energy_j, iv.flags) for iv in intervals(got)] == want
    assert (got.wraps, got.resets, got.dropped) == (wraps, resets, sum(e is None for e, _ in want))


@settings(max_examples=300, deadline=None)
@given(times, st.data())
def test_power_series_matches_the_trapezoid(t, data):
    values = data.draw(st.lists(st.one_of(st.none(), st.floats(0, 1000)), min_size=len(t), max_size=len(t)))
    points = list(zip(t, values))
    got = power_series(points)
    assert [(iv.energy_j, iv.flags) for iv in intervals(got)] == oracle_power(points)

"""The array integration (accounting/integrate.py) against a scalar oracle: the interval-by-interval
rules as the package wrote them before the one path on arrays (counter deltas in uJ -> J, one wrap
unwrapped with the range, a backwards step without a range a reset, with an unreadable range a drop,
a missing endpoint or a non-increasing time a drop; power by the trapezoid, E = (P0 + P1) / 2 x dt)."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.series_points import counter_series, intervals, power_series


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

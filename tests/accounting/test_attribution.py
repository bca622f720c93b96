"""Job shares of node/GPU energy; jobs on one node never sum to more than the node."""

import numpy as np
import pytest

from slurm_energy.accounting.attribution import (
    POLICIES,
    attribute_series,
    cpu_shares,
    gpu_process_share,
    mig_fraction,
    ram_shares,
)
from slurm_energy.accounting.formulas import class_energy_j
from slurm_energy.accounting.integrate import floats
from tests.helpers.series_points import counter_series, intervals


def cpu_share(job, node):
    """One interval's :func:`cpu_shares` (None = unknown)."""
    v = float(cpu_shares(floats([job]), floats([node]))[0])
    return None if v != v else v


def test_cpu_share_ratio_clamp_and_unknown():
    assert cpu_share(3.0, 12.0) == pytest.approx(0.25)  # 3 CPU-s of 12 busy CPU-s
    assert cpu_share(13.0, 12.0) == 1.0  # read at slightly different instants: clamped
    assert cpu_share(0.0, 0.0) == 0.0  # idle node: nothing to share
    assert cpu_share(None, 12.0) is None
    assert cpu_share(3.0, None) is None
    assert cpu_share(-1.0, 12.0) is None  # counter went backwards: unknown, not 0


def test_ram_share():
    # 4 GiB of 16 GiB used; unknown job memory; a node using 0 bytes: no basis
    got = ram_shares(floats([4 * 2**30, None, 1]), floats([16 * 2**30, 16, 0]))
    assert got[0] == pytest.approx(0.25)
    assert np.isnan(got[1]) and np.isnan(got[2])


def test_gpu_process_share():
    # job pids 10, 11 at 0.30 + 0.10 = 0.40 of total 0.40 + 0.60 = 1.00 -> 0.4
    util = {10: 0.30, 11: 0.10, 20: 0.60}
    assert gpu_process_share({10, 11}, util) == pytest.approx(0.4)
    assert gpu_process_share({20}, util) == pytest.approx(0.6)
    assert gpu_process_share({99}, util) == 0.0
    assert gpu_process_share({10}, None) is None
    assert gpu_process_share({10}, {}) is None  # no process used it: no basis
    with pytest.raises(ValueError, match=r"proc_util\[10\].*got 30"):
        gpu_process_share({10}, {10: 30})


def test_mig_fraction():
    assert mig_fraction(1, 7) == pytest.approx(1 / 7)
    assert mig_fraction(3, 7) == pytest.approx(3 / 7)
    with pytest.raises(ValueError, match="slice_units"):
        mig_fraction(8, 7)
    with pytest.raises(ValueError, match="total_units"):
        mig_fraction(1, 0)


def test_policies_named():
    assert POLICIES == ("shared", "exclusive_whole_node", "utilisation_weighted")


def test_utilisation_weighted_model():
    # n=4 cores x u=0.5 x P=10 W/core x 3600 s = 72_000 J
    assert class_energy_j(4, 0.5, 10.0, 3600.0) == pytest.approx(72_000.0)
    with pytest.raises(ValueError, match="util"):
        class_energy_j(4, 1.5, 10.0, 1.0)


def test_two_jobs_on_one_node_never_exceed_node():
    # node package: 100 J in (0,5], 200 J in (5,10]
    node = counter_series([(0, 0), (5, 100_000_000), (10, 300_000_000)], max_range_uj=None)
    node_busy = [10.0, 8.0]  # CPU-s busy per interval
    job_a_cpu = [6.0, 2.0]
    job_b_cpu = [4.0, 6.0]  # a+b = busy in both intervals
    a = attribute_series(node, [cpu_share(j, n) for j, n in zip(job_a_cpu, node_busy)])
    b = attribute_series(node, [cpu_share(j, n) for j, n in zip(job_b_cpu, node_busy)])
    # A: 100 x 6/10 + 200 x 2/8 = 60 + 50 = 110 J; B: 100 x 4/10 + 200 x 6/8 = 40 + 150 = 190 J
    assert a.total_j == pytest.approx(110.0)
    assert b.total_j == pytest.approx(190.0)
    assert a.total_j + b.total_j <= node.total_j + 1e-9  # 300 J
    for ia, ib, iv in zip(intervals(a), intervals(b), intervals(node)):
        assert ia.energy_j + ib.energy_j <= iv.energy_j + 1e-9


def test_unknown_share_drops_interval_not_zero():
    node = counter_series([(0, 0), (5, 100_000_000), (10, 300_000_000)], max_range_uj=None)
    job = attribute_series(node, [0.5, None])
    # 100 J x 0.5 = 50 J; second interval unknown -> None (dropped), not 0
    assert [iv.energy_j for iv in intervals(job)] == [pytest.approx(50.0), None]
    assert job.total_j == pytest.approx(50.0)
    assert "share_unknown" in job.flags and job.dropped == 1


def test_exclusive_policy_charges_whole_node():
    node = counter_series([(0, 0), (5, 100_000_000), (10, 300_000_000)], max_range_uj=None)
    job = attribute_series(node, [0.1, 0.1], policy="exclusive_whole_node")
    assert job.total_j == pytest.approx(300.0)  # 100 + 200 J, shares ignored
    with pytest.raises(ValueError, match="policy"):
        attribute_series(node, [0.1, 0.1], policy="utilisation_weighted")
    with pytest.raises(ValueError, match="one share per interval"):
        attribute_series(node, [0.1])


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(
    st.lists(
        st.tuples(st.floats(0, 1e4), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
        min_size=1,
        max_size=20,
    )
)
def test_property_three_jobs_never_exceed_node(rows):
    # per interval: node energy E (J) and three jobs' CPU-time fractions a, b, c of the busy time,
    # normalised so a + b + c <= 1 (consistent counters); node busy = 10 CPU-s.
    pts, t, e_uj = [(0.0, 0)], 0.0, 0
    fracs = []
    for e, a, b, c in rows:
        s = max(1.0, a + b + c)
        fracs.append((a / s, b / s, c / s))
        t += 5.0
        e_uj += int(e * 1e6)
        pts.append((t, e_uj))
    node = counter_series(pts, max_range_uj=None)
    jobs = [attribute_series(node, [cpu_share(f[k] * 10.0, 10.0) for f in fracs]) for k in range(3)]
    for i, iv in enumerate(intervals(node)):
        assert sum(intervals(j)[i].energy_j for j in jobs) <= iv.energy_j * (1 + 1e-9) + 1e-9

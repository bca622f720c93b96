"""Bounded power traces (accounting.trace): a node's trace of bucket means, the job's summed trace
and the nodes' band, and which nodes keep their own trace in a merged record. Hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from slurm_energy.accounting.merge import merge_records
from slurm_energy.accounting.trace import (
    TRACE_POINTS,
    bucket_means,
    bucket_trace,
    chosen_nodes,
    job_trace,
)
from slurm_energy.model import JobRecord, NodeSummary
from tests.helpers.jobrecord_factory import device, job_record

NAN = np.nan


def test_short_trace_is_kept_row_for_row():
    w = np.array([[100.0, NAN, 3.0], [110.0, 250.0, 3.5]])
    assert bucket_trace([5.0, 10.0], [5.0, 5.0], w) == [[5.0, 100.0, None, 3.0], [10.0, 110.0, 250.0, 3.5]]


def test_bucket_trace_time_weighted_means_none_kept():
    # 4 rows of 10 s ending at 10, 20, 30, 40 s; 2 buckets of (0, 20], (20, 40]:
    # CPU: (100 W x 10 s + 200 W x 10 s) / 20 s = 150 W; then only the 300 W row has a value: 300 W
    w = np.array([[100.0, NAN, NAN], [200.0, NAN, NAN], [300.0, NAN, NAN], [NAN, NAN, NAN]])
    assert bucket_trace([10.0, 20.0, 30.0, 40.0], [10.0] * 4, w, max_points=2) == [
        [20.0, 150.0, None, None], [40.0, 300.0, None, None]]


def test_bucket_means_keep_the_energy():
    # rows ending at 5, 20, 30, 40 s after 5, 15, 10, 10 s at 100, 200, 300, 400 W: 10,500 J
    # buckets (0, 20], (20, 40]: (500 + 3000) J / 20 s = 175 W, (3000 + 4000) J / 20 s = 350 W
    t, dt = np.array([5.0, 20.0, 30.0, 40.0]), np.array([5.0, 15.0, 10.0, 10.0])
    w = np.column_stack([[100.0, 200.0, 300.0, 400.0], [NAN] * 4, [NAN] * 4])
    b, mean, last = bucket_means(t, dt, w, 0.0, 40.0, 2)
    assert b.tolist() == [0, 0, 1, 1]
    assert mean[:, 0].tolist() == [175.0, 350.0]
    assert (mean[:, 0] * 20.0).sum() == pytest.approx(10_500.0)  # J
    assert last.tolist() == [20.0, 40.0]


def test_a_day_at_5_s_gives_at_most_240_rows():
    n = 17_280
    t = 5.0 * np.arange(1, n + 1)
    w = np.column_stack([np.full(n, 150.0), np.full(n, 400.0), np.full(n, 12.0)])
    rows = bucket_trace(t, np.full(n, 5.0), w)
    assert len(rows) == TRACE_POINTS == 240
    assert rows[0] == [360.0, 150.0, 400.0, 12.0]  # 86,400 s / 240 = 360 s buckets: 72 rows each
    assert rows[-1][0] == 86_400.0


def _ns(name: str, trace, energy_j: float | None = None) -> NodeSummary:
    devs = [device("cpu", energy_j, node=name)] if energy_j is not None else []
    return NodeSummary(node=name, job_id="1", start_time=0.0, end_time=20.0, power_trace=trace, devices=devs)


def test_job_trace_sums_classes_and_bands_nodes():
    a = _ns("a", [[10.0, 100.0, 300.0, None], [20.0, 120.0, 320.0, None]])
    b = _ns("b", [[10.0, 50.0, None, 5.0], [20.0, 70.0, None, 5.0]])
    jt = job_trace([a, b], 0.0, 20.0, n=2)
    assert jt is not None
    assert jt.t == [10.0, 20.0] and jt.bucket_s == 10.0
    # CPU 100 + 50 W, GPU only a's, RAM only b's
    assert jt.sum_w == [[150.0, 300.0, 5.0], [190.0, 320.0, 5.0]]
    # node totals: a 400 W then 440 W; b 55 W then 75 W
    assert jt.node_min_w == [55.0, 75.0] and jt.node_max_w == [400.0, 440.0]
    assert jt.nodes_n == [2, 2] and jt.nodes == 2


def test_job_trace_none_without_traces():
    assert job_trace([_ns("a", [])], 0.0, 20.0) is None


def test_chosen_nodes_highest_lowest_median_first():
    nodes = [_ns(f"n{k}", [[10.0, 1.0, None, None]], e) for k, e in
             enumerate([500.0, 100.0, 900.0, 300.0, 700.0, 200.0], start=1)]
    # highest n3 (900 J), lowest n2 (100 J), median of 6 sorted (100, 200, 300, 500, 700, 900)[3] = n1 (500 J),
    # first n1: three picks; the fourth is the next in name order not yet chosen, n4
    assert chosen_nodes(nodes) == ["n1", "n2", "n3", "n4"]


def test_merge_of_many_nodes_keeps_a_bounded_trace():
    recs = [job_record(node=f"n{k}", expected=[f"n{i}" for i in range(1, 7)], start=0.0, end=20.0,
                       devices=[device("cpu", 1000.0 * k, node=f"n{k}")],
                       node_fields={"power_trace": [[10.0, 10.0 * k, None, None], [20.0, 10.0 * k, None, None]]})
            for k in range(1, 7)]
    merged = merge_records(recs)
    jt = merged.job_trace
    assert jt is not None and jt.nodes == 6
    # 6 nodes at 10, 20, ... 60 W: 210 W summed; the band 10 to 60 W
    assert jt.sum_w[-1] == [210.0, None, None]
    assert jt.node_min_w[-1] == 10.0 and jt.node_max_w[-1] == 60.0
    # highest n6, lowest n1, median n4 (sorted[3]), first n1: then n2 by name
    assert jt.shown_nodes == ["n1", "n2", "n4", "n6"]
    assert [ns.node for ns in merged.nodes if ns.power_trace] == ["n1", "n2", "n4", "n6"]
    # the node records keep their own traces: the merge copies
    assert all(r.nodes[0].power_trace for r in recs)
    # energies unchanged by it: n1..n6 at 1,000 x k J
    assert sum(d.energy_j for ns in merged.nodes for d in ns.devices) == 21_000.0
    assert JobRecord.model_validate_json(merged.model_dump_json()).job_trace == jt


def test_one_node_has_no_job_trace_and_old_records_read():
    rec = job_record(node_fields={"power_trace": [[10.0, 1.0, None, None]]})
    assert merge_records([rec]).job_trace is None
    old = rec.model_dump()
    old.pop("job_trace")  # a record stored before the field
    assert JobRecord.model_validate(old).job_trace is None

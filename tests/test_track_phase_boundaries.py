"""track() outside Slurm takes a reading at each phase boundary (its sampler runs in this process
tree), so a phase's energy is read at its edges, not cut from the sampling intervals around it;
``repr(result())`` says when phases were cut (flag ``interval_cut``)."""

from __future__ import annotations

import time

from slurm_energy import track
from slurm_energy.api import Result
from slurm_energy.model import WindowEnergy


def _busy(s):
    t = time.time() + s
    while time.time() < t:
        pass


def test_phase_edges_are_read_not_cut_from_a_long_interval(outside_slurm):
    # a 5 s interval, phases of 0.4-1 s: without boundary readings every edge would fall inside an
    # interval (the old result: a 1 s sleep charged 6.9 J, two identical epochs 12.0 and 7.2 J)
    with track(label="edges", out=str(outside_slurm), interval_s=5.0, pue=1.0, ci=100.0) as t:
        with t.phase("sleep"):
            time.sleep(1.0)
        for k in range(2):
            with t.phase(f"epoch {k}"):
                _busy(0.4)
    rec = t.record
    ph = {w.name: w for w in rec.phases}
    assert set(ph) == {"sleep", "epoch 0", "epoch 1"}
    for w in ph.values():
        assert "interval_cut" not in w.flags and "shorter_than_interval" not in w.flags, w
    # the sleep's edges are rows and its tree used no CPU in between. The CPU model charges the
    # tree TDP x (busy / total CPU-s) x dt x (tree CPU-s / busy) = TDP / ncpu x tree CPU-s, so a
    # phase's CPU energy is in proportion to its tree's CPU-s: an epoch 0.4 CPU-s, the sleep 0, or
    # a few 10 ms ticks of the tracker's own (one is <= 2.5 % of an epoch; a loaded 2-core machine
    # gave a fresh tester 10 %: 25 % allows ten). A cut from the 5 s interval around it would give
    # the 1 s sleep the epochs' mean power instead: more than a whole epoch's energy.
    e0 = ph["epoch 0"].energy_it_j["cpu"]
    assert e0 > 0 and ph["sleep"].energy_it_j["cpu"] <= 0.25 * e0
    assert "phases" in repr(t.result()) and "cut from sampling intervals" not in repr(t.result())


def test_repr_of_a_result_says_how_many_phases_were_cut():
    def w(name, flags):
        return WindowEnergy(kind="phase", name=name, start_time=0.0, end_time=1.0, flags=flags)

    r = Result(final=True, source="slurm store", it_kwh=0.001, elapsed_s=10.0,
               phases=[w("a", ["interval_cut"]), w("b", []), w("c", ["interval_cut", "shorter_than_interval"])])
    assert "[3 phases (2 cut from sampling intervals: flag interval_cut)]" in repr(r)

"""What ``slurm_energy.track`` costs the training script, beside its peer (no tracking at all).

Three numbers, same run:

* a mark: wall time of one ``with t.phase(...)`` (two marks written) and one ``t.stage(...)``,
  inside a sampled Slurm job (marks only: a temporary marks directory stands in for the Prolog's);
* the local sampler (outside Slurm): CPU time of the child sampler process over ``--seconds`` of a
  busy training loop, as a share of one core, and its start-up (``track().start()`` until the first
  sample is written);
* the training loop's own throughput with and without ``track`` around it (the peer: the same
  loop before and after, averaged), as a ratio. On a shared 2-core machine the ratio moves with
  other load by several %: run it a few times.

Usage: python benchmarks/track_cost.py [--seconds 10] [--marks 20000] [--interval 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from slurm_energy import track


def _loop(seconds: float) -> int:
    """A CPU-bound pure-Python 'training' loop; returns the iterations done."""
    n, end = 0, time.time() + seconds
    while time.time() < end:
        sum(i * i for i in range(200))
        n += 1
    return n


def bench_marks(n: int) -> tuple[float, float]:
    """(us per phase enter+exit, us per stage) with marks written to a file (Slurm mode)."""
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "1"))
        os.environ.update(SLURM_ENERGY_MARKS_DIR=root, SLURM_JOB_ID="1", SLURMD_NODENAME="b")
        try:
            with track() as t:
                assert t.mode == "slurm"
                t0 = time.perf_counter()
                for _ in range(n // 2):
                    with t.phase("p"):
                        pass
                t1 = time.perf_counter()
                for _ in range(n // 2):
                    t.stage(0.5)
                t2 = time.perf_counter()
        finally:
            for k in ("SLURM_ENERGY_MARKS_DIR", "SLURM_JOB_ID", "SLURMD_NODENAME"):
                os.environ.pop(k, None)
    return (t1 - t0) / (n // 2) * 1e6, (t2 - t1) / (n // 2) * 1e6


def bench_local(seconds: float, interval: float) -> dict:
    import psutil

    os.environ.pop("SLURM_JOB_ID", None)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        before = _loop(seconds)  # the peer: the same loop, no tracking (before and after: load drifts)
        t0 = time.perf_counter()
        t = track(label="bench", out=d, interval_s=interval, report=False).start()
        out["start_s"] = time.perf_counter() - t0
        child = psutil.Process(t._measure._proc.pid)
        c0 = child.cpu_times()
        tracked = _loop(seconds)
        c1 = child.cpu_times()
        t.stop()
        base = (before + _loop(seconds)) / 2
        out["sampler_core_share"] = ((c1.user + c1.system) - (c0.user + c0.system)) / seconds
        out["throughput_ratio"] = tracked / base
        out["samples"] = t.record.nodes[0].n_samples
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--marks", type=int, default=20000)
    ap.add_argument("--interval", type=float, default=1.0)
    a = ap.parse_args()
    phase_us, stage_us = bench_marks(a.marks)
    print(f"marks (Slurm mode): phase enter+exit {phase_us:.1f} us, stage {stage_us:.1f} us")
    r = bench_local(a.seconds, a.interval)
    print(f"local sampler (interval {a.interval:g} s): start {r['start_s']:.2f} s, "
          f"{r['sampler_core_share'] * 100:.2f} % of a core, {r['samples']} samples in {a.seconds:g} s")
    print(f"training loop throughput with track / without (peer): {r['throughput_ratio']:.3f}")


if __name__ == "__main__":
    main()

"""What ``slurm_energy.track`` costs the training script, beside its peer (no tracking at all).

Three numbers, same run:

* a mark: this thread's CPU time (user + system: wall time moves with a shared machine's load) of
  one ``with t.phase(...)`` (two marks written) and one ``t.stage(...)``, inside a sampled Slurm job
  (marks only: a temporary marks directory stands in for the Prolog's);
* the local sampler (outside Slurm): CPU time of the child sampler process over ``--seconds`` of a
  busy training loop, as a share of one core, and its start-up (``track().start()`` until the first
  sample is written);
* the training loop's own throughput with and without ``track`` around it (the peer: the same
  loop before and after, averaged), as a ratio. On a shared 2-core machine the ratio moves with
  other load by several %: run it a few times.

Usage: python benchmarks/track_cost.py [--seconds 10] [--marks 20000] [--interval 1]
       python benchmarks/track_cost.py --against OTHER_TREE [--rounds 3]   (before/after in one run:
       each round measures OTHER_TREE's slurm_energy, e.g. ``git archive main | tar -x -C /tmp/before``,
       then this tree's, in fresh processes; prints the medians and after/before)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# --against: TRACK_COST_TREE is the tree measured
sys.path.insert(0, os.environ.get("TRACK_COST_TREE") or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from slurm_energy import track

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def _loop(seconds: float) -> int:
    """A CPU-bound pure-Python 'training' loop; returns the iterations done."""
    n, end = 0, time.time() + seconds
    while time.time() < end:
        sum(i * i for i in range(200))
        n += 1
    return n


def bench_marks(n: int) -> tuple[float, float]:
    """(CPU us per phase enter+exit, CPU us per stage) with marks written to a file (Slurm mode)."""
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "1"))
        os.environ.update(SLURM_ENERGY_MARKS_DIR=root, SLURM_JOB_ID="1", SLURMD_NODENAME="b")
        try:
            with track() as t:
                assert t.mode == "slurm"
                t0 = time.thread_time()
                for _ in range(n // 2):
                    with t.phase("p"):
                        pass
                t1 = time.thread_time()
                for _ in range(n // 2):
                    t.stage(0.5)
                t2 = time.thread_time()
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
        # the child sampler: this process's child running slurm_energy.sampling.local (any version's tracker)
        (child,) = [p for p in psutil.Process().children() if "slurm_energy.sampling.local" in " ".join(p.cmdline())]
        c0 = child.cpu_times()
        tracked = _loop(seconds)
        c1 = child.cpu_times()
        t.stop()
        base = (before + _loop(seconds)) / 2
        out["sampler_core_share"] = ((c1.user + c1.system) - (c0.user + c0.system)) / seconds
        out["throughput_ratio"] = tracked / base
        out["samples"] = t.record.nodes[0].n_samples
    return out


def compare(a: argparse.Namespace) -> None:
    """Rounds of (``--against``'s tree, this tree), each in a fresh process; the medians side by side."""
    trees = {"before": os.path.abspath(a.against), "after": os.path.abspath(_HERE)}
    got: dict[str, list[dict]] = {k: [] for k in trees}
    for _ in range(a.rounds):
        for name, tree in trees.items():
            env = dict(os.environ, TRACK_COST_TREE=tree, PYTHONPATH=tree)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--json", "--seconds", str(a.seconds),
                                  "--marks", str(a.marks), "--interval", str(a.interval)],
                                 env=env, capture_output=True, text=True, check=True)
            got[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{a.rounds} rounds, medians; before = {trees['before']}, after = {trees['after']}")
    for key, unit in (("phase_us", "us"), ("stage_us", "us"), ("start_s", "s"), ("sampler_core_share", "core"),
                      ("throughput_ratio", "")):
        b = statistics.median(r[key] for r in got["before"])
        f = statistics.median(r[key] for r in got["after"])
        print(f"  {key:20s} before {b:10.4g} {unit:4s} after {f:10.4g} {unit:4s} after/before {f / b:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--marks", type=int, default=20000)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--against", help="another checkout's root: measure it and this one, alternately")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="one JSON line (what --against reads)")
    a = ap.parse_args()
    if a.against:
        compare(a)
        return
    phase_us, stage_us = bench_marks(a.marks)
    print(f"marks (Slurm mode): phase enter+exit {phase_us:.1f} us, stage {stage_us:.1f} us")
    r = bench_local(a.seconds, a.interval)
    if a.json:
        print(json.dumps(dict(r, phase_us=phase_us, stage_us=stage_us)))
        return
    print(f"local sampler (interval {a.interval:g} s): start {r['start_s']:.2f} s, "
          f"{r['sampler_core_share'] * 100:.2f} % of a core, {r['samples']} samples in {a.seconds:g} s")
    print(f"training loop throughput with track / without (peer): {r['throughput_ratio']:.3f}")


if __name__ == "__main__":
    main()

"""The finalizer's cost of the worst phase marks a job's user can write, against the job's length.

A user's marks file (at most ``sampling.marks.MAX_BYTES`` read) can hold ``MAX_PHASES`` phases, each
spanning nearly the whole job, and ``MAX_STAGES`` stages: every one is a window whose energy the
finalizer integrates over the job's attributed intervals. Builds that file for a job of ``--hours``
hours sampled every 5 s on 2 device classes (cpu 20 W, ram 2 W), then times, in CPU seconds
(process time: the machine is shared), in the same run:

* ``node_windows``: :func:`slurm_energy.accounting.phases.node_windows` as the finalizer runs it
  (each device's intervals read once into a cumulative energy function, two bisections a window);
* ``per_window_walk``: the rule before it, every window walking every interval of every device
  (``E x overlap / (t1 - t0)`` summed; skipped with ``--no-walk``: about 40 CPU-s at 24 h here),

checks both give the same energies, and prints the ratio. Run from the checkout:
``PYTHONPATH=. python benchmarks/marks_worst_case.py``.
"""

from __future__ import annotations

import argparse
import json
import time

from slurm_energy.accounting import phases as P
from slurm_energy.model import Method


def walk_energy(series, windows) -> dict[str, float]:
    """The per-window walk (the old rule), energy per class only."""
    out: dict[str, float] = {}
    for cls, _, ivs in series:
        out[cls] = out.get(cls, 0.0) + sum(ej * sum(max(0.0, min(t1, b) - max(t0, a)) for a, b in windows) / (t1 - t0)
                                           for t0, t1, ej in ivs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--no-walk", action="store_true", help="skip the per-window walk (the old rule)")
    args = ap.parse_args()
    dt, span = 5.0, args.hours * 3600.0
    n = int(span / dt)
    series = [("cpu", Method.COUNTER, [(i * dt, (i + 1) * dt, 100.0) for i in range(n)]),
              ("ram", Method.COUNTER, [(i * dt, (i + 1) * dt, 10.0) for i in range(n)])]
    step = span / (4 * P.MAX_PHASES)
    lines = [json.dumps({"t": 1.3 + step * k, "ev": "begin", "id": k, "name": f"p{k}"}) for k in range(P.MAX_PHASES)]
    lines += [json.dumps({"t": span * (k + 1) / (P.MAX_STAGES + 1) + 0.7, "ev": "stage",
                          "frac": (k + 1) / (P.MAX_STAGES + 1)}) for k in range(P.MAX_STAGES)]
    lines += [json.dumps({"t": span - 1.3 - step * k, "ev": "end", "id": k}) for k in range(P.MAX_PHASES)]
    marks = P.parse_marks(lines)
    c0 = time.process_time()
    ws = P.node_windows(series, marks, 0.0, span, dt)
    new = time.process_time() - c0
    print(f"job {args.hours:g} h, {n} intervals x 2 devices, {len(ws)} windows, marks {len(chr(10).join(lines))} bytes")
    print(f"node_windows      cpu_s={new:.3f}")
    if args.no_walk:
        return
    c0 = time.process_time()
    old = [walk_energy(series, [(w.start_time, w.end_time)]) for w in ws if w.kind in ("phase", "stage")]
    walk = time.process_time() - c0
    for w, o in zip([w for w in ws if w.kind in ("phase", "stage")], old):
        for c, e in o.items():
            assert abs((w.energy_it_j[c] or 0.0) - e) <= 1e-9 * max(1.0, e), (w.name, c, w.energy_it_j[c], e)
    print(f"per_window_walk   cpu_s={walk:.3f} (same energies)  ratio={walk / max(new, 1e-9):.0f}x")


if __name__ == "__main__":
    main()

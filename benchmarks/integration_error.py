"""Error of power integration vs an energy counter on synthetic bursty power traces.

A "true" power trace is simulated at 10 ms resolution (base load plus random bursts of random
length and height, the shape of a GPU training loop or a CPU job with I/O pauses). Its exact
energy is what a counter (RAPL energy_uj, NVML total energy) reports; we compare it with
``accounting.integrate.power_series`` (trapezoid over instantaneous samples) at 1, 5 and 15 s
sampling intervals, and with ``counter_series`` read at the same intervals: once with a real Intel
package range (262143328850 uJ; should be exact) and once with a deliberately small 2^32 uJ range
(wraps every ~12 s at the trace's peak power), to show the ``possible_multiple_wrap`` flag firing
where unwrapping can no longer be trusted. Prints a table of relative errors over random traces.

Usage: python benchmarks/integration_error.py [--traces 200] [--duration 1800] [--seed 1]
"""

from __future__ import annotations

import argparse

import numpy as np

from slurm_energy.accounting.integrate import counter_series, power_series

DT = 0.01  # s, resolution of the simulated "true" trace


def bursty_trace(rng: np.random.Generator, duration_s: float) -> np.ndarray:
    """Power in W every DT s: base 80-120 W, bursts to +50..+250 W lasting 0.2-20 s."""
    n = int(duration_s / DT) + 1
    p = np.full(n, rng.uniform(80, 120))
    t = 0.0
    while t < duration_s:
        t += rng.exponential(8.0)  # mean 8 s between burst starts
        length = rng.uniform(0.2, 20.0)
        i0, i1 = int(t / DT), int(min(duration_s, t + length) / DT)
        p[i0:i1] += rng.uniform(50, 250)
        t += length
    return p


def one(rng, duration_s: float, intervals) -> dict:
    p = bursty_trace(rng, duration_s)
    cum_j = np.concatenate([[0.0], np.cumsum(p[:-1] * DT)])  # exact energy to each tick (left rule)
    small = 2**32  # uJ: ~4295 J, wraps every ~12 s at 370 W
    real = 262_143_328_850  # uJ, Intel package max_energy_range_uj
    pmax = 370.0  # W: the trace's ceiling (120 + 250), as a zone's max power would be
    out = {}
    for iv in intervals:
        step = round(iv / DT)
        idx = np.arange(0, len(p), step)
        times = idx * DT
        true_j = cum_j[idx[-1]]
        ps = power_series(times, [float(p[i]) for i in idx]).total_j
        cs = counter_series(times, [round(cum_j[i] * 1e6) % real for i in idx], max_range_uj=real, max_power_w=pmax).total_j
        sm = counter_series(times, [round(cum_j[i] * 1e6) % small for i in idx], max_range_uj=small, max_power_w=pmax)
        flagged = float(np.mean(sm.masks.get("possible_multiple_wrap", np.zeros(len(sm.t0), dtype=bool))))
        out[iv] = ((ps - true_j) / true_j, (cs - true_j) / true_j, (sm.total_j - true_j) / true_j, flagged)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--duration", type=float, default=1800.0, help="trace length, s")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    intervals = (1.0, 5.0, 15.0)
    res = {iv: [] for iv in intervals}
    for _ in range(a.traces):
        for iv, v in one(rng, a.duration, intervals).items():
            res[iv].append(v)
    print(f"{a.traces} bursty traces of {a.duration:.0f} s (10 ms truth), relative energy error")
    print(f"{'interval_s':>10} {'trapz mean%':>12} {'trapz |mean|%':>14} {'trapz p95|%|':>13} "
          f"{'trapz max|%|':>13} {'counter max|%|':>15} {'2^32 ctr max|%|':>16} {'flagged%':>9}")
    for iv in intervals:
        e = np.array(res[iv])
        tr, cn, sm, fl = e[:, 0] * 100, e[:, 1] * 100, e[:, 2] * 100, e[:, 3] * 100
        print(f"{iv:>10.0f} {tr.mean():>12.3f} {np.abs(tr).mean():>14.3f} "
              f"{np.percentile(np.abs(tr), 95):>13.3f} {np.abs(tr).max():>13.3f} {np.abs(cn).max():>15.2e} "
              f"{np.abs(sm).max():>16.2f} {fl.mean():>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

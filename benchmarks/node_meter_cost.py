#!/usr/bin/env python3
"""What the node meter costs: the meter process' CPU per reading (in-band sources, fake sysfs trees
from tests/fakes), and what a job's sampler pays once at its start to make sure it runs
(:func:`slurm_energy.slurm.nodemeter.ensure_running`: a flock probe and a claim file). The per-sample
path of the sampler and the Prolog/Epilog are unchanged: none of them reads the meter.

Run: python benchmarks/node_meter_cost.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

N = 2000


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def per_reading(reader, path: str) -> float:
    from slurm_energy.sampling import meterspool
    from slurm_energy.sampling.readers.node_meter import MeterCheck

    check = MeterCheck()
    c0 = _cpu()
    for i in range(N):
        for r in reader.read():
            meterspool.append(path, meterspool.MeterRow(float(i), "bench", check.check(float(i), r)))
    return (_cpu() - c0) / N


def main() -> None:
    from slurm_energy.config.schema import SiteConfig
    from slurm_energy.sampling.readers import hwmon_power, pm_counters
    from slurm_energy.slurm import nodemeter
    from tests.fakes import hwmon as fake_hwmon
    from tests.fakes import pm_counters as fake_pm

    with tempfile.TemporaryDirectory() as d:
        fake_hwmon.acpi_power_meter(os.path.join(d, "hwmon"), 0, "", 412_500_000, interval_ms=1000)
        acpi = hwmon_power.HwmonPowerReader(hwmon_power.node_meters(hwmon_power.find_power_meters(os.path.join(d, "hwmon"))))
        fake_pm.tree(os.path.join(d, "pm"), 5_405_478, 350, accel_j=100)
        pm = pm_counters.PmCountersReader(os.path.join(d, "pm"))
        a = per_reading(acpi, os.path.join(d, "a.jsonl"))
        p = per_reading(pm, os.path.join(d, "p.jsonl"))
        print(f"meter process CPU per reading (read + check + append): ACPI power meter {a * 1e6:.0f} us, "
              f"pm_counters {p * 1e6:.0f} us; at interval_s 10: {a / 10 * 100:.4f} % / {p / 10 * 100:.4f} % of a CPU")
        cfg = SiteConfig()
        c0, w0 = _cpu(), time.perf_counter()
        for i in range(N):
            nodemeter.ensure_running(cfg, d, f"n{i}", start=lambda argv: None)
        print(f"sampler start, ensure_running (lock probe + claim, process start left out): "
              f"{(_cpu() - c0) / N * 1e6:.0f} us CPU, {(time.perf_counter() - w0) / N * 1e6:.0f} us wall, once per job")


if __name__ == "__main__":
    main()

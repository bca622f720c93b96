#!/usr/bin/env python3
"""Time the run-time look-ups on the hook path: config load, carbon_for, cpu_tdp (prints ms).

Target: a cold Prolog/Epilog pays < 100 ms for these together; warm look-ups are microseconds.
Run: python benchmarks/bench_carbon_lookups.py
"""

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

COLD = ("import time; t=time.perf_counter();"
        "from slurm_energy.config import load_site_config;"
        "from slurm_energy.config.carbon import resolve_carbon; from slurm_energy.devices.rated import cpu_tdp;"
        "c=load_site_config('site_config/site.yaml'); resolve_carbon(c, 'gpu', offline=True);"
        "cpu_tdp(c.hardware, 'Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz', 16);"
        "import sys; print((time.perf_counter()-t)*1000, 'pandas' in sys.modules)")


def main() -> None:
    runs = [subprocess.run([sys.executable, "-c", COLD], cwd=REPO, capture_output=True, text=True).stdout.split()
            for _ in range(5)]
    ms = sorted(float(r[0]) for r in runs)
    print(f"cold import+load+carbon_for+cpu_tdp: median {ms[2]:.1f} ms (min {ms[0]:.1f}); pandas imported: {runs[0][1]}")
    from slurm_energy.config import load_site_config
    from slurm_energy.config.carbon import resolve_carbon
    from slurm_energy.devices.rated import cpu_tdp

    c = load_site_config(os.path.join(REPO, "site_config", "site.yaml"))
    resolve_carbon(c, "gpu", offline=True)
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        resolve_carbon(c, "gpu", offline=True)
    print(f"warm carbon_for: {(time.perf_counter() - t) / n * 1e6:.1f} us/call")
    t = time.perf_counter()
    for _ in range(n):
        cpu_tdp(c.hardware, "AMD EPYC 7763 64-Core Processor", 64)
    print(f"warm cpu_tdp: {(time.perf_counter() - t) / n * 1e6:.1f} us/call")


if __name__ == "__main__":
    main()

"""Cost of one full sample: CPU time, wall time, RSS and sample-file bytes.

Setup: the real :class:`slurm_energy.sampling.sampler.Sampler` with a :class:`RaplReader` over a
fake powercap tree of 2 sockets (package + dram each) and an :class:`NvmlReader` over 8 fake GPUs
(real ``pynvml`` with its functions patched, as in tests/fakes/nvml.py), writing a real sample file
(fsync on, as in production). Fake counters advance between samples. Prints per-sample CPU time
(user+sys of this process), wall time, bytes written, and peak RSS.

Usage: python benchmarks/sampler_cost.py [--samples 500] [--no-fsync]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import psutil
import pytest

# the checkout's test fakes (tests.fakes), after PYTHONPATH and the installed package
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slurm_energy.core import JobUsage
from slurm_energy.sampling.readers.nvml import NvmlReader
from slurm_energy.sampling.readers.rapl import RaplReader
from slurm_energy.sampling.samplefile import SampleWriter
from slurm_energy.sampling.sampler import Sampler
from tests.fakes.nvml import FakeGpu, install
from tests.fakes.powercap import Zone, build_tree, set_energy


class _Probe:
    usage = JobUsage(cpu_time_s=123.4, mem_bytes=2**30, max_mem_bytes=2**31, pids=list(range(1000, 1016)),
                     source="benchmark")

    def poll(self, full=True):
        return self.usage  # the probe's own, as a real probe keeps it

    def gone(self):
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--no-fsync", action="store_true")
    a = ap.parse_args(argv)
    mp = pytest.MonkeyPatch()
    with tempfile.TemporaryDirectory() as tmp:
        root = build_tree(tmp, [Zone("intel-rapl:0", "package-0", max_power_uw={0: 205_000_000}),
                                Zone("intel-rapl:0:0", "dram"),
                                Zone("intel-rapl:1", "package-1", max_power_uw={0: 205_000_000}),
                                Zone("intel-rapl:1:0", "dram")])
        gpus = [FakeGpu(f"GPU-{i:08x}-0000-0000-0000-000000000000", i, energy_mj=0, util_gpu=90,
                        mem_used=30 * 2**30, proc_samples=[(1000 + i, 90)]) for i in range(8)]
        install(mp, gpus)
        readers = [RaplReader(root), NvmlReader([g.uuid for g in gpus])]
        path = os.path.join(tmp, "samples.jsonl")
        writer = SampleWriter(path, fsync=not a.no_fsync)
        s = Sampler(readers, _Probe(), writer, interval_s=5.0)
        s._poll()
        proc = psutil.Process()
        rss0 = proc.memory_info().rss
        c0, w0 = proc.cpu_times(), time.perf_counter()
        for k in range(a.samples):
            for key in ("intel-rapl:0", "intel-rapl:1", "intel-rapl:0:0", "intel-rapl:1:0"):
                set_energy(root, key, 1_000_000 * (k + 1))
            for g in gpus:
                g.energy_mj += 1_500_000
            s.sample()
        c1, w1 = proc.cpu_times(), time.perf_counter()
        writer.close()
        size = os.path.getsize(path)
        rss1 = proc.memory_info().rss
    mp.undo()
    cpu = (c1.user + c1.system) - (c0.user + c0.system)
    n = a.samples
    # the fake-counter updates above (4 file writes + 8 attribute sets per sample) are included
    print(f"{n} samples, 2 RAPL sockets (4 zones) + 8 GPUs, fsync={'off' if a.no_fsync else 'on'}")
    print(f"CPU time per sample : {1000 * cpu / n:8.3f} ms (user+sys, includes fake counter updates)")
    print(f"wall time per sample: {1000 * (w1 - w0) / n:8.3f} ms")
    print(f"sample file         : {size / n:8.0f} bytes per sample")
    print(f"RSS                 : {rss0 / 2**20:8.1f} MiB before, {rss1 / 2**20:.1f} MiB after")
    print(f"at 5 s interval     : {100 * cpu / n / 5.0:8.4f} % of one core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

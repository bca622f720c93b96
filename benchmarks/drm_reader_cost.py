"""Cost of the AMD/Intel GPU path: Prolog resolution and one read, against NVML's in the same run.

Setup: fake sysfs trees in the drivers' layouts (tests/fakes/drm.py) of 8 AMD Instinct MI300X
cards -- whole (SPX), and in CPX mode (8 partitions each, 64 render nodes, 65 KFD nodes) -- and 8
Intel Max 1550 (xe, 2 tiles); the peer is :class:`NvmlReader` over 8 fake GPUs (real ``pynvml``
with its functions patched, tests/fakes/nvml.py). Prints, per call: the Prolog's
``resolve_drm_gpus`` (all of the node's GPUs, so the worst case) vs ``resolve_job_gpus``, and one
``read()`` of every GPU (CPU time, user+sys of this process) with the ratio to NVML's.

Usage: python benchmarks/drm_reader_cost.py [--n 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from slurm_energy.devices.gpu.drm import resolve_drm_gpus
from slurm_energy.devices.gpu.nvidia import resolve_job_gpus
from slurm_energy.sampling.readers.drm_hwmon import DrmHwmonReader
from slurm_energy.sampling.readers.nvml import NvmlReader
from tests.fakes.drm import FakeSysfs
from tests.fakes.nvml import FakeGpu, install


def _cpu() -> float:
    return time.process_time()  # user + sys of this process, ns resolution (os.times ticks at 10 ms)


def _per_call(fn, n: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per call of fn()."""
    c0, w0 = _cpu(), time.perf_counter()
    for _ in range(n):
        fn()
    return 1000 * (_cpu() - c0) / n, 1000 * (time.perf_counter() - w0) / n


def _tree(root: Path, kind: str) -> FakeSysfs:
    fs = FakeSysfs(root)
    for i in range(8):
        bdf = f"0000:{0x11 + 0x10 * i:02x}:00.0"
        if kind == "intel":
            fs.gpu(bdf, "8086:0bd5", "xe", card=i, render=128 + i, tiles=2,
                   hwmon={"energy1_input": 10**9, "energy1_label": "card", "power1_rated_max": 600_000_000})
        else:
            parts = 8 if kind == "amd-cpx" else 1
            fs.gpu(bdf, "1002:74a1", "amdgpu", card=i, render=128 + parts * i, partitions=parts,
                   hwmon={"power1_average": 700_000_000, "power1_cap": 750_000_000},
                   extra={"gpu_busy_percent": 90, "mem_info_vram_used": 2**34,
                          "current_compute_partition": "CPX" if parts > 1 else "SPX"})
    return fs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args(argv)
    mp = pytest.MonkeyPatch()
    gpus = [FakeGpu(f"GPU-{i:08x}-0000-0000-0000-000000000000", i, energy_mj=0, util_gpu=90,
                    mem_used=30 * 2**30, proc_samples=[(1000 + i, 90)]) for i in range(8)]
    install(mp, gpus)
    nv_res = _per_call(lambda: resolve_job_gpus(",".join(map(str, range(8)))), a.n)
    nv = NvmlReader([g.uuid for g in gpus])
    nv_read = _per_call(nv.read, a.n)
    print(f"{'(per call, ms)':28s} {'resolve CPU':>11s} {'resolve wall':>12s} {'read CPU':>9s} {'read wall':>9s} "
          f"{'read CPU / NVML':>15s}")
    print(f"{'NVML, 8 GPUs (peer)':28s} {nv_res[0]:11.3f} {nv_res[1]:12.3f} {nv_read[0]:9.3f} {nv_read[1]:9.3f} "
          f"{1.0:15.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, label, n_slots in (("amd", "AMD MI300X x8 (SPX)", 8), ("amd-cpx", "AMD MI300X x8 (CPX, 64)", 64),
                                     ("intel", "Intel Max 1550 x8 (xe)", 8)):
            fs = _tree(Path(tmp) / kind, kind)
            job = ",".join(map(str, range(n_slots)))
            res = _per_call(lambda job=job, fs=fs: resolve_drm_gpus(job, drm_root=str(fs.drm_root),
                                                                   kfd_root=str(fs.kfd_root)), a.n)
            r = DrmHwmonReader(list(resolve_drm_gpus(job, drm_root=str(fs.drm_root), kfd_root=str(fs.kfd_root))),
                               str(fs.drm_root), str(fs.kfd_root))
            rd = _per_call(r.read, a.n)
            print(f"{label:28s} {res[0]:11.3f} {res[1]:12.3f} {rd[0]:9.3f} {rd[1]:9.3f} {rd[0] / nv_read[0]:15.2f}")
    mp.undo()
    print("Prolog budget: 2000 ms in all; the resolution is sysfs reads only (no vendor library).")
    print("The NVML peer answers from patched Python functions (no driver call), so its cost is a floor:")
    print("the ratio overstates the hwmon reader's cost relative to NVML on a real node.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

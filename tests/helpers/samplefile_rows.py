"""Sample-file rows of a busy GPU node, as the real readers write them (fake counters), and the
old JSON-lines writer (sample files from before the compact format), for tests and benchmarks.

:func:`node_rows`: 2 RAPL packages (``counter``, wrapping at the zone's range) + 8 NVML GPUs
(``counter`` with ``power_w`` beside it, utilisation, memory, per-process utilisation), the job's
cgroup usage and the node's counters, every ``interval_s``; deterministic (seeded).
"""

from __future__ import annotations

import json
import random
from typing import Any

from slurm_energy.core import Reading

T0 = 1_796_034_000.0  # 2026-11-30T10:20:00Z
RAPL_RANGE_UJ = 262_143_328_850
GIB = 1024 ** 3


def gpu_uuid(i: int) -> str:
    return f"GPU-{0x3c1f5e2a + i:08x}-8b7d-4e6f-9a0b-{0x1c2d3e4f5a6b + i:012x}"


def static_inventory(dram: bool = False) -> dict[str, Any]:
    devs = [{"device_class": "cpu", "device_id": f"intel-rapl:{k}", "model": f"package-{k}", "rated_power_w": 205.0,
             "rated_power_source": "RAPL constraint_0_max_power_uw"} for k in range(2)]
    devs += [{"device_class": "gpu", "device_id": gpu_uuid(i), "model": "NVIDIA H100 80GB HBM3", "rated_power_w": 700.0,
              "rated_power_source": "NVML enforced limit", "extra": {"minor": i}} for i in range(8)]
    if dram:
        devs += [{"device_class": "ram", "device_id": f"intel-rapl:{k}:0", "model": "dram"} for k in range(2)]
    return {"host": "gpu001", "logical_cpus": 64, "devices": devs, "reader_notes": []}


def node_rows(n: int, interval_s: float = 5.0, seed: int = 12,
              dram: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``n`` sample rows (dicts, the shape the sampler writes) and the node's static inventory;
    ``dram``: each package's RAPL ``dram`` zone too (``intel-rapl:N:0``, a ``ram`` device, 8-20 W:
    the powercap sysfs layout of a two-socket server, Documentation/power/powercap/powercap.rst)."""
    rnd = random.Random(seed)
    t = T0
    rapl = [rnd.randrange(RAPL_RANGE_UJ) for _ in range(2)]
    dram_uj = [rnd.randrange(RAPL_RANGE_UJ) for _ in range(2)] if dram else []  # no draw otherwise: same rows
    gpu_mj = [rnd.randrange(10**9, 10**10) for _ in range(8)]
    gpu_mem = [rnd.randrange(20, 70) * GIB + rnd.randrange(1024) * 2**20 for _ in range(8)]
    job_cpu, busy, total = 0.0, 8_123_456.789, 98_765_432.1
    node_mem = 300 * GIB
    pids = list(range(41_000, 41_016))
    rows = []
    for k in range(n):
        jitter = rnd.uniform(-0.004, 0.004)
        t = T0 + k * interval_s + jitter
        readings = []
        for z in range(2):
            rapl[z] = (rapl[z] + int(rnd.uniform(140, 190) * interval_s * 1e6)) % RAPL_RANGE_UJ
            readings.append(Reading("cpu", f"intel-rapl:{z}", "counter", energy_uj=rapl[z],
                                    max_energy_range_uj=RAPL_RANGE_UJ, max_power_w=205.0).to_dict())
        for z in range(2 if dram else 0):
            dram_uj[z] = (dram_uj[z] + int(rnd.uniform(8, 20) * interval_s * 1e6)) % RAPL_RANGE_UJ
            readings.append(Reading("ram", f"intel-rapl:{z}:0", "counter", energy_uj=dram_uj[z],
                                    max_energy_range_uj=RAPL_RANGE_UJ).to_dict())
        for i in range(8):
            p_mw = rnd.randrange(250_000, 650_000)
            gpu_mj[i] += p_mw * int(interval_s * 1000) // 1000
            if rnd.random() < 0.01:  # the allocator grows now and then
                gpu_mem[i] += 2**30
            util = rnd.randrange(60, 101) / 100
            readings.append(Reading("gpu", gpu_uuid(i), "counter", energy_uj=gpu_mj[i] * 1000, energy_resolution_uj=1000,
                                    power_w=p_mw / 1000.0, power_accuracy_w=5.0, util=util, mem_bytes=gpu_mem[i],
                                    proc_util={pids[i]: util}).to_dict())
        d_busy = round(rnd.uniform(250, 320), 2)
        job_cpu = round(job_cpu + d_busy * rnd.uniform(0.85, 0.98), 6) if k else 0.0
        busy = round(busy + d_busy, 3)
        total = round(total + 64 * interval_s, 3)
        node_mem += rnd.randrange(-2**24, 2**24)
        rows.append({"t": t, "kind": "start" if k == 0 else "sample",
                     "job": {"cpu_time_s": job_cpu, "mem_bytes": 180 * GIB + rnd.randrange(2**26),
                             "max_mem_bytes": 200 * GIB, "pids": pids, "source": "cgroup-v2"},
                     "node": {"cpu_busy_s": busy, "cpu_total_s": total, "ncpu": 64, "mem_used_bytes": node_mem,
                              "mem_total_bytes": 1024 * GIB},
                     "readings": readings})
    return rows, static_inventory(dram)


def legacy_write(path: str, rows: list[dict[str, Any]], mode: str = "w") -> None:
    """Write ``rows`` as the old sample file did: one JSON object per line."""
    with open(path, mode, encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def spool_with_rows(root: str, job_id: str, node: str, static: dict[str, Any], rows: list[dict[str, Any]]):
    """A job's spool attempt 0 under ``root`` holding ``static`` (the device inventory) and
    ``rows`` written through the real SampleWriter, as the Prolog and sampler leave it; returns
    the :class:`~slurm_energy.slurm.attempt.Attempt`."""
    from slurm_energy.sampling.samplefile import SampleWriter
    from slurm_energy.slurm.attempt import Attempt

    spool = Attempt(root, job_id, 0, node).ensure()
    with open(spool.static, "w") as f:
        json.dump(static, f)
    w = SampleWriter(spool.samples, fsync=False)
    for r in rows:
        w.write(r)
    w.close()
    return spool


def read_samples(path: str) -> list[dict[str, Any]]:
    """The sample file's rows as dicts (``Sample.to_dict``'s shape), in file order."""
    from slurm_energy.sampling.samplefile import read_sample_file

    return [s.to_dict() for s in read_sample_file(path)]

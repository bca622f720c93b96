"""On a node with an NVIDIA GPU: NVML energy counter vs integrated NVML power under a real load.

Runs a matrix-multiply load on GPU 0 (torch, fp16/fp32 GEMMs) for ``--seconds`` (60) while a
thread samples NVML every ``--every`` s (0.5): ``nvmlDeviceGetTotalEnergyConsumption`` (mJ) and
``nvmlDeviceGetPowerUsage`` (mW). Prints the counter energy, the trapezoidal integral of power at
the sampling interval and at 5 s (every 10th sample), and their differences, using
``slurm_energy.accounting.integrate``.

Exits 0 with a clear message when there is no NVIDIA driver/GPU or torch is not installed (the
check is informative, not a test).

Usage: python benchmarks/gpu_check.py [--seconds 60] [--every 0.5] [--gpu 0]
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=0.5, help="NVML sampling interval, s")
    ap.add_argument("--gpu", type=int, default=0, help="NVML index (and CUDA device, if they agree)")
    a = ap.parse_args(argv)
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as e:  # no library, no driver
        print(f"gpu_check: skipped, NVML unavailable ({type(e).__name__}: {e})")
        return 0
    # NVML enumerates by PCI bus id; make CUDA do the same so cuda:N is NVML index N.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    try:
        import torch
    except ImportError:
        print("gpu_check: skipped, torch is not installed (pip install torch to run the load)")
        return 0
    if not torch.cuda.is_available():
        print("gpu_check: skipped, torch sees no CUDA device")
        return 0
    from slurm_energy.accounting.integrate import counter_series, floats, power_series

    h = pynvml.nvmlDeviceGetHandleByIndex(a.gpu)
    name = pynvml.nvmlDeviceGetName(h)
    name = name.decode() if isinstance(name, bytes) else name
    try:
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        has_counter = True
    except pynvml.NVMLError:
        has_counter = False
    samples: list[tuple[float, int | None, float]] = []
    stop = threading.Event()

    def sampler():
        nxt = time.time()
        while not stop.is_set():
            t = time.time()
            e = pynvml.nvmlDeviceGetTotalEnergyConsumption(h) if has_counter else None
            p = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
            samples.append((t, e, p))
            nxt += a.every
            time.sleep(max(0.0, nxt - time.time()))

    dev = torch.device(f"cuda:{a.gpu}")
    n = 8192
    x = torch.randn(n, n, device=dev, dtype=torch.float16)
    y = torch.randn(n, n, device=dev, dtype=torch.float16)
    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    time.sleep(3 * a.every)  # idle lead-in
    t_end = time.time() + a.seconds
    iters = 0
    while time.time() < t_end:
        for _ in range(20):
            x = (x @ y).clamp_(-1, 1)
        torch.cuda.synchronize(dev)
        iters += 20
    time.sleep(3 * a.every)  # idle tail
    stop.set()
    th.join()
    pynvml.nvmlShutdown()

    t0 = samples[0][0]
    pw = power_series(floats([t for t, _, _ in samples]), [p for _, _, p in samples])
    every5 = samples[:: max(1, round(5.0 / a.every))]
    pw5 = power_series(floats([t for t, _, _ in every5]), [p for _, _, p in every5])
    print(f"GPU {a.gpu}: {name}; {len(samples)} samples every {a.every} s over "
          f"{samples[-1][0] - t0:.1f} s; {iters} GEMMs of {n}x{n} fp16")
    print(f"integrated power @ {a.every:g} s : {pw.total_j:12.1f} J over {pw.measured_s:.1f} s")
    print(f"integrated power @ 5 s   : {pw5.total_j:12.1f} J over {pw5.measured_s:.1f} s (ends differ)")
    if has_counter:
        # NVML counter is mJ; counter_series takes uJ
        ct = counter_series(floats([t for t, _, _ in samples]), [e * 1000 for _, e, _ in samples], max_range_uj=None)
        d = pw.total_j - ct.total_j
        print(f"NVML energy counter      : {ct.total_j:12.1f} J over {ct.measured_s:.1f} s")
        print(f"power integral - counter : {d:+12.1f} J ({100 * d / ct.total_j:+.2f} %)")
    else:
        print("NVML energy counter      : not supported on this GPU (pre-Volta): power integration only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

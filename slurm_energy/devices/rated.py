"""Rated power of this node's devices (device information collector): the site's overrides
(``hardware`` section of site.yaml), then the bundled tables, then labelled fallbacks.

Used by the TDP model when no energy counter is readable, and by prediction.
"""

from __future__ import annotations

from slurm_energy import units
from slurm_energy.devices import hwtables
from slurm_energy.devices.hardware import HardwareConfig


def cpu_tdp(hardware: HardwareConfig, model_string: str, cores: int) -> tuple[float, float, str, bool]:
    """Rated power of a CPU: ``(W per socket, W per core, source, is_fallback)``.

    :param model_string: as the OS reports it (``/proc/cpuinfo`` model name).
    :param cores: physical cores per socket as seen on this node (>= 1); used for W per core
        when the table has no core count, and for the per-core fallback.
    Order: ``hardware.cpu_tdp_w`` (by normalized model) > bundled table > ``cpu_tdp_default_w``
    (flagged) > ``cpu_w_per_core`` x cores (flagged; default 12 W/core, Green Algorithms "Any").
    :raises ValueError: ``cores < 1``.
    """
    if cores < 1:
        raise ValueError(f"cores: {cores!r} must be >= 1 (physical cores per socket)")
    key = hwtables.normalize_cpu_model(model_string)
    for m, w in hardware.cpu_tdp_w.items():
        if hwtables.normalize_cpu_model(m) == key:
            return float(w), float(w) / cores, f"site config hardware.cpu_tdp_w[{m!r}]", False
    try:
        row = hwtables.lookup_cpu(model_string)
    except FileNotFoundError:
        row = None
    if row is not None:
        n = row.n_cores or cores
        yr = f" {row.year}" if row.year else ""
        return row.tdp_w, row.tdp_w / n, f"table: {row.model}{yr}, {row.source} ({row.licence})", False
    if hardware.cpu_tdp_default_w is not None:
        w = hardware.cpu_tdp_default_w
        return w, w / cores, (f"fallback: unknown CPU model {model_string!r}; site config "
                              f"hardware.cpu_tdp_default_w"), True
    w = hardware.cpu_w_per_core
    src = (units.CPU_W_PER_CORE_SOURCE if w == units.CPU_W_PER_CORE
           else "site config hardware.cpu_w_per_core")
    return w * cores, w, f"fallback: unknown CPU model {model_string!r}; {w:g} W/core ({src})", True

def gpu_rated(hardware: HardwareConfig, name: str) -> tuple[float | None, dict[str, float | None], str, bool]:
    """GPU rated power and dense FLOP/s: ``(W or None, {"fp32","tf32","bf16": FLOP/s|None},
    source, is_fallback)``. Order: ``hardware.gpu`` override (key words all in the NVML name)
    > bundled table > ``hardware.gpu_fallback_w`` (flagged) > ``(None, ..., fallback)``.
    At run time NVML's enforced power limit should be preferred to any of these.
    """
    key = hwtables.normalize_gpu_model(name)
    for m, o in hardware.gpu.items():
        mk = hwtables.normalize_gpu_model(m)
        if mk and set(mk.split()) <= set(key.split()):
            return o.rated_w, {"fp32": o.fp32_flops, "tf32": o.tf32_flops, "bf16": o.bf16_flops}, \
                f"site config hardware.gpu[{m!r}]", False
    try:
        row = hwtables.lookup_gpu(name)
    except FileNotFoundError:
        row = None
    if row is not None and row.rated_w is not None:
        return row.rated_w, {"fp32": row.fp32_flops, "tf32": row.tf32_flops, "bf16": row.bf16_flops}, \
            f"table: {row.model}, {row.source} ({row.licence})", False
    none: dict[str, float | None] = {"fp32": None, "tf32": None, "bf16": None}
    if hardware.gpu_fallback_w is not None:
        return hardware.gpu_fallback_w, none, (f"fallback: unknown GPU {name!r}; site config "
                                                    f"hardware.gpu_fallback_w"), True
    return None, none, f"unavailable: unknown GPU {name!r} and no hardware.gpu_fallback_w", True


"""The site config's ``hardware`` section as one typed, frozen view: what the readers and the
rated-power look-ups read, in every process (the hooks' cached JSON copy, the sampler, the
finalizer's lenient load, ``run``/``attach``/``track``'s strict load).

Stdlib only (the Prolog's reading builds one from the resolved copy, without pydantic); the
validation (ranges, kW mistakes) is :class:`slurm_energy.config.schema.Hardware`'s, done once,
before this view is made. The defaults are that class's (:mod:`slurm_energy.units`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.units import CPU_W_PER_CORE, RAM_W_PER_GB


@dataclass(frozen=True, slots=True)
class GpuRating:
    """An admin's rated power (W) and dense FLOP/s for a GPU model (``hardware.gpu``)."""

    rated_w: float | None = None
    fp32_flops: float | None = None
    tf32_flops: float | None = None
    bf16_flops: float | None = None


@dataclass(frozen=True, slots=True)
class HardwareConfig:
    """``hardware`` of the site config, resolved (W, W/GB, sysfs roots); frozen."""

    cpu_tdp_w: Mapping[str, float] = field(default_factory=dict)  # model string -> W per socket
    cpu_tdp_default_w: float | None = None  # W per socket, unknown model
    cpu_w_per_core: float = CPU_W_PER_CORE
    ram_w_per_gb: float = RAM_W_PER_GB
    gpu: Mapping[str, GpuRating] = field(default_factory=dict)
    gpu_fallback_w: float | None = None
    rapl_root: str = "/sys/class/powercap"
    drm_root: str = "/sys/class/drm"
    kfd_root: str = "/sys/class/kfd/kfd/topology/nodes"
    hwmon_root: str = "/sys/class/hwmon"  # hwmon power meters (not a site.yaml key: tests point it at a fake tree)

    @classmethod
    def of(cls, section: Any) -> HardwareConfig:
        """The view of a validated ``hardware`` section: a :class:`HardwareConfig` (itself), a
        :class:`~slurm_energy.config.schema.Hardware` model, or its JSON dict (the hooks' resolved
        copy). A key the section lacks (a copy made by an older version) takes its default."""
        if isinstance(section, cls):
            return section
        if not isinstance(section, Mapping):
            section = {k: getattr(section, k) for k in cls.__slots__ if hasattr(section, k)}
        d = {k: section[k] for k in cls.__slots__ if k in section}
        d["cpu_tdp_w"] = {str(m): float(w) for m, w in (d.get("cpu_tdp_w") or {}).items()}
        d["gpu"] = {str(m): o if isinstance(o, GpuRating) else GpuRating(**_fields(o))
                    for m, o in (d.get("gpu") or {}).items()}
        return cls(**d)


def _fields(o: Any) -> dict[str, Any]:
    keys = GpuRating.__slots__
    if isinstance(o, Mapping):
        return {k: o[k] for k in keys if k in o}
    return {k: getattr(o, k) for k in keys if hasattr(o, k)}

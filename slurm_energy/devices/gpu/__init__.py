"""A job's GPUs, for every vendor: one resolved-GPU type (:class:`Gpu`) and a backend registry.

Every vendor is a *backend* (:class:`GpuBackend`): it resolves the GPUs a job's environment names
(``SLURM_JOB_GPUS`` and the vendor's own variables) to :class:`Gpu` s, and names the function that
opens a reader for them. The backends are tried in the order of :data:`GPU_BACKENDS`; the first
that resolves GPUs for the job wins (a node has one GPU vendor; NVML is asked first, as the
Prolog always did).

Importing this module imports no vendor code: a backend is named here by ``"module:attribute"``
and loaded when a job's GPUs are first resolved (the Prolog imports nothing it does not use), and
its reader factory is loaded by :mod:`slurm_energy.sampling.setup` (the reader is in the sampling
layer, above this one). Adding a vendor (docs/CONTRACTS.md, "Adding a GPU vendor"):

1. one module with a ``BACKEND`` object (``name``, ``reader``, ``resolve``, ``node_count``) whose reader factory
   is ``(hardware, gpus, notes, light) -> list[Reader]``;
2. one line in :data:`GPU_BACKENDS` (or :func:`register`, e.g. from a test or a site plug-in).

In-tree backends: ``nvml`` (:mod:`slurm_energy.devices.gpu.nvidia`: NVIDIA, by NVML UUID, MIG
slices) and ``drm`` (:mod:`slurm_energy.devices.gpu.drm`: AMD amdgpu and Intel i915/xe, by PCI
bus id from the kernel's DRM/hwmon sysfs, partitions and tiles).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields

from slurm_energy.errors import GpuResolveError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (on the Prolog's path)
if TYPE_CHECKING:
    from typing import Any, Protocol

    from slurm_energy.devices.hardware import HardwareConfig

__all__ = ["GPU_BACKENDS", "Gpu", "GpuResolveError", "ResolvedGpus", "backend", "by_backend", "load",
           "node_gpu_count", "register", "resolve_job_gpus", "split_tokens"]


@dataclass
class Gpu:
    """One of a job's GPUs (or a share of one: a MIG slice, a compute partition, a tile), any vendor.

    ``device_id`` is what the reader reads by and what the series is keyed on; ``fraction`` is the
    share of the physical card charged to this device (``None``: the whole card), an estimate
    labelled by ``share`` and ``share_detail``.
    """

    backend: str  # the registry's name of the backend that resolved it: "nvml", "drm", ...
    vendor: str  # "nvidia" | "amd" | "intel" | a new backend's
    device_id: str  # "GPU-..."/"MIG-..." (NVML UUID), "0000:c1:00.0", "0000:c1:00.0/xcp3", ".../tile1"
    model: str = ""  # product name (NVML's nvmlDeviceGetName; the PCI id's product for DRM)
    bus_id: str = ""  # PCI bus id of the physical card ("0000:c1:00.0"), where known
    physical_index: int | None = None  # the vendor's index of the physical card (NVML index)
    minor: int | None = None  # device-file minor number of the physical card (/dev/nvidiaN)
    parent_id: str | None = None  # the physical card's id for a share read through its card (MIG parent UUID)
    fraction: float | None = None  # share of the card, (0, 1]; None = the whole card
    share: str = ""  # "" | "mig" | "partition" | "tile" | "package"
    share_detail: str = ""  # "CPX 3/8", "tile 1/2", "die 1/2 of package ..."
    fraction_unknown: bool = False  # a share whose size is unknown: unmeasured, never the whole card
    index: int | None = None  # partition or tile index within the card
    gi: int | None = None  # MIG GPU instance id
    ci: int | None = None  # MIG compute instance id
    source: str = ""  # the token it was resolved from, e.g. "SLURM_JOB_GPUS=2"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (stored in the job's Prolog context, handed to a child sampler)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Gpu:
        """Inverse of :meth:`to_dict`; unknown keys ignored.

        Raises:
            GpuResolveError: ``backend``, ``vendor`` or ``device_id`` missing (names the key).
        """
        missing = [k for k in ("backend", "vendor", "device_id") if not d.get(k)]
        if missing:
            raise GpuResolveError(f"a resolved GPU lacks {', '.join(missing)}: {dict(d)!r}; "
                                  "resolve it again (slurm_energy.devices.gpu.resolve_job_gpus)")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def of(cls, g: Gpu | Mapping[str, Any]) -> Gpu:
        """``g`` itself, or the :class:`Gpu` its dict describes."""
        return g if isinstance(g, Gpu) else cls.from_dict(g)


class ResolvedGpus(list[Gpu]):
    """A ``list[Gpu]`` with ``reason``: why it is empty ("" when GPUs were resolved)."""

    def __init__(self, items: Iterable[Gpu] = (), reason: str = ""):
        super().__init__(items)
        self.reason = reason


if TYPE_CHECKING:
    class GpuBackend(Protocol):
        """One vendor's way from a job's environment to its GPUs and their reader."""

        #: the registry's name, written on every :class:`Gpu` it resolves (``Gpu.backend``)
        name: str
        #: ``"module:function"`` of the reader factory ``(hardware, gpus, notes, light) -> list[Reader]``
        #: (loaded by :mod:`slurm_energy.sampling.setup`; ``light``: the Prolog's own reading, where a
        #: vendor library slow to import is left to the sampler)
        reader: str

        def resolve(self, env: Mapping[str, str], hw: HardwareConfig, *, in_prolog: bool) -> ResolvedGpus:
            """The job's GPUs on this node, named by ``env`` (``SLURM_JOB_GPUS``, the vendor's variables).

            ``in_prolog``: the Prolog/Epilog's environment (the allocation only; nothing allocated is
            no GPU); otherwise a process inside the job or outside Slurm, where nothing named means
            every GPU of the vendor the process can see. Empty with a ``reason`` when the node has no
            GPU of this vendor or its library is missing.

            Raises:
                GpuResolveError: a token names no device (the message names the variable and the fix).
            """
            ...

        def node_count(self, hw: HardwareConfig) -> int | None:
            """The node's GPUs of this vendor as Slurm allocates them (one per GRES device), or
            None when unknown or none (the rest-of-node rule compares a job's GPUs with it)."""
            ...


#: name -> the backend, as ``"module:attribute"`` (loaded on first use) or the object itself
#: (:func:`register`). The order is the order they are tried in.
GPU_BACKENDS: dict[str, str | GpuBackend] = {
    "nvml": "slurm_energy.devices.gpu.nvidia:BACKEND",
    "drm": "slurm_energy.devices.gpu.drm:BACKEND",
}


def register(b: GpuBackend, *, first: bool = False) -> None:
    """Add (or replace) backend ``b`` under ``b.name``; ``first``: try it before the others."""
    GPU_BACKENDS.pop(b.name, None)
    if first:
        rest = dict(GPU_BACKENDS)
        GPU_BACKENDS.clear()
        GPU_BACKENDS[b.name] = b
        GPU_BACKENDS.update(rest)
    else:
        GPU_BACKENDS[b.name] = b


def load(ref: str) -> Any:
    """The object ``"module:attribute"`` names (a backend, a reader factory), imported now.

    Raises:
        GpuResolveError: ``ref`` is not ``module:attribute``; ImportError / AttributeError as the
            import raises them.
    """
    import importlib

    mod, sep, attr = ref.partition(":")
    if not sep or not mod or not attr:
        raise GpuResolveError(f"GPU backend reference {ref!r}: expected 'module:attribute'")
    return getattr(importlib.import_module(mod), attr)


def backend(name: str) -> GpuBackend:
    """The registered backend ``name``, loaded on first use.

    Raises:
        GpuResolveError: no backend of that name (the message lists the registered ones).
    """
    b = GPU_BACKENDS.get(name)
    if b is None:
        raise GpuResolveError(f"GPU backend {name!r} is not registered (known: {', '.join(GPU_BACKENDS)})")
    if isinstance(b, str):
        b = GPU_BACKENDS[name] = load(b)
    assert not isinstance(b, str)
    return b


def resolve_job_gpus(env: Mapping[str, str], hw: HardwareConfig, *, in_prolog: bool) -> ResolvedGpus:
    """The job's GPUs: the first backend (in :data:`GPU_BACKENDS` order) that resolves any.

    Never raises: a backend that fails (a token naming no device, a library error) is skipped and
    its error kept in ``reason`` (with every other backend's), so the job's GPUs are reported
    unresolved and ``unavailable``, never as 0 J.
    """
    reasons = []
    for name in list(GPU_BACKENDS):
        try:
            res = backend(name).resolve(env, hw, in_prolog=in_prolog)
        except Exception as e:  # the Prolog goes on: the GPUs are reported unresolved with this
            reasons.append(f"{name}: {type(e).__name__}: {e}")
            continue
        if res:
            return res
        reasons.append(f"{name}: {res.reason or 'no GPU'}")
    return ResolvedGpus([], "; ".join(reasons))


def node_gpu_count(hw: HardwareConfig) -> int | None:
    """The node's GPUs, every vendor: the sum of the backends' :meth:`GpuBackend.node_count` that
    answer; None when none does (unknown is never 0)."""
    counts = []
    for name in list(GPU_BACKENDS):
        try:
            n = backend(name).node_count(hw)
        except Exception:  # a backend that cannot count leaves its GPUs unknown, not 0
            continue
        if n is not None:
            counts.append(n)
    return sum(counts) if counts else None


def by_backend(gpus: Iterable[Gpu | Mapping[str, Any]]) -> dict[str, list[Gpu]]:
    """The GPUs grouped by the backend that resolved them, in first-seen order."""
    out: dict[str, list[Gpu]] = {}
    for g in gpus:
        gpu = Gpu.of(g)
        out.setdefault(gpu.backend, []).append(gpu)
    return out


def split_tokens(v: str | None) -> list[str]:
    """A GPU list variable's tokens (``"0, 2"`` -> ``["0", "2"]``), without Slurm's ``NoDevFiles``."""
    return [t.strip() for t in (v or "").split(",") if t.strip() and t.strip() != "NoDevFiles"]

"""The ``nvml`` GPU backend: resolve a job's NVIDIA GPUs to NVML devices, once, in the Prolog.

Slurm and CUDA name GPUs in several ways; only some of them are NVML indices:

* ``SLURM_JOB_GPUS`` as seen by the Prolog/Epilog: the job's GPUs as *physical* indices (Slurm's
  GRES indices, which follow NVML's PCI bus order with ``AutoDetect=nvml``), e.g. ``"0,2"``.
* ``CUDA_VISIBLE_DEVICES`` inside the job: with ``ConstrainDevices=yes`` the job's numeric ordinals
  are *renumbered* from 0 and CUDA's own ordering (``CUDA_DEVICE_ORDER=FASTEST_FIRST``) may differ
  from NVML's, so a numeric ``CUDA_VISIBLE_DEVICES`` is never read as an NVML index (error unless
  the caller vouches with ``cuda_ordinals_are_nvml=True``). Its other forms are unambiguous: full
  UUIDs ``GPU-8f3c...``, unique UUID prefixes (CUDA accepts them), MIG UUIDs ``MIG-<uuid>`` (driver
  R470+), legacy MIG names ``MIG-GPU-<parent uuid>/<gpu instance>/<compute instance>``.
* ``/dev/nvidiaN`` (gres.conf ``File=``): N is the device *minor number*
  (``nvmlDeviceGetMinorNumber``), which is not the NVML index.

A MIG instance is recorded with its parent GPU's UUID and the slice fraction
(:func:`mig_fraction` of the instance's GPU-instance slices over
the parent's largest profile's slices): NVML measures power/energy for the parent only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from slurm_energy.devices.gpu import Gpu, GpuResolveError, ResolvedGpus, split_tokens

if TYPE_CHECKING:
    from slurm_energy.devices.hardware import HardwareConfig


def mig_fraction(slice_units: int, total_units: int) -> float:
    """Fraction of a parent GPU a MIG slice holds: compute slices of the instance / of the GPU.

    E.g. a ``1g.10gb`` instance on an A100/H100 (7 compute slices) -> 1/7; ``3g.40gb`` -> 3/7.
    Source: NVIDIA MIG User Guide, "Supported MIG Profiles" (the ``Ng`` prefix is N of 7 GPCs).

    Raises:
        ValueError: ``total_units`` < 1, or ``slice_units`` not in [1, total_units].
    """
    if total_units < 1:
        raise ValueError(f"total_units: a GPU has at least 1 compute slice, got {total_units!r}")
    if not 1 <= slice_units <= total_units:
        raise ValueError(
            f"slice_units: must be between 1 and total_units={total_units}, got {slice_units!r}"
        )
    return slice_units / total_units


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


@dataclass
class _Dev:
    uuid: str
    index: int
    minor: int | None
    model: str
    handle: object
    migs: list[Gpu] = field(default_factory=list)  # its MIG instances


def parent_slices(pynvml: Any, handle: object) -> int | None:
    """Compute slices of a whole GPU: the largest ``sliceCount`` over its GPU-instance profiles.

    (7 on A100/H100/H200, 4 on A30.) ``None`` if NVML reports no profile.
    """
    best = None
    for prof in range(getattr(pynvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0)):
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, prof)
        except pynvml.NVMLError:
            continue
        sc = int(getattr(info, "sliceCount", 0) or 0)
        if sc > 0:
            best = sc if best is None else max(best, sc)
    return best


def mig_instance_fraction(pynvml: Any, mig_handle: object, parent_handle: object) -> float | None:
    """Fraction of the parent GPU held by a MIG instance, or ``None`` if NVML cannot say."""
    try:
        attrs = pynvml.nvmlDeviceGetAttributes(mig_handle)
        mine = int(attrs.gpuInstanceSliceCount)
    except pynvml.NVMLError:
        return None
    total = parent_slices(pynvml, parent_handle)
    if not total or not mine or mine > total:
        return None
    return mig_fraction(mine, total)


def _opt(pynvml: Any, fn: Any, *a: Any) -> Any:
    """``fn(*a)``, or ``None`` when NVML says the fact is not available (NotSupported, NotFound...)."""
    try:
        return fn(*a)
    except pynvml.NVMLError:
        return None


def _inventory(pynvml: Any) -> list[_Dev]:
    devs = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        d = _Dev(
            uuid=_s(pynvml.nvmlDeviceGetUUID(h)),
            index=i,
            minor=_opt(pynvml, pynvml.nvmlDeviceGetMinorNumber, h),
            model=_s(_opt(pynvml, pynvml.nvmlDeviceGetName, h) or ""),
            handle=h,
        )
        mode = _opt(pynvml, pynvml.nvmlDeviceGetMigMode, h)
        if mode and mode[0] == getattr(pynvml, "NVML_DEVICE_MIG_ENABLE", 1):
            for k in range(_opt(pynvml, pynvml.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
                mh = _opt(pynvml, pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h, k)
                if mh is None:  # NVML_ERROR_NOT_FOUND: no instance at this index
                    continue
                gi = _opt(pynvml, pynvml.nvmlDeviceGetGpuInstanceId, mh)
                ci = _opt(pynvml, pynvml.nvmlDeviceGetComputeInstanceId, mh)
                d.migs.append(Gpu(
                    "nvml", "nvidia", _s(pynvml.nvmlDeviceGetUUID(mh)), d.model, physical_index=i,
                    minor=d.minor, parent_id=d.uuid, fraction=mig_instance_fraction(pynvml, mh, h),
                    share="mig", share_detail=f"MIG gi={gi} ci={ci} of {d.uuid}", gi=gi, ci=ci))
        devs.append(d)
    return devs


_T = TypeVar("_T")
_DEV_RE = re.compile(r"^(?:/dev/)?nvidia(\d+)$")
_LEGACY_MIG_RE = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$")


def _whole(d: _Dev, src: str) -> Gpu:
    return Gpu("nvml", "nvidia", d.uuid, d.model, physical_index=d.index, minor=d.minor, source=src)


def _by_prefix(token: str, cands: Sequence[tuple[str, _T]], what: str, src: str) -> _T:
    hits = [c for u, c in cands if u.lower().startswith(token.lower())]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise GpuResolveError(f"{src}: no {what} UUID starts with {token!r}; check nvidia-smi -L on this node")
    raise GpuResolveError(
        f"{src}: {token!r} is an ambiguous UUID prefix ({len(hits)} {what}s match); give more characters"
    )


def _resolve_token(tok: str, devs: list[_Dev], var: str, numeric_is_index: bool) -> Gpu:
    src = f"{var}={tok}"
    m = _DEV_RE.match(tok)
    if m:
        minor = int(m.group(1))
        hits = [d for d in devs if d.minor == minor]
        if not hits:
            raise GpuResolveError(f"{src}: no GPU has minor number {minor} (/dev/nvidia{minor})")
        return _whole(hits[0], src)
    if tok.isdigit():
        if not numeric_is_index:
            raise GpuResolveError(
                f"{src}: a numeric CUDA_VISIBLE_DEVICES is a job-relative, renumbered ordinal, not an "
                "NVML index; resolve from the Prolog's SLURM_JOB_GPUS or use GPU UUIDs"
            )
        idx = int(tok)
        hits = [d for d in devs if d.index == idx]
        if not hits:
            raise GpuResolveError(f"{src}: NVML index {idx} does not exist ({len(devs)} GPUs on this node)")
        return _whole(hits[0], src)
    m = _LEGACY_MIG_RE.match(tok)
    if m:
        parent = _by_prefix(m.group(1), [(d.uuid, d) for d in devs], "GPU", src)
        gi, ci = int(m.group(2)), int(m.group(3))
        for mi in parent.migs:
            if mi.gi == gi and mi.ci == ci:
                return replace(mi, source=src)
        raise GpuResolveError(f"{src}: GPU {parent.uuid} has no MIG instance gi={gi} ci={ci}")
    if tok.upper().startswith("MIG-"):
        return replace(_by_prefix(tok, [(mi.device_id, mi) for d in devs for mi in d.migs], "MIG instance", src),
                       source=src)
    t = tok if tok.upper().startswith("GPU-") else f"GPU-{tok}"
    return _whole(_by_prefix(t, [(d.uuid, d) for d in devs], "GPU", src), src)


def resolve_job_gpus(
    slurm_job_gpus: str | None = None,
    cuda_visible_devices: str | None = None,
    cuda_ordinals_are_nvml: bool = False,
    pynvml_module: Any = None,
    all_if_unset: bool = False,
) -> ResolvedGpus:
    """Resolve the job's GPUs to NVML devices (call once, in the Prolog).

    Precedence: a ``CUDA_VISIBLE_DEVICES`` holding UUIDs / MIG names is the most specific and wins;
    otherwise ``SLURM_JOB_GPUS`` (physical indices, or ``/dev/nvidiaN``, or UUIDs); a numeric
    ``CUDA_VISIBLE_DEVICES`` alone is an error (renumbered in-job ordinal) unless
    ``cuda_ordinals_are_nvml``. ``"NoDevFiles"`` / empty = no GPUs.

    Args:
        slurm_job_gpus: value of ``SLURM_JOB_GPUS`` (e.g. ``"0,2"``).
        cuda_visible_devices: value of ``CUDA_VISIBLE_DEVICES``.
        cuda_ordinals_are_nvml: caller guarantees numeric CUDA_VISIBLE_DEVICES are NVML indices.
        pynvml_module: the ``pynvml`` module (default: ``import pynvml``).
        all_if_unset: when both variables are empty, resolve every GPU on the node (whole GPUs;
            for ``slurm-energy run`` outside Slurm) instead of returning [].

    Returns:
        :class:`~slurm_energy.devices.gpu.ResolvedGpus` of :class:`~slurm_energy.devices.gpu.Gpu` in
        input order, duplicates removed; empty with ``reason`` when no GPU was allocated or NVML
        cannot initialise (no driver).

    Raises:
        GpuResolveError: a token names no device, an ambiguous UUID prefix, a missing MIG instance,
            or a numeric in-job ordinal. The message names the variable, the token and the fix.
    """
    cvd, sjg = split_tokens(cuda_visible_devices), split_tokens(slurm_job_gpus)
    if cvd and any(not t.isdigit() for t in cvd):
        tokens, var, numeric_ok = cvd, "CUDA_VISIBLE_DEVICES", False
    elif sjg:
        tokens, var, numeric_ok = sjg, "SLURM_JOB_GPUS", True
    elif cvd:
        tokens, var, numeric_ok = cvd, "CUDA_VISIBLE_DEVICES", cuda_ordinals_are_nvml
    elif all_if_unset and not cuda_visible_devices:
        tokens, var, numeric_ok = None, "all GPUs", True
    else:
        return ResolvedGpus([], "no GPUs allocated (SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES empty)")
    if pynvml_module is None:
        try:
            import importlib

            pynvml_module = importlib.import_module("pynvml")
        except ImportError as e:
            return ResolvedGpus([], f"pynvml not importable: {e}")
    pynvml = pynvml_module
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return ResolvedGpus([], f"NVML cannot initialise ({type(e).__name__}: {e}); GPUs not measured")
    try:
        devs = _inventory(pynvml)
        if tokens is None:
            return ResolvedGpus([_whole(d, "all GPUs") for d in devs],
                                "" if devs else "NVML reports no GPU on this node")
        by_uuid: dict[str, Gpu] = {}
        for tok in tokens:  # each token resolved (an error names it), a GPU named twice kept once
            g = _resolve_token(tok, devs, var, numeric_ok)
            by_uuid.setdefault(g.device_id, g)
        return ResolvedGpus(by_uuid.values())
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def node_nvidia_gpu_count(dev_dir: str = "/dev") -> int | None:
    """The node's NVIDIA GPUs: the ``/dev/nvidiaN`` device files (one per physical GPU, N its minor
    number; ``nvidiactl``, ``nvidia-uvm`` are not GPUs). None where there is none (unknown, or no
    NVIDIA GPU)."""
    import os

    try:
        n = sum(1 for f in os.listdir(dev_dir) if re.fullmatch(r"nvidia\d+", f))
    except OSError:
        return None
    return n or None


class NvmlBackend:
    """NVIDIA GPUs through NVML (``pynvml``, imported only when a job's GPUs are resolved).

    In the Prolog: ``SLURM_JOB_GPUS`` and ``CUDA_VISIBLE_DEVICES`` (:func:`resolve_job_gpus`'s
    precedence). In a job or outside Slurm: ``CUDA_VISIBLE_DEVICES``, every GPU when it is unset.
    """

    name = "nvml"
    reader = "slurm_energy.sampling.readers.nvml:open_gpu_readers"

    def resolve(self, env: Mapping[str, str], hw: HardwareConfig, *, in_prolog: bool) -> ResolvedGpus:
        """See :class:`slurm_energy.devices.gpu.GpuBackend`."""
        if in_prolog:
            return resolve_job_gpus(env.get("SLURM_JOB_GPUS"), env.get("CUDA_VISIBLE_DEVICES"))
        return resolve_job_gpus("", env.get("CUDA_VISIBLE_DEVICES", ""), all_if_unset=True)

    def node_count(self, hw: HardwareConfig) -> int | None:
        """The ``/dev/nvidiaN`` device files (:func:`node_nvidia_gpu_count`; no NVML call)."""
        return node_nvidia_gpu_count()


#: the registry's entry (:data:`slurm_energy.devices.gpu.GPU_BACKENDS`)
BACKEND = NvmlBackend()

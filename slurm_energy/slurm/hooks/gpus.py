"""The job's GPUs, resolved once in the Prolog: NVML UUIDs, else the AMD/Intel cards' PCI bus ids."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from slurm_energy.slurm.hooks.config_cache import HookSite
    from slurm_energy.slurm.hooks.context import JobFacts

__all__ = ["resolve_gpus"]


def resolve_gpus(ctx: JobFacts, cfg: HookSite, env: Mapping[str, str]) -> None:
    """Resolve SLURM_JOB_GPUS (physical indices) once: to NVML UUIDs, else (no NVIDIA GPU) to the
    AMD/Intel cards' PCI bus ids from sysfs; record why not otherwise."""
    try:
        from slurm_energy.devices.gpus import resolve_job_gpus

        res = resolve_job_gpus(ctx.job_gpus, ctx.cuda_visible_devices)  # a list, with .reason when empty
        ctx.gpu_uuids = [g.uuid for g in res]
        if not ctx.gpu_uuids:
            ctx.gpu_resolution_error = res.reason or "no NVML device"
    except Exception as e:
        ctx.gpu_resolution_error = f"{type(e).__name__}: {e}"
    if ctx.gpu_uuids:
        return
    try:  # sysfs reads only: cheap enough for the Prolog
        from slurm_energy.devices.gpus_drm import resolve_drm_gpus

        drm = resolve_drm_gpus(ctx.job_gpus, env.get("ROCR_VISIBLE_DEVICES"), env.get("HIP_VISIBLE_DEVICES"),
                               env.get("ZE_AFFINITY_MASK"), cfg.hardware.drm_root, cfg.hardware.kfd_root,
                               # slurmd writes the Prolog's ZE_AFFINITY_MASK from the GRES allocation
                               # itself (gres_common.c: one local index per GRES device, i.e. per card
                               # named by gres.conf's File=/dev/dri/renderD*): its ordinals count cards,
                               # whatever the runtime's FLAT default, unless slurmd's environment names a mode
                               ze_flat_device_hierarchy=env.get("ZE_FLAT_DEVICE_HIERARCHY") or "COMPOSITE")
        ctx.drm_gpus = [g.to_dict() for g in drm]
        if ctx.drm_gpus:
            ctx.gpu_resolution_error = ""
        else:
            ctx.gpu_resolution_error += f"; {drm.reason}"
    except Exception as e:
        ctx.gpu_resolution_error += f"; AMD/Intel: {type(e).__name__}: {e}"

"""The job's GPUs, resolved once in the Prolog through the GPU backends (:mod:`slurm_energy.devices.gpu`)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from slurm_energy.slurm.config_cache import HookSite
    from slurm_energy.slurm.context import JobFacts

__all__ = ["resolve_gpus"]


def resolve_gpus(ctx: JobFacts, cfg: HookSite, env: Mapping[str, str]) -> None:
    """Resolve SLURM_JOB_GPUS (physical indices) once, through the GPU backends
    (:mod:`slurm_energy.devices.gpu`: NVML, else the AMD/Intel cards from sysfs); record why not otherwise."""
    try:
        from slurm_energy.devices.gpu import resolve_job_gpus
        from slurm_energy.devices.hardware import HardwareConfig

        job_env = {**env, "SLURM_JOB_GPUS": ctx.job_gpus or "", "CUDA_VISIBLE_DEVICES": ctx.cuda_visible_devices or ""}
        res = resolve_job_gpus(job_env, HardwareConfig.of(cfg.hardware), in_prolog=True)  # with .reason when empty
        ctx.gpus = [g.to_dict() for g in res]
        ctx.gpu_resolution_error = res.reason
    except Exception as e:
        ctx.gpu_resolution_error = f"{type(e).__name__}: {e}"

"""Prolog and Epilog entry points: short, never raising, exit 0 within 2 s.

Prolog (as root, no PATH): parse the environment -> job spool -> resolve the job's GPUs once ->
start the sampler detached (own session, stdio to a log) -> exit 0.

Epilog (as root): stop the sampler (TERM, bounded wait, KILL; a zombie counts as stopped); start
the finalizer detached with the outcome -> exit 0. The finalizer (:mod:`slurm_energy.slurm.finalize`)
does the slow part outside the Epilog's 2 s: the last counter reading when the sampler did not end
cleanly, summary, merge, carbon, store, report as the job's user.

Every failure is logged and recorded on the job (``errors-<node>.jsonl`` in its spool); nothing is
raised to slurmd (a non-zero Prolog/Epilog drains the node).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

from slurm_energy.slurm.env import JobContext, parse_slurm_env
from slurm_energy.slurm.runtime import FALLBACK_LOG_DIR, load_config, reading_row, readers_for, setup_logging, spool_from_dir
from slurm_energy.slurm.spool import JobSpool, find_attempt, new_run, spool_belongs_to_other_run, write_private

__all__ = ["FALLBACK_LOG_DIR", "epilog", "main", "prolog", "sampler_main", "setup_logging", "spawn"]

log = logging.getLogger("slurm_energy.hooks")


def _python() -> str:
    return sys.executable or "/usr/bin/python3"


def _begin(env, errors: list[str], epilog: bool = False):
    """Config (defaults on error), logging, the job from the environment, its spool; config errors
    are logged and recorded on the job. Raises SlurmEnvError/OSError for the caller to log."""
    cfg = load_config(errors, light=True)  # no pydantic on the Prolog/Epilog path
    setup_logging(cfg.paths.log_dir)
    for e in errors:
        log.error(e)
    ctx = parse_slurm_env(env)
    run = {"sluid": ctx.sluid, "slurm_start_time": ctx.slurm_start_time, "nodelist": ctx.nodelist}
    if epilog:  # a requeued job's Epilog may carry the next attempt's restart count
        spool = find_attempt(cfg.paths.spool_dir, ctx.job_id, ctx.node, ctx.restart_count, run)
        if os.path.exists(spool.done) and spool_belongs_to_other_run(spool, run):  # no Prolog ran for this run
            spool = JobSpool(spool.spool_dir, ctx.job_id, ctx.restart_count, ctx.node,
                             ctx.sluid or f"t{ctx.slurm_start_time or int(time.time())}")
        spool.ensure()
    else:  # a reused job id gets its own spool, never the older run's files
        tag = ctx.sluid or f"t{ctx.slurm_start_time or int(time.time())}"
        spool = new_run(cfg.paths.spool_dir, ctx.job_id, ctx.restart_count, ctx.node, run, tag).ensure()
    for e in errors:
        spool.record_error(e)
    return cfg, ctx, spool


def prolog(env=None) -> int:
    """The Prolog. Always returns 0."""
    t0 = time.time()
    errors: list[str] = []
    spool = None
    try:
        cfg, ctx, spool = _begin(env, errors)
        ctx.prolog_time = t0
        _resolve_gpus(ctx, cfg, os.environ if env is None else env)
        write_private(spool.context, ctx.to_json())
        _prepare_marks(ctx, spool)
        try:
            reading_row(cfg, ctx, spool, "prolog")
        except Exception as e:  # the sampler still starts; its own first sample is the start then
            spool.record_error(f"prolog reading: {type(e).__name__}: {e}")
        pid = _start_sampler(cfg, spool)
        write_private(spool.pidfile, str(pid))
        log.info("prolog job=%s node=%s sampler=%d gpus=%s (%.3f s)", ctx.job_id, ctx.node, pid,
                 ctx.gpu_uuids or [g["device_id"] for g in ctx.drm_gpus] or ctx.job_gpus or "-", time.time() - t0)
    except BaseException as e:  # noqa: BLE001 - a Prolog must never fail the job
        log.exception("prolog failed")
        if spool is not None:
            spool.record_error(f"prolog: {type(e).__name__}: {e}")
    return 0


def _prepare_marks(ctx: JobContext, spool: JobSpool) -> None:
    """The job's marks directory, owned by the job's user (``slurm_energy.track`` finds it and
    leaves its phase marks there instead of starting a second sampler). Failure: recorded only."""
    try:
        from slurm_energy.sampling.marks import prepare_job_dir

        if ctx.uid is None or ctx.gid is None:
            raise ValueError("the job's uid/gid are unknown (SLURM_JOB_UID/SLURM_JOB_GID)")
        prepare_job_dir(ctx.job_id, ctx.uid, ctx.gid, node=ctx.node)
    except Exception as e:
        spool.record_error(f"prolog: marks directory not made ({type(e).__name__}: {e}); "
                           "phases marked by the job are not recorded")


def _resolve_gpus(ctx: JobContext, cfg, env) -> None:
    """Resolve SLURM_JOB_GPUS (physical indices) once: to NVML UUIDs, else (no NVIDIA GPU) to the
    AMD/Intel cards' PCI bus ids from sysfs; record why not otherwise."""
    if not ctx.job_gpus:
        return
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
                               env.get("ZE_AFFINITY_MASK"), cfg.hardware.drm_root, cfg.hardware.kfd_root)
        ctx.drm_gpus = [g.to_dict() for g in drm]
        if ctx.drm_gpus:
            ctx.gpu_resolution_error = ""
        else:
            ctx.gpu_resolution_error += f"; {drm.reason}"
    except Exception as e:
        ctx.gpu_resolution_error += f"; AMD/Intel: {type(e).__name__}: {e}"


def _start_sampler(cfg, spool: JobSpool) -> int:
    logf = os.path.join(spool.dir, f"sampler-{spool.node}.log")
    return spawn(["-m", "slurm_energy.slurm.hooks", "sampler", spool.dir, spool.node], logf)


def spawn(args: list[str], logf: str) -> int:
    """Start ``python -I args...`` detached (see :mod:`slurm_energy.slurm.detach`); isolated, so only
    the installed package is imported (never one from a working directory or PYTHONPATH)."""
    from slurm_energy.slurm.detach import spawn_detached

    env = {"LANG": "C.UTF-8"}
    for var in ("SLURM_ENERGY_CONFIG", "SLURM_CONF", "SLURM_ENERGY_MARKS_DIR"):  # the finalizer asks scontrol for the job's state
        if os.environ.get(var):
            env[var] = os.environ[var]
    return spawn_detached([_python(), "-I", *args], logf, env=env)


_EARLY_STOP: list[int] = []  # a TERM that arrives while the sampler is still starting up (very short jobs)


def sampler_main(job_dir: str, node: str) -> int:
    """The detached per-job sampler (started by the Prolog). Returns 0."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: _EARLY_STOP.append(1))  # before the slow imports
    errors: list[str] = []
    cfg = load_config(errors)
    setup_logging(cfg.paths.log_dir, "sampler.log")
    spool, ctx = spool_from_dir(job_dir, node)
    try:
        from slurm_energy.slurm.probe import SlurmJobProbe
        from slurm_energy.sampling.sampler import Sampler
        from slurm_energy.sampling.samplefile import SampleWriter

        readers, _ = readers_for(cfg, ctx, spool, errors)
        for e in errors:
            spool.record_error(e)
        probe = SlurmJobProbe(ctx.job_id, ctx.uid if ctx.uid is not None else -1, ctx.node,
                              on_job_env=lambda facts: write_private(spool.jobenv, json.dumps(facts)))
        writer = SampleWriter(spool.samples)
        from slurm_energy.slurm.finalize import interim

        s = Sampler(readers, probe, writer, interval_s=cfg.sampling.interval_s,
                    interim_every_s=cfg.sampling.interim_s, on_interim=lambda: interim(cfg, spool, ctx))
        s.install_signal_handlers()
        if _EARLY_STOP:
            s.stop()  # the job already ended: one start and one final sample, then exit
        n = s.run()
        log.info("sampler job=%s node=%s wrote %d samples", ctx.job_id, node, n)
    except BaseException as e:  # noqa: BLE001
        log.exception("sampler failed")
        spool.record_error(f"sampler: {type(e).__name__}: {e}")
    return 0


def epilog(env=None) -> int:
    """The Epilog. Always returns 0."""
    t_end = time.time()
    errors: list[str] = []
    spool = None
    try:
        cfg, ctx, spool = _begin(env, errors, epilog=True)
        if not os.path.exists(spool.context):  # the Prolog failed or never ran: record from our env
            spool.record_error("epilog: no Prolog context (Prolog failed or was not configured); "
                               "nothing was sampled on this node")
            write_private(spool.context, ctx.to_json())
        outcome = _stop_sampler(spool)
        logf = os.path.join(spool.dir, f"finalize-{spool.node}.log")
        spawn(["-m", "slurm_energy.slurm.hooks", "finalize", spool.dir, spool.node, repr(t_end),
               ctx.exit_code or "", outcome], logf)
        write_private(spool.done, repr(t_end))
        log.info("epilog job=%s node=%s sampler=%s (%.3f s)", ctx.job_id, ctx.node, outcome, time.time() - t_end)
    except BaseException as e:  # noqa: BLE001 - an Epilog must never drain the node
        log.exception("epilog failed")
        if spool is not None:
            spool.record_error(f"epilog: {type(e).__name__}: {e}")
    return 0


def _stop_sampler(spool: JobSpool) -> str:
    from slurm_energy.slurm.detach import cmdline, stop_process

    try:
        with open(spool.pidfile) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return "no_pidfile"
    argv = cmdline(pid)
    if argv and (spool.dir not in argv or "sampler" not in argv):
        return "not_running"  # the PID was reused by another process: never signal it
    # worst case (a sampler ignoring TERM): ~0.4 s start-up + 1.0 + 0.2 s, inside the 1.9 s guard
    return stop_process(pid, term_wait_s=1.0, kill_wait_s=0.2)


def main(argv: list[str] | None = None) -> int:
    """``python -m slurm_energy.slurm.hooks {prolog|epilog|sampler DIR NODE|finalize DIR NODE T EXIT OUTCOME}``."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        what = argv[0] if argv else ""
        if what == "prolog":
            return prolog()
        if what == "epilog":
            return epilog()
        if what == "sampler":
            return sampler_main(argv[1], argv[2])
        if what == "finalize":
            from slurm_energy.slurm.finalize import finalize_main

            return finalize_main(argv[1], argv[2], float(argv[3]), *argv[4:6])
        print("usage: python -m slurm_energy.slurm.hooks {prolog|epilog|sampler|finalize}", file=sys.stderr)
    except BaseException:  # noqa: BLE001
        logging.getLogger("slurm_energy").exception("hook %s failed", argv[:1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

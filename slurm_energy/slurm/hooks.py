"""Prolog and Epilog entry points: short, never raising, exit 0 within 2 s.

Prolog (as root, no PATH): parse the environment -> job spool -> resolve the job's GPUs once ->
start the sampler detached (own process group, stdio to a log) -> exit 0.

Epilog (as root): stop the sampler (TERM, bounded wait, KILL; a zombie counts as stopped); start
the finalizer detached with the outcome -> exit 0. The finalizer (:mod:`slurm_energy.slurm.finalize`)
does the slow part outside the Epilog's 2 s: the last counter reading when the sampler did not end
cleanly, summary, merge, carbon, store, report as the job's user.

Every failure is logged and recorded on the job (``errors-<node>.jsonl`` in its spool); nothing is
raised to slurmd (a non-zero Prolog/Epilog drains the node).
"""

from __future__ import annotations

import signal
import sys

_EARLY_STOP: list[int] = []  # a TERM that arrives while the sampler is still starting up (very short jobs)
if __name__ == "__main__" and sys.argv[1:2] == ["sampler"]:
    # first thing, before the imports below: the Epilog sends TERM only once it is handled
    # (detach.stop_process handler_wait), and a short job's Epilog waits for this line
    signal.signal(signal.SIGTERM, lambda *_: _EARLY_STOP.append(1))

import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from typing import TYPE_CHECKING, Optional  # noqa: E402

from slurm_energy.slurm.env import JobContext, parse_slurm_env  # noqa: E402
from slurm_energy.slurm.runtime import (  # noqa: E402
    FALLBACK_LOG_DIR, load_config, reading_row, readers_for, setup_logging, spool_from_dir)
from slurm_energy.slurm.spool import JobSpool, usable_spool, write_private  # noqa: E402

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig

__all__ = ["FALLBACK_LOG_DIR", "epilog", "main", "prolog", "sampler_main", "setup_logging", "spawn"]

log = logging.getLogger("slurm_energy.hooks")


def _python() -> str:
    return sys.executable or "/usr/bin/python3"


def _begin(env, errors: list[str]):
    """Config (last good copy on error), logging, the job from the environment; config errors are
    logged. Raises SlurmEnvError for the caller to log."""
    cfg = load_config(errors, light=True)  # no pydantic on the Prolog/Epilog path
    setup_logging(cfg.paths.log_dir)
    for e in errors:
        log.error(e)
    return cfg, parse_slurm_env(env)


def hook_elapsed_s() -> Optional[float]:
    """Seconds since the hook script's ``timeout`` guard (our parent) started: the hook's wall time
    as slurmd sees it, within 10 ms (clock ticks) and the shell's few ms before it. None if unknown."""
    try:
        with open(f"/proc/{os.getppid()}/stat", "rb") as f:
            start_ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as f:
            up = float(f.read().split()[0])
        return max(0.0, up - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _log_hook_time(which: str, job_id: str, node: str, outcome: str) -> None:
    """One line per hook run, parsed by benchmarks/fault_run.py: ``hook=prolog job=J ... wall_s=``."""
    wall = hook_elapsed_s()
    log.info("hook=%s job=%s node=%s outcome=%s wall_s=%s", which, job_id, node, outcome,
             "?" if wall is None else f"{wall:.3f}")


def prolog(env=None) -> int:
    """The Prolog. Always returns 0."""
    t0 = time.time()
    errors: list[str] = []
    spool, ctx, outcome = None, None, "failed"
    try:
        cfg, ctx = _begin(env, errors)
        ctx.prolog_time = t0
        _resolve_gpus(ctx, cfg, os.environ if env is None else env)
        spool = usable_spool(cfg, ctx, errors)
        for e in errors:
            log.error("job %s: %s", ctx.job_id, e)
            if spool is not None:
                spool.record_error(e)
        if spool is None:  # the Epilog hands the job to the finalizer from its environment
            outcome = "no_spool"
            return 0
        _prepare_marks(ctx, spool)
        try:
            reading_row(cfg, ctx, spool, "prolog")
        except Exception as e:  # the sampler still starts; its own first sample is the start then
            spool.record_error(f"prolog reading: {type(e).__name__}: {e}")
        pid = _start_sampler(cfg, spool)
        write_private(spool.pidfile, str(pid))
        outcome = "ok" if spool.spool_dir == cfg.paths.spool_dir else "fallback_spool"
        log.info("prolog job=%s node=%s sampler=%d gpus=%s spool=%s (%.3f s)", ctx.job_id, ctx.node, pid,
                 ctx.gpu_uuids or [g["device_id"] for g in ctx.drm_gpus] or ctx.job_gpus or "-", spool.dir,
                 time.time() - t0)
    except BaseException as e:  # noqa: BLE001 - a Prolog must never fail the job
        log.exception("prolog failed")
        if spool is not None:
            spool.record_error(f"prolog: {type(e).__name__}: {e}")
    finally:
        _log_hook_time("prolog", getattr(ctx, "job_id", "?"), getattr(ctx, "node", "?"), outcome)
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
    return spawn(["-m", "slurm_energy.slurm.hooks", "sampler", spool.dir, spool.node], logf, cfg.paths.log_dir,
                 nice=SAMPLER_NICE)


#: Niceness of the detached finalizers: their CPU (imports, summary, store, report: a second or more
#: each) must not slow the Prolog/Epilog of the jobs starting and ending meanwhile (a burst), nor the
#: jobs themselves. 19 (CFS weight 15 against a hook's 1024): a burst's dozens of finalizers queued
#: at once still leave a hook most of the CPU it can get.
FINALIZER_NICE = 19
#: Niceness of the detached sampler: its start-up (imports, readers) and interims yield to the hooks
#: and the jobs; samples are timestamped when read, so a late wake-up costs no accuracy. The Epilog
#: lowers it again (:func:`slurm_energy.slurm.detach.unnice`) before its TERM: the last sample and
#: the exit it waits for run at the Epilog's priority.
SAMPLER_NICE = 10
#: Finalizers of one spool that run at once (2, or a quarter of the node's CPUs); the others wait
#: their turn before their imports (:func:`slurm_energy.slurm.detach.slot`: next to no CPU, ~15 MB
#: each). Niced, they queue up in a burst: 149 of them held 9.2 GB after a 300-job burst on the
#: 2-CPU test cluster before this limit.
FINALIZER_SLOTS = max(2, (os.cpu_count() or 2) // 4)


def spawn(args: list[str], logf: str, log_dir: str = FALLBACK_LOG_DIR, nice: int = 0) -> int:
    """Start ``python -I args...`` detached (see :mod:`slurm_energy.slurm.detach`); isolated, so only
    the installed package is imported (never one from a working directory or PYTHONPATH). Its
    stdout/stderr go to ``logf``, else (full or read-only spool) ``log_dir``, else /dev/null.
    ``nice``: added to its niceness (0: as the hook's)."""
    from slurm_energy.slurm.detach import spawn_detached

    env = {"LANG": "C.UTF-8"}
    for var in ("SLURM_ENERGY_CONFIG", "SLURM_CONF", "SLURM_ENERGY_MARKS_DIR"):  # the finalizer asks scontrol for the job's state
        if os.environ.get(var):
            env[var] = os.environ[var]
    for lf in (logf, os.path.join(log_dir, os.path.basename(logf)), os.devnull):
        try:
            os.close(os.open(lf, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            break
        except OSError:
            continue
    pid = spawn_detached([_python(), "-I", *args], lf, env=env, nice=nice)
    try:  # PrologFlags=RunInJob: the hook runs in the job's extern step; the child must not
        from slurm_energy.slurm.cgroup_move import leave_job_cgroups

        moved = leave_job_cgroups(pid)
        if moved:
            log.info("moved pid %d out of the job's cgroups (%d hierarchies: RunInJob)", pid, len(moved))
    except OSError as e:
        log.warning("pid %d stays in the job's cgroups: %s", pid, e)
    return pid


def sampler_main(job_dir: str, node: str) -> int:
    """The detached per-job sampler (started by the Prolog). Returns 0."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # called other than as __main__ (tests)
        signal.signal(signal.SIGTERM, lambda *_: _EARLY_STOP.append(1))
    errors: list[str] = []
    # the resolved copy, as in the Prolog: a short job's Epilog waits for this start-up (its TERM
    # takes effect once the sampler is running); the full config (carbon) only for the interims
    cfg = load_config(errors, light=True)
    setup_logging(cfg.paths.log_dir, "sampler.log")
    spool, ctx = spool_from_dir(job_dir, node)
    try:
        from slurm_energy.slurm.probe import SlurmJobProbe
        from slurm_energy.sampling.sampler import Sampler, freeze_gc
        from slurm_energy.sampling.samplefile import SampleWriter

        readers, _ = readers_for(cfg, ctx, spool, errors)
        for e in errors:
            spool.record_error(e)
        probe = SlurmJobProbe(ctx.job_id, ctx.uid if ctx.uid is not None else -1, ctx.node, sluid=ctx.sluid,
                              on_job_env=lambda facts: write_private(spool.jobenv, json.dumps(facts)))
        writer = SampleWriter(spool.samples)
        s = Sampler(readers, probe, writer, interval_s=cfg.sampling.interval_s,
                    gone_after_s=cfg.sampling.epilog_wait_s,
                    interim_every_s=cfg.sampling.interim_s, on_interim=_Interim(spool, ctx))
        s.install_signal_handlers()
        if _EARLY_STOP:
            s.stop()  # the job already ended: one start and one final sample, then exit
        freeze_gc()
        n = s.run()
        log.info("sampler job=%s node=%s wrote %d samples", ctx.job_id, node, n)
        if s.gone_at is not None:
            _finish_without_epilog(cfg, spool, ctx, s.gone_at)
    except BaseException as e:  # noqa: BLE001
        log.exception("sampler failed")
        spool.record_error(f"sampler: {type(e).__name__}: {e}")
    return 0


def _finish_without_epilog(cfg, spool: JobSpool, ctx: JobContext, gone_at: float) -> None:
    """The job ended ``sampling.epilog_wait_s`` ago and no Epilog finished on this node (killed by
    its 1.9 s guard under load, slurmd restarted, no Epilog configured): do what it would have
    done, so the node's record (and a multi-node job's merge, which waits for every node) is not
    left to ``collect``. The Epilog's ``done`` marker is written first: a late Epilog then ignores
    the run, as it does a repeated one. The end time is when the sampler saw the job gone."""
    if os.path.exists(spool.done):
        return
    try:
        write_private(spool.done, json.dumps({"t": gone_at, "sampler": "epilog_missing", "exit_code": ""}))
    except OSError as e:  # a read-only spool: the finalizer still runs; collect would too
        log.warning("job %s: %s not written: %s", ctx.job_id, spool.done, e)
    spawn(["-m", "slurm_energy.slurm.hooks", "finalize", spool.dir, spool.node, repr(gone_at), "", "epilog_missing"],
          os.path.join(spool.dir, f"finalize-{spool.node}.log"), cfg.paths.log_dir, nice=FINALIZER_NICE)
    log.warning("sampler job=%s node=%s: no Epilog within %.0f s of the job's end; finalizer started by the sampler",
                ctx.job_id, spool.node, cfg.sampling.epilog_wait_s)


class _Interim:
    """The sampler's interim summary: the finalizer's module and the full site config (carbon) are
    loaded at the first call, not at the sampler's start (most jobs end before one is due)."""

    def __init__(self, spool: JobSpool, ctx: JobContext):
        self.spool, self.ctx = spool, ctx
        self.cfg: Optional[SiteConfig] = None

    def __call__(self) -> None:
        from slurm_energy.slurm.finalize import interim

        if self.cfg is None:
            self.cfg = load_config([])  # its problems are already on the job (the Prolog's and the sampler's)
        interim(self.cfg, self.spool, self.ctx)


def epilog(env=None) -> int:
    """The Epilog. Always returns 0."""
    t_end = time.time()
    errors: list[str] = []
    spool, ctx, outcome = None, None, "failed"
    try:
        cfg, ctx = _begin(env, errors)
        spool = usable_spool(cfg, ctx, errors, epilog=True)
        if spool is None:  # no spool at all: the finalizer gets the job from argv, needs no disk
            outcome = "no_spool"
            sampler = _stop_sampler(None, ctx)
            spawn(["-m", "slurm_energy.slurm.hooks", "finalize-env", ctx.to_json(), repr(t_end), ctx.exit_code or "",
                   sampler, json.dumps(errors)], os.path.join(cfg.paths.log_dir, "finalize.log"), cfg.paths.log_dir,
                  nice=FINALIZER_NICE)
            log.error("epilog job=%s node=%s: no usable spool (%s); finalizer started from the environment",
                      ctx.job_id, ctx.node, "; ".join(errors))
            return 0
        for e in errors:
            spool.record_error(e)
        if os.path.exists(spool.done):  # Slurm < 26.05 can run the Epilog twice for one run
            log.info("epilog job=%s node=%s: this run's Epilog already ran; repeated Epilog ignored", ctx.job_id, ctx.node)
            return 0
        if not _has_prolog(spool):  # the Prolog failed or never ran: record from our env
            spool.record_error("epilog: no Prolog context (Prolog failed or was not configured); "
                               "nothing was sampled on this node")
        outcome = _stop_sampler(spool, ctx)
        logf = os.path.join(spool.dir, f"finalize-{spool.node}.log")
        spawn(["-m", "slurm_energy.slurm.hooks", "finalize", spool.dir, spool.node, repr(t_end),
               ctx.exit_code or "", outcome], logf, cfg.paths.log_dir, nice=FINALIZER_NICE)
        try:
            write_private(spool.done, json.dumps({"t": t_end, "sampler": outcome, "exit_code": ctx.exit_code or ""}))
        except OSError as e:  # a read-only spool: the finalizer is already on its way
            log.warning("job %s: %s not written: %s", ctx.job_id, spool.done, e)
        log.info("epilog job=%s node=%s sampler=%s (%.3f s)", ctx.job_id, ctx.node, outcome, time.time() - t_end)
    except BaseException as e:  # noqa: BLE001 - an Epilog must never drain the node
        log.exception("epilog failed")
        if spool is not None:
            spool.record_error(f"epilog: {type(e).__name__}: {e}")
    finally:
        _log_hook_time("epilog", getattr(ctx, "job_id", "?"), getattr(ctx, "node", "?"), outcome)
    return 0


def _has_prolog(spool: JobSpool) -> bool:
    """True if the context in the spool was written by the Prolog (it sets prolog_time)."""
    try:
        with open(spool.context, encoding="utf-8") as f:
            return bool(JobContext.from_json(f.read()).prolog_time)
    except (OSError, ValueError):
        return False


def _stop_sampler(spool: Optional[JobSpool], ctx: JobContext) -> str:
    from slurm_energy.slurm.detach import cmdline, find_sampler, stop_process, unnice

    pid = None
    if spool is not None:
        try:
            with open(spool.pidfile) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pid = None
    if pid is None:  # pidfile gone or unreadable (a spool full or remounted): look in /proc
        suffix = "/jobs/" + (os.path.basename(spool.dir) if spool is not None else f"{ctx.job_id}-r{ctx.restart_count}")
        pid = find_sampler(suffix, ctx.node)
        if pid is None:
            return "no_pidfile"
    else:
        argv = cmdline(pid)
        if argv and (spool is None or spool.dir not in argv or "sampler" not in argv):
            return "not_running"  # the PID was reused by another process: never signal it
    # worst case (a sampler ignoring TERM): ~0.4 s start-up + 1.0 + 0.2 s, inside the 1.9 s guard;
    # a sampler still starting (a short job) gets TERM once it handles it, at the Epilog's priority
    unnice(pid)
    return stop_process(pid, term_wait_s=1.0, kill_wait_s=0.2, handler_wait=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m slurm_energy.slurm.hooks {prolog|epilog|sampler DIR NODE|finalize DIR NODE T EXIT OUTCOME|
    finalize-env CONTEXT_JSON T EXIT OUTCOME ERRORS_JSON}``."""
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
            from slurm_energy.slurm.detach import slot

            # <spool>/jobs/<run>: at most FINALIZER_SLOTS finalizers of the spool past this point
            with slot(os.path.dirname(os.path.dirname(argv[1].rstrip("/"))), "finalize", FINALIZER_SLOTS):
                if os.path.exists(JobSpool.from_dir(argv[1], argv[2]).finalized):
                    return 0  # `collect` finished it while this one waited for a slot (files untouched 5 min)
                from slurm_energy.slurm.finalize import finalize_main

                return finalize_main(argv[1], argv[2], float(argv[3]), *argv[4:6])
        if what == "finalize-env":
            from slurm_energy.slurm.finalize_nodata import finalize_env_main

            return finalize_env_main(argv[1], float(argv[2]), argv[3], argv[4], json.loads(argv[5]))
        print("usage: python -m slurm_energy.slurm.hooks {prolog|epilog|sampler|finalize}", file=sys.stderr)
    except BaseException:  # noqa: BLE001
        logging.getLogger("slurm_energy").exception("hook %s failed", argv[:1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Prolog and Epilog: short, never raising, exit 0 within 2 s, and light to start (issue 12).

Prolog (as root, no PATH): parse the environment -> job spool -> resolve the job's GPUs once ->
the first counter reading (on a node without job GPUs the raw files only, turned into the row by
the sampler: :mod:`slurm_energy.slurm.prolograw`) -> start the sampler detached (own process group,
stdio to a log) -> exit 0.

Epilog (as root): stop the sampler (TERM, bounded wait, KILL; a zombie counts as stopped); queue
the job with the outcome for the node's finalizer, started detached only when none runs or stands
by (:func:`hand_over`, :mod:`slurm_energy.slurm.finalize_queue`) -> exit 0. The finalizer
(:mod:`slurm_energy.slurm.finalize`) does the slow part outside the Epilog's 2 s.

Every failure is logged and recorded on the job (``errors-<node>.jsonl`` in its spool); nothing is
raised to slurmd (a non-zero Prolog/Epilog drains the node).

A hook's CPU is mostly the interpreter's start-up and its imports, and a burst of jobs runs
hundreds of hooks at once, so this module imports os, sys, json and time and the package's light
modules only (no logging, typing, dataclasses or subprocess: the log line is one ``os.write``, the
job's context a dict, the detached start ``os.posix_spawn``). The hook scripts run it through
:mod:`slurm_energy.slurm.hookrun` as ``python -I -S``; ``site`` (third-party packages) is loaded
only on the rare paths that need one: a site config changed since its resolved copy (pydantic), a
job with GPUs (NVML). :mod:`slurm_energy.slurm.hooks` runs the sampler and finalizer.
"""

from __future__ import annotations

import json
import os
import sys
import time

from slurm_energy.slurm.envfields import context_dict, slurm_env_fields
from slurm_energy.slurm.hookconfig import ConfigView, cached_hook_config
from slurm_energy.slurm.spool import JobSpool, leave_no_spool_entry, usable_spool, write_private
from slurm_energy.textsafe import one_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FALLBACK_LOG_DIR", "FINALIZER_NICE", "SAMPLER_NICE", "epilog", "hook_elapsed_s", "main", "prolog", "spawn"]

FALLBACK_LOG_DIR = "/var/log/slurm-energy"
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


class HookLog:
    """The hooks' log (``hooks.log``, as :func:`slurm_energy.slurm.runtime.setup_logging` writes it:
    ``<date> <time>,<ms> <pid> slurm_energy.hooks <LEVEL> <message>``), one ``os.write`` a line."""

    def __init__(self) -> None:
        self.fd, self.path = 2, "<stderr>"

    def open(self, log_dir: str, name: str = "hooks.log") -> str:
        """Log to ``log_dir/name`` (root-only dir, file 0600), else to :data:`FALLBACK_LOG_DIR`,
        else stderr. Returns the log path."""
        for d in dict.fromkeys((log_dir, FALLBACK_LOG_DIR)):
            try:
                os.makedirs(d, mode=0o700, exist_ok=True)
                p = os.path.join(d, name)
                fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                os.fchmod(fd, 0o600)  # job names, users and paths: root-only, like the spool
            except OSError:
                continue
            if self.fd > 2:
                os.close(self.fd)
            self.fd, self.path = fd, p
            break
        return self.path

    def __call__(self, level: str, msg: str, more: str = "") -> None:
        """One log line: ``msg`` with CR/LF and control characters escaped (a user's job name or
        path cannot forge a line, :func:`slurm_energy.textsafe.one_line`); ``more`` (a traceback)
        follows on lines of their own, each indented and escaped."""
        t = time.time()
        line = (f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))},{int(t * 1000) % 1000:03d} "
                f"{os.getpid()} slurm_energy.hooks {level} {one_line(msg)}\n")
        line += "".join(f"    {one_line(x)}\n" for x in more.splitlines())
        try:
            os.write(self.fd, line.encode("utf-8", "replace"))
        except OSError:
            pass

    def exception(self, msg: str) -> None:
        """``msg`` and the traceback being handled, at ERROR."""
        import traceback

        self("ERROR", msg, traceback.format_exc().rstrip())


log = HookLog()


class JobFacts(ConfigView):
    """The job's context (every :class:`~slurm_energy.slurm.env.JobContext` field) as a dict with
    attribute access, read and set (the Prolog adds its time and the job's GPUs): what the spool,
    readers and marks read of a JobContext."""

    __setitem__ = dict.__setitem__  # type: ignore[assignment]

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def to_json(self) -> str:
        """JSON text of every field, as ``JobContext.to_json`` writes it."""
        return json.dumps(self, sort_keys=True)


def _enable_site() -> None:
    """Put site-packages on ``sys.path`` when started with ``-S`` (``-I`` still keeps the user's
    site and PYTHONPATH off): for a path that needs a third-party package."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def _begin(env: Any, errors: list[str]) -> tuple[Any, JobFacts]:
    """Config (resolved copy; a full load, last good copy on error, when site.yaml changed), the
    log, the job from the environment; config errors are logged. Raises SlurmEnvError."""
    got = cached_hook_config()
    if got is None:
        _enable_site()
        from slurm_energy.slurm.hookconfig import load_hook_config

        got = load_hook_config()
    cfg, problems = got
    errors += [f"site config problem: {m}" for m in problems]
    log.open(cfg.paths.log_dir)
    for e in errors:
        log("ERROR", e)
    return cfg, JobFacts(context_dict(slurm_env_fields(env)))


def hook_elapsed_s() -> float | None:
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


def _log_hook_time(which: str, ctx: JobFacts | None, outcome: str) -> None:
    """One line per hook run, parsed by benchmarks/fault_run.py: ``hook=prolog job=J ... wall_s=``."""
    wall = hook_elapsed_s()
    job, node = (ctx.job_id, ctx.node) if ctx is not None else ("?", "?")
    log("INFO", f"hook={which} job={job} node={node} outcome={outcome} wall_s={'?' if wall is None else f'{wall:.3f}'}")


def prolog(env: Any = None) -> int:
    """The Prolog. Always returns 0."""
    t0 = time.time()
    errors: list[str] = []
    spool, ctx, outcome = None, None, "failed"
    try:
        cfg, ctx = _begin(env, errors)
        ctx.prolog_time = t0
        if ctx.job_gpus:
            _enable_site()  # NVML's binding
            _resolve_gpus(ctx, cfg, os.environ if env is None else env)
        spool = usable_spool(cfg, ctx, errors)
        for e in errors:
            log("ERROR", f"job {ctx.job_id}: {e}")
            if spool is not None:
                spool.record_error(e)
        if spool is None:  # the Epilog hands the job to the finalizer from its environment
            outcome = "no_spool"
            return 0
        os.close(os.open(spool.prolog_running, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        _prepare_marks(ctx, spool, (cfg.paths.spool_dir, getattr(cfg.paths, "spool_fallback_dir", "")))
        _reading(cfg, ctx, spool)
        pid = spawn(["-m", "slurm_energy.slurm.hooks", "sampler", spool.dir, spool.node],
                    os.path.join(spool.dir, f"sampler-{spool.node}.log"), cfg.paths.log_dir, nice=SAMPLER_NICE)
        write_private(spool.pidfile, str(pid))
        outcome = "ok" if spool.spool_dir == cfg.paths.spool_dir else "fallback_spool"
        gpus = ctx.gpu_uuids or [g["device_id"] for g in ctx.drm_gpus] or ctx.job_gpus or "-"
        log("INFO", f"prolog job={ctx.job_id} node={ctx.node} sampler={pid} gpus={gpus} spool={spool.dir} "
                    f"({time.time() - t0:.3f} s)")
    except BaseException as e:
        log.exception("prolog failed")
        if spool is not None:
            spool.record_error(f"prolog: {type(e).__name__}: {e}")
    finally:
        if spool is not None:  # it finished (killed, this is not run: the file tells the finalizer)
            try:
                os.unlink(spool.prolog_running)
            except OSError:
                pass
        _log_hook_time("prolog", ctx, outcome)
    return 0


def _reading(cfg: Any, ctx: JobFacts, spool: JobSpool) -> None:
    """The job's first counter reading, now: the raw files (:mod:`slurm_energy.slurm.prolograw`;
    the sampler writes the row) when the node has a file list for them and the job no GPU, else
    the row itself through the readers. A failure is recorded; the sampler still starts (its own
    first sample is the start then)."""
    try:
        if not ctx.job_gpus:
            from slurm_energy.slurm.prolograw import snapshot

            if snapshot(cfg, spool):
                return
        from slurm_energy.slurm.runtime import reading_row

        reading_row(cfg, ctx, spool, "prolog")  # type: ignore[arg-type]  # JobFacts: JobContext's fields
    except Exception as e:
        spool.record_error(f"prolog reading: {type(e).__name__}: {e}")


def _prepare_marks(ctx: JobFacts, spool: JobSpool, spool_roots: tuple = ()) -> None:
    """The job's marks directory, owned by the job's user (``slurm_energy.track`` finds it and
    leaves its phase marks there instead of starting a second sampler), in a root apart from the
    spools (``spool_roots``: the configured spool and fallback spool). A few syscalls: what jobs
    left here is the node finalizer's sweep's to remove, never the Prolog's (its size is the users').
    Failure: recorded only."""
    try:
        from slurm_energy.sampling.marks import marks_root, prepare_job_dir

        if ctx.uid is None or ctx.gid is None:
            raise ValueError("the job's uid/gid are unknown (SLURM_JOB_UID/SLURM_JOB_GID)")
        root = os.path.realpath(marks_root())
        for sp in (spool.spool_dir, *spool_roots):
            sp = os.path.realpath(sp) if sp else ""
            if sp and (root == sp or root.startswith(sp + "/") or sp.startswith(root + "/")):
                raise ValueError(f"the marks root {root} and the spool {sp} overlap (the spool is root-only, 0700; "
                                 "users must reach their marks directory): give them separate roots "
                                 "($SLURM_ENERGY_MARKS_DIR, paths.spool_fallback_dir)")
        prepare_job_dir(ctx.job_id, ctx.uid, ctx.gid, node=ctx.node)
    except Exception as e:
        spool.record_error(f"prolog: marks directory not made ({type(e).__name__}: {e}); "
                           "phases marked by the job are not recorded")


def _resolve_gpus(ctx: JobFacts, cfg: Any, env: Any) -> None:
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


def _python() -> str:
    return sys.executable or "/usr/bin/python3"


#: The spool-less finalizer's arguments (the job's context as JSON, its end, exit code, sampler
#: outcome, errors) travel in this environment variable of the root process, not in its argv,
#: which ``ps`` shows every user (a job's name, work dir, user, account).
FINALIZE_ENV_VAR = "SLURM_ENERGY_FINALIZE_ENV"


def spawn(args: list[str], logf: str, log_dir: str = FALLBACK_LOG_DIR, nice: int = 0,
          private: dict[str, str] | None = None) -> int:
    """Start ``python -I args...`` detached (see :mod:`slurm_energy.slurm.detach`); isolated, so only
    the installed package is imported (never one from a working directory or PYTHONPATH). Its
    stdout/stderr go to ``logf``, else (full or read-only spool) ``log_dir``, else /dev/null.
    ``nice``: added to its niceness (0: as the hook's). ``private``: more environment variables, for
    what ``ps`` must not show other users (a root process's environment is root's to read only).
    Raises OSError/TimeoutError (not started)."""
    from slurm_energy.slurm import detach

    env = {"LANG": "C.UTF-8", **(private or {})}
    for var in ("SLURM_ENERGY_CONFIG", "SLURM_CONF", "SLURM_ENERGY_MARKS_DIR"):  # the finalizer asks scontrol for the job's state
        if os.environ.get(var):
            env[var] = os.environ[var]
    for lf in (logf, os.path.join(log_dir, os.path.basename(logf)), os.devnull):
        try:
            os.close(os.open(lf, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            break
        except OSError:
            continue
    pid = detach.spawn_detached([_python(), "-I", *args], lf, env=env, nice=nice)
    try:  # PrologFlags=RunInJob: the hook runs in the job's extern step; the child must not
        from slurm_energy.slurm.cgroup_move import leave_job_cgroups

        moved = leave_job_cgroups(pid)
        if moved:
            log("INFO", f"moved pid {pid} out of the job's cgroups ({len(moved)} hierarchies: RunInJob)")
    except OSError as e:
        log("WARNING", f"pid {pid} stays in the job's cgroups: {e}")
    return pid


def epilog(env: Any = None) -> int:
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
            args = [ctx.to_json(), repr(t_end), ctx.exit_code or "", sampler, json.dumps(errors)]
            try:  # its finalizer may be killed: the node finalizer's sweep runs it again from this
                leave_no_spool_entry(cfg.paths.log_dir, ctx.job_id, ctx.restart_count, ctx.node, args)
            except OSError as err:
                log("WARNING", f"job {ctx.job_id}: no entry in {cfg.paths.log_dir} for its finalizer ({err})")
            spawn(["-m", "slurm_energy.slurm.hooks", "finalize-env", f"{ctx.job_id}@{ctx.node}"],  # all ps shows
                  os.path.join(cfg.paths.log_dir, "finalize.log"), cfg.paths.log_dir, nice=FINALIZER_NICE,
                  private={FINALIZE_ENV_VAR: json.dumps(args)})  # the job's context: not in argv
            log("ERROR", f"epilog job={ctx.job_id} node={ctx.node}: no usable spool ({'; '.join(errors)}); "
                         "finalizer started from the environment")
            return 0
        for e in errors:
            spool.record_error(e)
        if os.path.exists(spool.done):  # Slurm < 26.05 can run the Epilog twice for one run
            log("INFO", f"epilog job={ctx.job_id} node={ctx.node}: this run's Epilog already ran; repeated Epilog ignored")
            return 0
        if not _has_prolog(spool):  # the Prolog failed or never ran: record from our env
            spool.record_error("epilog: no Prolog context (Prolog failed or was not configured); "
                               "nothing was sampled on this node")
        outcome = _stop_sampler(spool, ctx)
        hand_over(spool, t_end, ctx.exit_code or "", outcome, cfg.paths.log_dir)
        try:
            write_private(spool.done, json.dumps({"t": t_end, "sampler": outcome, "exit_code": ctx.exit_code or ""}))
        except OSError as e:  # a read-only spool: the finalizer is already on its way
            log("WARNING", f"job {ctx.job_id}: {spool.done} not written: {e}")
        log("INFO", f"epilog job={ctx.job_id} node={ctx.node} sampler={outcome} ({time.time() - t_end:.3f} s)")
    except BaseException as e:
        log.exception("epilog failed")
        if spool is not None:
            spool.record_error(f"epilog: {type(e).__name__}: {e}")
    finally:
        _log_hook_time("epilog", ctx, outcome)
    return 0


def hand_over(spool: JobSpool, t_end: float, exit_code: str, outcome: str, log_dir: str) -> None:
    """Give the ended job attempt to its node's finalizer: queue it
    (:func:`slurm_energy.slurm.spool.enqueue_finalize`) and start the queue's finalizer only when
    none runs or none stands by (:mod:`slurm_energy.slurm.finalize_queue`: two flock probes); when
    the entry cannot be written (a full or read-only spool), a finalizer for this job alone, as
    before. Raises OSError/TimeoutError (not started: ``collect`` finishes the job)."""
    from slurm_energy.slurm.spool import RUNNER_LOG, enqueue_finalize, needs_runner

    try:
        qdir = enqueue_finalize(spool, t_end, exit_code, outcome)
    except OSError as e:
        log("WARNING", f"job {spool.job_id}: not queued for the node's finalizer ({e}): one started for it alone")
        spawn(["-m", "slurm_energy.slurm.hooks", "finalize", spool.dir, spool.node, repr(t_end), exit_code, outcome],
              os.path.join(spool.dir, f"finalize-{spool.node}.log"), log_dir, nice=FINALIZER_NICE)
        return
    if needs_runner(qdir):
        spawn(["-m", "slurm_energy.slurm.hooks", "finalize-queue", qdir, spool.node], os.path.join(qdir, RUNNER_LOG),
              log_dir, nice=FINALIZER_NICE)


def _has_prolog(spool: JobSpool) -> bool:
    """True if the context in the spool was written by the Prolog (it sets prolog_time)."""
    try:
        with open(spool.context, encoding="utf-8") as f:
            d = json.load(f)
        return isinstance(d, dict) and bool(d.get("prolog_time"))
    except (OSError, ValueError):
        return False


def _stop_sampler(spool: JobSpool | None, ctx: JobFacts, term_wait_s: float = 1.0, kill_wait_s: float = 0.2) -> str:
    """Stop the job's sampler (its pidfile's PID if that is our sampler of this spool, else found in
    /proc): :func:`~slurm_energy.slurm.detach.stop_process`'s outcome, or ``no_pidfile``. The
    Epilog's waits by default; ``collect`` passes longer ones for a sampler that outlived its job."""
    from slurm_energy.slurm.detach import cmdline, find_sampler, is_our_sampler, stop_process, unnice

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
        if argv and (spool is None or spool.dir not in argv or "sampler" not in argv
                     or not is_our_sampler(pid, os.geteuid())):
            return "not_running"  # the PID was reused by another process (a user's): never signal it
    # worst case (a sampler ignoring TERM): ~0.4 s start-up + 1.0 + 0.2 s, inside the 1.9 s guard;
    # a sampler still starting (a short job) gets TERM once it handles it, at the Epilog's priority
    unnice(pid)
    return stop_process(pid, term_wait_s=term_wait_s, kill_wait_s=kill_wait_s, handler_wait=True)


def main(argv: list[str] | None = None) -> int:
    """``{prolog|epilog}`` (default ``sys.argv[1:]``): run that hook; always 0."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        what = argv[0] if argv else ""
        if what == "prolog":
            return prolog()
        if what == "epilog":
            return epilog()
        os.write(2, b"usage: python -I -S .../slurm_energy/slurm/hookrun.py {prolog|epilog}\n")
    except BaseException:
        log.exception(f"hook {argv[:1]} failed")
    return 0

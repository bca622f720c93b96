"""The Prolog and Epilog: short, never raising, exit 0 within 2 s, and light to start.

Prolog (:mod:`.prolog`, as root, no PATH): parse the environment -> job spool -> resolve the job's
GPUs once (:mod:`.gpus`) -> the first counter reading (on a node without job GPUs the raw files only,
turned into the row by the sampler: :mod:`slurm_energy.slurm.prolograw`) -> start the sampler
detached (own process group, stdio to a log) -> exit 0.

Epilog (:mod:`.epilog`, as root): stop the sampler (TERM, bounded wait, KILL; a zombie counts as
stopped: :func:`slurm_energy.slurm.processes.stop_sampler`); queue the job with the outcome for the
node's finalizer, started detached only when none runs or stands by (:func:`hand_over`,
:mod:`slurm_energy.slurm.jobend.queue`) -> exit 0. The finalizer (:mod:`slurm_energy.slurm.finalize`)
does the slow part outside the Epilog's 2 s.

Every failure is logged and recorded on the job (``errors-<node>.jsonl`` in its spool); nothing is
raised to slurmd (a non-zero Prolog/Epilog drains the node).

A hook's CPU is mostly the interpreter's start-up and its imports, and a burst of jobs runs
hundreds of hooks at once, so the hooks import os, sys, json and time and the package's light
modules only (no logging, typing, dataclasses or subprocess: the log line is one ``os.write``
(:class:`slurm_energy.slurm.log.WriteBackend`), the job's context a dict
(:class:`.context.JobFacts`), the detached start ``os.posix_spawn``). The hook scripts run
:mod:`.__main__` as ``python -I -S``; ``site`` (third-party packages) is loaded only on the rare
paths that need one: a site config changed since its resolved copy (pydantic), a job with GPUs
(NVML). This module holds what both hooks do: begin (config, log, job), start a detached process,
hand an ended job to its finalizer, log the hook's time. :mod:`slurm_energy.slurm.detached` runs
the sampler, :mod:`slurm_energy.slurm.jobend` the finalizers.
"""

from __future__ import annotations

import os
import sys

from slurm_energy.slurm.detach import JOBEND_MODULE
from slurm_energy.slurm.hooks.config_cache import cached_hook_config
from slurm_energy.slurm.hooks.context import JobFacts, context_dict, slurm_env_fields
from slurm_energy.slurm.log import FALLBACK_LOG_DIR, WriteBackend, get, use

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from slurm_energy.slurm.attempt import Attempt, SamplerEnd
    from slurm_energy.slurm.hooks.config_cache import HookSite

__all__ = ["FINALIZER_NICE", "FINALIZE_ENV_VAR", "SAMPLER_NICE", "begin", "hand_over", "hook_elapsed_s", "log_hook_time",
           "main", "spawn"]

log = get(__name__)
#: The hooks' log backend (``hooks.log`` in ``paths.log_dir``), installed by :func:`begin`.
WRITER = WriteBackend()

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
#: The spool-less finalizer's arguments (the job's context as JSON, its end, exit code, sampler
#: outcome, errors) travel in this environment variable of the root process, not in its argv,
#: which ``ps`` shows every user (a job's name, work dir, user, account).
FINALIZE_ENV_VAR = "SLURM_ENERGY_FINALIZE_ENV"


def enable_site() -> None:
    """Put site-packages on ``sys.path`` when started with ``-S`` (``-I`` still keeps the user's
    site and PYTHONPATH off): for a path that needs a third-party package."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def begin(env: Mapping[str, str] | None, errors: list[str]) -> tuple[HookSite, JobFacts]:
    """Config (resolved copy; a full load, last good copy on error, when site.yaml changed), the
    log, the job from the environment; config errors are logged. Raises SlurmEnvError."""
    got: tuple[HookSite, list[str]] | None = cached_hook_config()
    if got is None:
        enable_site()
        from slurm_energy.slurm.hooks.config_cache import load_hook_config

        got = load_hook_config()
    cfg, problems = got
    errors += [f"site config problem: {m}" for m in problems]
    use(WRITER)
    WRITER.open(cfg.paths.log_dir)
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


def log_hook_time(which: str, ctx: JobFacts | None, outcome: str) -> None:
    """One line per hook run, parsed by benchmarks/fault_run.py: ``hook=prolog job=J ... wall_s=``."""
    wall = hook_elapsed_s()
    job, node = (ctx.job_id, ctx.node) if ctx is not None else ("?", "?")
    log("INFO", f"hook={which} job={job} node={node} outcome={outcome} wall_s={'?' if wall is None else f'{wall:.3f}'}")


def _python() -> str:
    return sys.executable or "/usr/bin/python3"


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
        from slurm_energy.slurm.hooks.cgroup_move import leave_job_cgroups

        moved = leave_job_cgroups(pid)
        if moved:
            log("INFO", f"moved pid {pid} out of the job's cgroups ({len(moved)} hierarchies: RunInJob)")
    except OSError as e:
        log("WARNING", f"pid {pid} stays in the job's cgroups: {e}")
    return pid


def hand_over(spool: Attempt, t_end: float, exit_code: str, outcome: SamplerEnd, log_dir: str) -> None:
    """Give the ended job attempt to its node's finalizer: queue it
    (:func:`slurm_energy.slurm.attempt.enqueue_finalize`) and start the queue's finalizer only when
    none runs or none stands by (:mod:`slurm_energy.slurm.jobend.queue`: two flock probes); when
    the entry cannot be written (a full or read-only spool), a finalizer for this job alone, as
    before. Raises OSError/TimeoutError (not started: ``collect`` finishes the job)."""
    from slurm_energy.slurm.attempt import RUNNER_LOG, enqueue_finalize, needs_runner

    try:
        qdir = enqueue_finalize(spool, t_end, exit_code, outcome)
    except OSError as e:
        log("WARNING", f"job {spool.job_id}: not queued for the node's finalizer ({e}): one started for it alone")
        spawn(["-m", JOBEND_MODULE, "finalize", spool.dir, spool.node, repr(t_end), exit_code, str(outcome)],
              os.path.join(spool.dir, f"finalize-{spool.node}.log"), log_dir, nice=FINALIZER_NICE)
        return
    if needs_runner(qdir):
        spawn(["-m", JOBEND_MODULE, "finalize-queue", qdir, spool.node], os.path.join(qdir, RUNNER_LOG),
              log_dir, nice=FINALIZER_NICE)


def main(argv: list[str] | None = None) -> int:
    """``{prolog|epilog}`` (default ``sys.argv[1:]``): run that hook; always 0."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        what = argv[0] if argv else ""
        if what == "prolog":
            from slurm_energy.slurm.hooks.prolog import prolog

            return prolog()
        if what == "epilog":
            from slurm_energy.slurm.hooks.epilog import epilog

            return epilog()
        os.write(2, b"usage: python -I -S .../slurm_energy/slurm/hooks/__main__.py {prolog|epilog}\n")
    except BaseException:
        log.exception(f"hook {argv[:1]} failed")
    return 0

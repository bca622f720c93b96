"""The Prolog and Epilog: short, never raising, exit 0 within 2 s, and light to start.

Prolog (:mod:`.prolog`, as root, no PATH): parse the environment -> job spool -> resolve the job's
GPUs once (:mod:`.gpus`) -> the first counter reading (on a node without job GPUs the raw files only,
turned into the row by the sampler: :mod:`slurm_energy.slurm.prolograw`) -> start the sampler
detached (own process group, stdio to a log) -> exit 0.

Epilog (:mod:`.epilog`, as root): stop the sampler (TERM, bounded wait, KILL; a zombie counts as
stopped: :func:`slurm_energy.slurm.processes.stop_sampler`); queue the job with the outcome for the
node's finalizer, started detached only when none runs or stands by (:func:`slurm_energy.slurm.detach.hand_over`,
:mod:`slurm_energy.slurm.jobend.queue`) -> exit 0. The finalizer (:mod:`slurm_energy.slurm.jobend`)
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
(NVML). This module holds what both hooks do: begin (config, log, job) and log the hook's time; a
detached start and the hand-over to the finalizer are :mod:`slurm_energy.slurm.detach`'s.
:mod:`slurm_energy.slurm.sampler` runs the sampler, :mod:`slurm_energy.slurm.jobend` the finalizers.
"""

from __future__ import annotations

import os
import sys

from slurm_energy.slurm.config_cache import cached_hook_config, problem_lines
from slurm_energy.slurm.context import JobFacts, context_dict, slurm_env_fields
from slurm_energy.slurm.log import WriteBackend, get, use

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from slurm_energy.slurm.config_cache import HookSite

__all__ = ["begin", "hook_elapsed_s", "log_hook_time", "main"]

log = get(__name__)
#: The hooks' log backend (``hooks.log`` in ``paths.log_dir``), installed by :func:`begin`.
WRITER = WriteBackend()

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
        from slurm_energy.slurm.config_cache import load_hook_config

        got = load_hook_config()
    cfg, problems = got
    errors += problem_lines(problems)
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

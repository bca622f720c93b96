"""The per-node meter process: one per node and spool, reading the node meter for every job on it.

``python -I -m slurm_energy.slurm.nodemeter SPOOL_DIR NODE``. A job's sampler starts it when none
runs (:func:`ensure_running`, as the finalizer is started: a flock on
``<spool_dir>/node-meter-<node>.lock`` says one runs); it reads the meter every
``node_meter.interval_s`` (default 10 s), appends each reading, judged by
:class:`~slurm_energy.sampling.readers.node_meter.MeterCheck`, to the node's meter file
(:mod:`slurm_energy.sampling.meterspool`), and leaves once no job's sampler has run on the node for
one interval. The Prolog and Epilog never start it and never read the meter (a BMC answers in 50 ms
to seconds); the number of meter requests a minute is the same with 1 or 32 jobs on the node.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from slurm_energy.sampling import meterspool

log = logging.getLogger("slurm_energy.nodemeter")

LOCK = "node-meter-{node}.lock"
#: made (O_EXCL) by the one sampler that starts the process, removed by the process once it holds
#: LOCK: samplers starting together (a burst of jobs) start one process, not one each
STARTING = "node-meter-{node}.starting"
STARTING_STALE_S = 30.0
#: written by a meter process that found no meter (``auto`` on a node without one): the samplers
#: start none for this long (a Python start and config load per job saved on most nodes)
NONE_FOUND = "node-meter-{node}.none"
NONE_RECHECK_S = 3600.0
#: written by a meter process whose node_meter settings cannot be used (the reason; unlike
#: NONE_FOUND it does not stop the next job's sampler from starting one: the site may fix them)
CONFIG_ERROR = "node-meter-{node}.error"
LOG = "node-meter.log"


def meter_note(spool_dir: str, node: str) -> str:
    """Why ``node`` has no meter reading, as its meter process left it (root's spool: its own
    words, at most 300 characters): its configuration error, else what ``auto`` found, else that
    no reading was taken (the process's log names why)."""
    for name, what in ((CONFIG_ERROR, "node_meter settings"), (NONE_FOUND, "node meter")):
        try:
            with open(os.path.join(spool_dir, name.format(node=node)), encoding="utf-8", errors="replace") as f:
                text = " ".join(f.read(300).split())
        except OSError:
            continue
        if text:
            return f"{what}: {text}"
    return f"the node meter process took no reading in the job's span (see {os.path.join(spool_dir, LOG)})"


def lock_path(spool_dir: str, node: str) -> str:
    return os.path.join(spool_dir, LOCK.format(node=node))


def jobs_on_node(spool_dir: str, node: str) -> bool:
    """True while a job's sampler runs on ``node`` (an attempt's pidfile naming a live process, or
    the node sampler: :mod:`slurm_energy.slurm.sampler_join`)."""
    from slurm_energy.slurm.attempt import Journal
    from slurm_energy.slurm.processes import is_running
    from slurm_energy.slurm.sampler_join import running_pid

    if running_pid(spool_dir, node) is not None:
        return True

    for run in Journal([spool_dir]).runs():
        try:
            with open(run.attempt(node).pidfile, encoding="ascii") as f:
                pid = int(f.read(32).strip())
        except (OSError, ValueError):
            continue
        if is_running(pid):
            return True
    return False


def ensure_running(cfg: Any, spool_dir: str, node: str, start: Callable[[list[str]], Any] | None = None) -> bool:
    """Start the node's meter process unless one runs or the site has none (``source: none``).
    Returns True when one was started. Called by a job's sampler, never by a Prolog/Epilog."""
    from slurm_energy.slurm.processes import lock_taken

    if cfg.node_meter.source == "none" or lock_taken(lock_path(spool_dir, node)) is not False:
        return False
    try:
        if time.time() - os.stat(os.path.join(spool_dir, NONE_FOUND.format(node=node))).st_mtime < NONE_RECHECK_S:
            return False  # looked for within the hour: this node has no meter
    except OSError:
        pass
    claim = os.path.join(spool_dir, STARTING.format(node=node))
    try:
        os.close(os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        try:
            if time.time() - os.stat(claim).st_mtime < STARTING_STALE_S:
                return False  # another sampler is starting it
        except OSError:
            return False
    except OSError:
        pass  # a read-only spool: start it anyway, its lock keeps it single
    if start is None:
        from slurm_energy.slurm.detach import spawn
        from slurm_energy.slurm.log import FALLBACK_LOG_DIR

        def start(argv: list[str]) -> Any:
            return spawn(argv, os.path.join(spool_dir, LOG), FALLBACK_LOG_DIR)

    start(["-m", "slurm_energy.slurm.nodemeter", spool_dir, node])
    return True


def run_meter(reader: Any, source: str, path: str, interval_s: float, has_jobs: Callable[[], bool],
              frozen_after_s: float = 300.0, clock: Callable[[], float] = time.time,
              sleep: Callable[[float], None] = time.sleep, max_reads: int | None = None) -> int:
    """Read ``reader`` every ``interval_s`` into ``path`` while ``has_jobs()`` (checked after each
    reading; one more reading after the last job so its span is closed). Returns the readings taken."""
    from slurm_energy.sampling.readers.node_meter import MeterCheck

    check = MeterCheck(frozen_after_s)
    n = 0
    last_trim = 0.0
    while True:
        t = clock()
        try:
            readings = reader.read()
        except Exception as e:  # a reader must not raise; one that does is logged, the loop goes on
            log.warning("node meter read failed: %s: %s", type(e).__name__, e)
            readings = []
        for r in readings:
            meterspool.append(path, meterspool.MeterRow(t, source, check.check(t, r)))
        n += 1
        if t - last_trim > 3600:
            meterspool.trim(path, t)
            last_trim = t
        if not has_jobs() or (max_reads is not None and n >= max_reads):
            return n
        sleep(max(0.0, interval_s - (clock() - t)))


def main(argv: list[str] | None = None) -> int:
    """``python -m slurm_energy.slurm.nodemeter SPOOL_DIR NODE``. Exits 0 at once when another meter
    process holds the node's lock or the site has no meter."""
    import fcntl

    argv = sys.argv[1:] if argv is None else argv
    spool_dir, node = argv[0], argv[1]
    fd = os.open(lock_path(spool_dir, node), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return 0  # one runs already
    try:
        _meter_process(spool_dir, node)
    finally:
        os.close(fd)  # the lock goes with it
    return 0


def _note(spool_dir: str, name: str, node: str, text: str) -> None:
    """Leave ``text`` in the spool (root-only) for the records and the samplers; a full spool loses it."""
    from slurm_energy.slurm.attempt import write_private

    try:
        write_private(os.path.join(spool_dir, name.format(node=node)), text + "\n")
    except OSError:
        pass


def _meter_process(spool_dir: str, node: str) -> None:
    """The meter process's life once it holds the node's lock: its settings, its meter, its loop."""
    from slurm_energy.slurm.config_cache import load_light_config
    from slurm_energy.slurm.log import setup_logging

    try:
        os.unlink(os.path.join(spool_dir, STARTING.format(node=node)))
    except OSError:
        pass
    errors: list[str] = []
    cfg = load_light_config(errors)  # the hooks' resolved copy, as the sampler reads it
    setup_logging(cfg.paths.log_dir, LOG)
    from slurm_energy.sampling.readers.node_meter import open_node_meter, source_name

    try:
        reader, note = open_node_meter(cfg.node_meter, node)
    except ValueError as e:
        log.error("node meter node=%s: %s", node, e)
        _note(spool_dir, CONFIG_ERROR, node, str(e))
        return
    try:
        os.unlink(os.path.join(spool_dir, CONFIG_ERROR.format(node=node)))  # settings usable again
    except OSError:
        pass
    log.info("node=%s %s", node, note)
    if reader is None:
        _note(spool_dir, NONE_FOUND, node, note)
        return
    try:
        n = run_meter(reader, source_name(reader), meterspool.meter_path(spool_dir, node), cfg.node_meter.interval_s,
                      lambda: jobs_on_node(spool_dir, node), cfg.node_meter.frozen_after_s)
        log.info("node=%s meter process leaves: no job on the node; %d readings", node, n)
    finally:
        reader.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

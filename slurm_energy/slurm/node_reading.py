"""A node's reading for one job: its readers, and a row a process writes itself (not the sampler).

The Prolog (its first reading the full way), the sampler (at its start, the Prolog's row from the
files the Prolog read: :func:`prolog_reading_by_sampler`) and the finalizer (the last reading when
the sampler did not end cleanly) read the node's counters for a job through these functions.

Light at import (os, json and the spool: no logging, typing or dataclasses): the Prolog's reading
imports this module; the readers are imported inside the functions that need them.
"""

from __future__ import annotations

import json
import os

from slurm_energy.slurm.attempt import Attempt, write_private

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Prolog's reading imports this)
if TYPE_CHECKING:
    from typing import Any, Protocol

    from slurm_energy.sampling.files import FileSource
    from slurm_energy.sampling.readers.base import Reader
    from slurm_energy.slurm.config_cache import HookSite
    from slurm_energy.slurm.context import JobContext

    class JobGpus(Protocol):
        """What the readers for a job read of its context: its GPUs as the Prolog resolved them.
        A :class:`~slurm_energy.slurm.context.JobContext`, or the Prolog's
        :class:`~slurm_energy.slurm.context.JobFacts` (the same fields, as a dict)."""

        @property
        def job_gpus(self) -> str: ...
        @property
        def gpus(self) -> list[dict[str, Any]]: ...
        @property
        def gpu_resolution_error(self) -> str: ...

__all__ = ["prolog_reading_by_sampler", "readers_for", "reading_row", "spool_from_dir"]

def spool_from_dir(job_dir: str, node: str) -> tuple[Attempt, JobContext]:
    """The spool and job context of ``job_dir`` on ``node`` (:meth:`Attempt.from_dir`).
    Raises OSError/ValueError when the context file is missing or unparsable."""
    from slurm_energy.slurm.context import JobContext

    spool = Attempt.from_dir(job_dir, node)
    with open(spool.context, encoding="utf-8") as f:
        ctx = JobContext.from_json(f.read())
    return spool, ctx


def readers_for(cfg: HookSite, ctx: JobGpus, spool: Attempt, errors: list[str],
                light: bool = False, files: FileSource | None = None) -> tuple[list[Reader], list[str]]:
    """This node's readers for the job; the device inventory is written once to the spool.

    ``light`` (the Prolog): no vendor library that is slow to load; when that leaves devices out
    (amdsmi GPUs), the inventory is left to the sampler. ``files``: where the readers read
    (:func:`slurm_energy.sampling.reading.open_readers`)."""
    from slurm_energy.sampling.reading import device_inventory, open_readers

    unresolved = []
    if ctx.job_gpus and not ctx.gpus:
        unresolved = [f"gpu-index-{i}" for i in ctx.job_gpus.split(",") if i]
        errors.append(f"GPUs {ctx.job_gpus} not resolved to devices by any GPU backend: {ctx.gpu_resolution_error}")
    readers, notes = open_readers(cfg, ctx.gpus, unresolved, light=light, files=files)
    partial = any("start with the sampler" in n for n in notes)  # the Prolog left amdsmi GPUs out
    partial = partial or bool(getattr(files, "missing", None))  # a replay short of a file: readers may differ
    if not partial and not os.path.exists(spool.static):
        write_private(spool.static, json.dumps(device_inventory(readers, notes)))
    return readers, notes


def reading_row(cfg: HookSite, ctx: JobGpus, spool: Attempt, kind: str) -> None:
    """One row of every reader's counters in the job's sample file, written by a hook itself
    (``prolog``, or ``epilog`` by the finalizer when the sampler did not end cleanly): a job
    shorter than one interval is measured between the two. No vendor library in the Prolog."""
    from slurm_energy.sampling.reading import take_reading

    readers, _ = readers_for(cfg, ctx, spool, [], light=kind == "prolog")
    take_reading(readers, spool.samples, kind)


def prolog_reading_by_sampler(cfg: HookSite, ctx: JobContext, spool: Attempt) -> None:
    """The Prolog's row from the files it read (:mod:`slurm_energy.slurm.prolograw`), written first
    in the sample file with the Prolog's time, then that raw reading removed; without one (the
    node's first job, a changed config) the node's file list is made for later Prologs. Called at
    the sampler's start, and by a finalizer whose sampler never started. Never raises: a problem
    is recorded on the job (the row is then missing, as when the Prolog's reading failed)."""
    from slurm_energy.sampling.files import RecordingFiles, ReplayFiles
    from slurm_energy.sampling.reading import replayable, take_reading
    from slurm_energy.slurm import prolograw

    raw_file = prolograw.raw_path(spool)
    raw = None
    try:
        with open(raw_file, encoding="utf-8") as f:
            raw = json.load(f)
    except FileNotFoundError:
        if ctx.job_gpus or prolograw.recipe_is_current(cfg, spool):
            return
    except (OSError, ValueError) as e:
        spool.record_error(f"prolog reading: {raw_file} unreadable ({type(e).__name__}: {e}); its row is left out")
    try:
        if raw is not None and os.path.exists(spool.samples):
            raise ValueError("the sample file has rows already")  # a row older than them is not appended
        files = RecordingFiles() if raw is None else ReplayFiles(raw["files"])
        readers, _ = readers_for(cfg, ctx, spool, [], light=True, files=files)
        if not replayable(readers):
            if raw is not None:
                raise ValueError(f"readers {[type(r).__name__ for r in readers]} cannot be read from files")
            return
        if raw is None or isinstance(files, RecordingFiles):  # no raw reading: the node's file list only
            for r in readers:
                r.read()
                r.close()
            if isinstance(files, RecordingFiles):
                prolograw.save_recipe(cfg, spool, files.paths)
            return
        take_reading(readers, spool.samples + ".prolog", "prolog", t=float(raw["t"]), files=files)
        if files.missing:  # the next Prolog reads the full way; its sampler makes the list again
            prolograw.drop_recipe(spool)
            raise ValueError(f"the Prolog did not read {files.missing[0]!r}")
        os.replace(spool.samples + ".prolog", spool.samples)
    except Exception as e:
        spool.record_error(f"prolog reading: not written from the Prolog's files ({type(e).__name__}: {e}); its row is left out")
    finally:
        if raw is not None:
            for p in (raw_file, spool.samples + ".prolog"):
                try:
                    os.unlink(p)
                except OSError:
                    pass

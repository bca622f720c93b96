"""The Prolog's first counter reading as raw file contents, turned into its row by the sampler.

The Prolog's reading (one row of every reader's values before the job starts, so a job shorter
than one interval is measured between two rows) cost more than half of the Prolog's CPU: the
readers, the sample file's codec and ``slurm_energy.core``'s dataclasses are imported for ten file
reads. On a node without job GPUs, whose readers read files only (RAPL counters, /proc/stat and
/proc/meminfo for the CPU and RAM models), the Prolog now reads just those files, at the same
moment, and writes their contents to ``prolog-raw-<node>.json`` in the job's spool
(:func:`snapshot`); the detached sampler, which imports the readers anyway, builds the Prolog's
row from them (:func:`slurm_energy.slurm.node_reading.prolog_reading_by_sampler`): the same row, with the
Prolog's timestamp.

Which files: ``prolog-files-<node>.json`` in the spool (the node's *recipe*), written by a sampler
from what its readers really read (:func:`save_recipe`). Until a sampler wrote one (the node's
first job, a site config or ``hardware`` change, a reboot: the key; RAPL zones added or gone: one
listdir) the Prolog takes its reading the full way; a recipe that still misses a file the readers
read is dropped by the sampler (that job's Prolog row is left out) and made again. Stdlib only
(os, json, zlib): the Prolog imports this module.
"""

from __future__ import annotations

import json
import os
import time

from slurm_energy._version import __version__
from slurm_energy.slurm.attempt import Attempt, write_private

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Prolog imports this module)
if TYPE_CHECKING:
    from typing import Any

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def recipe_path(spool: Attempt) -> str:
    """``<spool_dir>/prolog-files-<node>.json``: the node's recipe (one per spool and node)."""
    return os.path.join(spool.spool_dir, f"prolog-files-{spool.node}.json")


def raw_path(spool: Attempt) -> str:
    """``<job dir>/prolog-raw-<node>.json``: one Prolog's raw reading, until its row is written."""
    return spool.path("prolog-raw")


def recipe_key(cfg: Any) -> str | None:
    """What a recipe is valid for: this version, this boot and the site config's ``hardware``
    section (where the readers look); None when ``cfg`` is not a resolved copy (the defaults'
    full config: the Prolog then reads the full way)."""
    hw = cfg.get("hardware") if isinstance(cfg, dict) else None
    if not isinstance(hw, dict):
        return None
    import zlib

    try:
        with open(BOOT_ID, "rb") as f:  # bytes: an "ascii" text file loads encodings.ascii
            boot = f.read().strip().decode()
    except OSError:
        boot = "?"
    return f"{__version__} {boot} {zlib.crc32(json.dumps(hw, sort_keys=True).encode()):08x}"


def _zones(cfg: Any) -> list[str] | None:
    """The RAPL zones under ``hardware.rapl_root`` (one listdir), None without that directory: a
    zone that appeared or went since the list was made sends the Prolog the full way."""
    try:
        return sorted(os.listdir(cfg["hardware"]["rapl_root"]))
    except (OSError, KeyError, TypeError):
        return None


def snapshot(cfg: Any, spool: Attempt) -> bool:
    """The Prolog's side: read the recipe's files now and write ``prolog-raw-<node>.json``
    ({"t": epoch s of the reads, "files": {path: contents (latin-1)}}). False (nothing written)
    when there is no valid recipe or a file cannot be read: the Prolog then reads the full way.
    Raises OSError when the raw file cannot be written."""
    key = recipe_key(cfg)
    if key is None:
        return False
    try:
        with open(recipe_path(spool), encoding="utf-8") as f:
            recipe = json.load(f)
        if recipe.get("key") != key or not recipe.get("files") or recipe.get("zones") != _zones(cfg):
            return False  # another config, boot or set of RAPL zones than the list was made for
        files = {}
        t = time.time()
        for p in recipe["files"]:
            with open(p, "rb") as f:
                files[p] = f.read().decode("latin-1")
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    write_private(raw_path(spool), json.dumps({"t": t, "files": files}))
    return True


def save_recipe(cfg: Any, spool: Attempt, files: list[str]) -> None:
    """The sampler's side: the files its readers read for one row (``files``), for later Prologs on
    this node. Errors ignored (the Prolog then keeps reading the full way)."""
    key = recipe_key(cfg)
    if key is None:
        return
    try:
        write_private(recipe_path(spool), json.dumps({"key": key, "files": sorted(set(files)), "zones": _zones(cfg)}))
    except OSError:
        pass


def drop_recipe(spool: Attempt) -> None:
    """Remove the node's recipe (it missed a file): the next Prolog reads the full way."""
    try:
        os.unlink(recipe_path(spool))
    except OSError:
        pass


def recipe_is_current(cfg: Any, spool: Attempt) -> bool:
    """True when the node's recipe exists with this version's, boot's and config's key."""
    try:
        with open(recipe_path(spool), encoding="utf-8") as f:
            return bool(json.load(f).get("key") == recipe_key(cfg))
    except (OSError, ValueError, AttributeError):
        return False

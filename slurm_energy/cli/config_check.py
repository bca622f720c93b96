"""Run-time checks of a loaded site config that need the file system (``slurm-energy check-config``).

Kept out of the pydantic model on purpose: loading a config never touches the disk (the hooks
load it on every job); these checks do, and only when an admin asks.

A path in ``paths`` is usable when it is a directory root can write into, or does not exist yet
but its nearest existing ancestor is such a directory (the hooks create it with ``mkdir -p``).
"Can write" is probed for real (a temporary directory is created and removed), because as root
``os.access`` says yes even where ``mkdir`` fails (``/proc``, ``/sys``, read-only mounts).
"""

from __future__ import annotations

import errno
import os
import tempfile
from typing import TYPE_CHECKING

from slurm_energy.store.urls import shown_url

if TYPE_CHECKING:
    from slurm_energy.config.schema import SiteConfig

#: Directory fields of :class:`slurm_energy.config.Paths`, in the order they are reported.
DIR_FIELDS = ("spool_dir", "results_dir", "log_dir", "hourly_ci_dir", "geo_cache_dir")

_DENIED = (errno.EACCES, errno.EPERM)


def _probe(d: str) -> OSError | None:
    """Create and remove a temporary directory in ``d``; the OSError if that fails, else None."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".slurm-energy-check-", dir=d))
    except OSError as e:
        return e
    return None


def _nearest_existing(path: str) -> str:
    p = path
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def _why(e: OSError) -> str:
    code = None if e.errno is None else errno.errorcode.get(e.errno, e.errno)
    return f"{e.strerror or e} [{code}]"


def dir_problem(path: str) -> tuple[str, str, bool] | None:
    """Why directory ``path`` is unusable by the hooks, or None when it is usable.

    Returns ``(what is wrong, the fix, permission_only)``; ``permission_only`` is True when the
    only failure is EACCES/EPERM (a non-root caller cannot tell whether root could write there).
    Creates and removes one temporary directory in ``path`` or its nearest existing ancestor.
    """
    if not os.path.isabs(path):
        return ("is not an absolute path (the hooks run from slurmd, whose working directory is not "
                "yours)", "write an absolute path, e.g. /var/spool/slurm-energy", False)
    if os.path.exists(path):
        if not os.path.isdir(path):
            return ("exists but is not a directory (it is a file)",
                    "point it at a directory, or move that file away", False)
        e = _probe(path)
        if e is not None:
            return (f"is a directory but cannot be written: {_why(e)}",
                    "make it writable by root (chown root / chmod u+w, remount read-write) or choose "
                    "another directory", e.errno in _DENIED)
        return None
    anc = _nearest_existing(path)
    if not os.path.isdir(anc):
        return (f"does not exist and cannot be created: {anc} is not a directory",
                f"move {anc} away, or choose a path under a writable directory", False)
    e = _probe(anc)
    if e is not None:
        denied = e.errno in _DENIED
        fix = (f"make {anc} writable by root, or choose a path under a directory root can write" if denied
               else "choose a path under a writable directory on a real file system "
                    "(e.g. /var/spool/slurm-energy), not /proc or /sys")
        return (f"does not exist and cannot be created under its nearest existing directory {anc}: "
                f"{_why(e)}", fix, denied)
    return None


def store_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the store here (unsupported backend or driver, relative SQLite path,
    psycopg missing), or None. Delegates to :func:`slurm_energy.store.check_store_url` (supported:
    ``sqlite:////abs/path``, ``postgresql+psycopg://...``, plain ``postgresql://`` read as psycopg);
    its leading ``store URL '...'`` is dropped, since the caller names the field and value.
    Does not connect to any server.
    """
    from slurm_energy.store import check_store_url

    msg = check_store_url(url)
    if msg is None:
        return None
    for lead in (f"store URL {shown_url(url)!r}: ", f"store URL {shown_url(url)!r} "):
        if msg.startswith(lead):
            return msg[len(lead):]
    return msg


def check_paths(cfg: SiteConfig, notes: list[str] | None = None) -> list[str]:
    """Check that every path in ``cfg.paths`` can be used by the hooks (run as root).

    :param cfg: a :class:`slurm_energy.config.SiteConfig`.
    :param notes: when given, receives what could not be decided by this (non-root) user: a path
        refused with EACCES/EPERM is only an error when the caller is root.
    :returns: one message per unusable path, ``"FILE: paths.FIELD: bad value 'PATH': what is wrong. Fix:
        ..."`` (the wording of :class:`slurm_energy.config.ConfigError`); empty when all are usable.
        For a SQLite ``store_url`` its directory is checked, and an existing database path must be
        a file that can be opened for appending. The URL itself must pass
        :func:`store_url_problem` (a ``mysql://`` URL is an error); a PostgreSQL server is not
        contacted.
    """
    errors: list[str] = []
    root = os.geteuid() == 0
    origin = cfg.source_path or "documented defaults"

    def report(field: str, shown: str, problem: tuple[str, str, bool]) -> None:
        what, fix, denied_only = problem
        msg = f"{origin}: paths.{field}: bad value {shown!r}: {what}. Fix: {fix}"
        if denied_only and not root:
            if notes is not None:
                notes.append(f"{msg} (checked as uid {os.geteuid()}; the hooks run as root: rerun "
                             f"check-config as root to decide)")
        else:
            errors.append(msg)

    for field in DIR_FIELDS:
        path = getattr(cfg.paths, field)
        problem = dir_problem(path)
        if problem is not None:
            report(field, path, problem)

    url = cfg.paths.store_url
    bad = store_url_problem(url)
    if bad is not None:
        errors.append(f"{origin}: paths.store_url: bad value {shown_url(url)!r}: {bad}")
        return errors
    if url.startswith("sqlite"):
        from slurm_energy.store.db import sqlite_file

        problem = _sqlite_store_problem(sqlite_file(url), url)
        if problem is not None:
            report("store_url", url, problem)
    return errors


def _sqlite_store_problem(db: str, url: str) -> tuple[str, str, bool] | None:
    """Why the SQLite database file ``db`` (of ``url``) cannot be the store, as :func:`dir_problem`'s
    ``(what, fix, permission_only)``, or None. A configured store whose directory does not exist is
    an error (a typo there makes a store no reader looks at); only the documented default's
    directory, /var/lib/slurm-energy, may be left to the first store to create. Creates nothing."""
    from slurm_energy.config.schema import Paths

    d = os.path.dirname(db)
    if os.path.isabs(db) and not os.path.exists(d) and url != Paths().store_url:
        return (f"its directory {d} does not exist",
                f"create it (as root: mkdir -p -m 0755 {d}) if this is the store you mean, "
                "or correct the path in paths.store_url", False)
    problem = dir_problem(d or ".") if os.path.isabs(db) else dir_problem(db)
    if problem is not None:
        return (f"its directory {d} {problem[0]}" if os.path.isabs(db) else problem[0], problem[1], problem[2])
    if not os.path.lexists(db):
        return None
    if not os.path.isfile(db):
        return ("the database path exists but is not a regular file",
                "point store_url at a file path, or move that entry away", False)
    try:
        with open(db, "ab"):
            pass
    except OSError as e:
        return (f"the database file cannot be opened for writing: {_why(e)}",
                "make it writable by root, or choose another path", e.errno in _DENIED)
    return None


def _zones(cfg: SiteConfig) -> list[str]:
    """Zone names whose hourly intensity jobs may use: each datacenter's and the site's location."""
    locs = [dc.location for dc in cfg.datacenters.values()] + [cfg.location]
    return list(dict.fromkeys(z for loc in locs if loc is not None for z in (loc.region, loc.country) if z))


def check_carbon(cfg: SiteConfig, warnings: list[str] | None = None) -> list[str]:
    """Check the carbon intensities jobs will use, beyond what loading the config checks.

    Loading already rejects a configured intensity below 1 or above 2000 gCO2e/kWh (0 only with
    ``allow_zero: true``); this adds the warnings for 1-5 gCO2e/kWh (lower than even hydro/nuclear
    lifecycle figures) and checks the hourly files imported with ``ci-import`` for the site's zones.

    :param cfg: a :class:`slurm_energy.config.SiteConfig`.
    :param warnings: when given, receives ``"FILE: datacenters.NAME.carbon_intensity: ..."`` for a
        suspicious configured value and one line per hourly file with such hours.
    :returns: one error per stored hourly file that cannot be used (corrupt, or hours below
        1 gCO2e/kWh: jobs there then use the single intensity instead).
    """
    from slurm_energy.carbon import hourly
    from slurm_energy.carbon.units import plausibility_warning
    from slurm_energy.errors import HourlyDataError

    origin = cfg.source_path or "documented defaults"
    out: list[str] = []
    for name, dc in cfg.datacenters.items():
        if dc.carbon_intensity is not None:
            w = plausibility_warning(dc.carbon_intensity.g_per_kwh, f"datacenters.{name}.carbon_intensity")
            if w is not None:
                out.append(f"{origin}: {w}")
    errors = []
    for zone in _zones(cfg):
        try:
            data = hourly.load_zone(cfg.paths.hourly_ci_dir, zone)
        except HourlyDataError as e:
            errors.append(f"hourly carbon intensity of zone {zone} cannot be used (jobs there use the single "
                          f"intensity instead): {e}. To replace the stored file: remove "
                          f"{hourly.zone_path(cfg.paths.hourly_ci_dir, zone)}, then `slurm-energy ci-import "
                          f"CORRECTED.csv --zone {zone}`")
            continue
        w = hourly.low_hours_warning(data, hourly.zone_path(cfg.paths.hourly_ci_dir, zone)) if data else None
        if w is not None:
            out.append(w)
    if warnings is not None:
        warnings.extend(out)
    return errors


#: Above these a rated power (W) is kept but flagged: no CPU package is rated over 1000 W, no single
#: GPU over 1500 W (the largest accelerators are rated about 1000-1200 W).
CPU_TDP_WARN_W = 1000.0
GPU_RATED_WARN_W = 1500.0


#: below this sampling interval (s) check-config warns: each sampler wakes that often on every node
INTERVAL_WARN_S = 1.0


def check_sampling(cfg: SiteConfig) -> list[str]:
    """A warning for a sampling interval that loads (> 0 s) but below :data:`INTERVAL_WARN_S`: the
    sampler's cost grows with its wake-ups (a tester measured 0.17 of a core at 0.001 s, one job)."""
    iv = cfg.sampling.interval_s
    if iv >= INTERVAL_WARN_S:
        return []
    origin = cfg.source_path or "documented defaults"
    return [f"{origin}: sampling.interval_s: {iv:g} s wakes the node's sampler {1 / iv:,.0f} times a second on "
            f"every node (its CPU grows with it: about 0.17 of a core at 0.001 s was measured); 1-10 s is usual "
            f"(default 5 s), and energy counters make a longer interval no less exact"]


def check_hardware(cfg: SiteConfig) -> list[str]:
    """Warnings for rated powers that load (1 W up to the schema's limit) but are implausible for
    one CPU package (above :data:`CPU_TDP_WARN_W`) or one GPU (above :data:`GPU_RATED_WARN_W`):
    ``"FILE: hardware.FIELD: ... W ..."``, naming the field and what to check."""
    origin = cfg.source_path or "documented defaults"
    hw = cfg.hardware
    cpu: list[tuple[str, float | None]] = [(f"hardware.cpu_tdp_w[{k!r}]", w) for k, w in hw.cpu_tdp_w.items()]
    cpu.append(("hardware.cpu_tdp_default_w", hw.cpu_tdp_default_w))
    gpu = [(f"hardware.gpu[{k!r}].rated_w", g.rated_w) for k, g in hw.gpu.items()]
    gpu.append(("hardware.gpu_fallback_w", hw.gpu_fallback_w))
    out = []
    for items, limit, what in ((cpu, CPU_TDP_WARN_W, "one CPU package (socket)"), (gpu, GPU_RATED_WARN_W, "one GPU")):
        for field, w in items:
            if w is not None and w > limit:
                out.append(f"{origin}: {field}: {w:g} W is more than any {what} is rated for (> {limit:g} W); "
                           "check it is the rating of one device in W, not a whole node's")
    return out


def catch_all_notes(cfg: SiteConfig) -> list[str]:
    """One note per datacenter with neither ``partitions`` nor ``nodes``: it silently takes every
    job that matches no other datacenter (config/carbon.py), instead of the site's ``location``."""
    origin = cfg.source_path or "documented defaults"
    return [f"{origin}: datacenters.{name} has neither partitions nor nodes: it is the catch-all, used for "
            "every job whose partition and node match no other datacenter (instead of location.country). "
            f"If that is not meant, give datacenters.{name}.partitions or .nodes"
            for name, dc in cfg.datacenters.items() if not dc.partitions and not dc.nodes]

"""Lenient loading for the Slurm hooks (and jobenergy): keep every part of site.yaml that is valid,
and fall back to the last good copy when the file cannot be parsed at all.

:func:`load_site_config_lenient` keeps every valid part of the file (above all ``paths``, so a typo
elsewhere never sends a job's record to the default store) and returns the messages, which the
hooks record on the job. :func:`load_site_config_for_hooks` also keeps ``<file>.last-good`` (the
last text that loaded without any problem) and loads that copy when the file cannot be read or
parsed at all, so a missing ``}`` never sends records to the default store. Every message says
what is in force (the file minus named keys, the last good copy, or the documented defaults).
Whether the paths are usable on disk is a run-time check,
:func:`slurm_energy.cli.config_check.check_paths` (``slurm-energy check-config``).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ValidationError

from slurm_energy.carbon import tables as _tables
from slurm_energy.config.load import (
    config_path,
    defaults_without_file,
    format_error,
    not_a_mapping,
    parse_yaml_text,
    read_text,
)
from slurm_energy.config.schema import DEFAULT_PUE, SiteConfig
from slurm_energy.errors import ConfigError

#: Sections whose keys are dropped one by one when invalid (``paths.log_dir`` alone falls back to
#: its default, ``datacenters.X`` alone is dropped). Any other bad key drops its whole top-level key.
_PER_KEY_SECTIONS = ("paths", "datacenters", "hardware", "sampling", "attribution", "geolocation")
#: Maps inside ``hardware`` whose entries are dropped one by one (one bad GPU override).
_PER_ENTRY_MAPS = (("hardware", "gpu"), ("hardware", "cpu_tdp_w"))
#: Keys of one datacenter dropped alone when invalid: a carbon intensity in the wrong unit (0.056 for
#: 56) leaves the datacenter, its partitions and PUE in force; its intensity then comes from its
#: location (bundled table), as when none is written.
_PER_DATACENTER_KEYS = ("carbon_intensity",)


def _drop_target(loc: tuple) -> tuple:
    """The key path to drop for a pydantic error at ``loc`` (see :data:`_PER_KEY_SECTIONS`)."""
    if not loc:
        return ()
    if loc[0] == "datacenters" and len(loc) >= 3 and loc[2] in _PER_DATACENTER_KEYS:
        return loc[:3]
    if loc[0] in _PER_KEY_SECTIONS and len(loc) >= 2:
        return loc[:3] if loc[:2] in _PER_ENTRY_MAPS and len(loc) >= 3 else loc[:2]
    return loc[:1]


def _delete(data: dict, target: tuple) -> bool:
    """Delete ``data[t0][t1]...``; False when that key is not there (or a parent is no mapping)."""
    node: Any = data
    for k in target[:-1]:
        if not isinstance(node, dict) or k not in node:
            return False
        node = node[k]
    if isinstance(node, dict) and target and target[-1] in node:
        del node[target[-1]]
        return True
    return False


def _drop_conflicting_datacenters(data: dict) -> list[str]:
    """Model-level errors (a partition in two datacenters, two catch-alls): keep datacenters in file
    order while they validate together; returns the dotted names of those dropped."""
    dcs = data.get("datacenters")
    if not isinstance(dcs, dict):
        return []
    kept: dict = {}
    dropped = []
    for name, dc in dcs.items():
        trial = {**kept, name: dc}
        try:
            SiteConfig.model_validate({"datacenters": trial})
            kept = trial
        except ValidationError:
            dropped.append(f"datacenters.{name}")
    if dropped:
        data["datacenters"] = kept
    return dropped


def site_config_from_dict_lenient(data: Any, origin: str = "site config") -> tuple[SiteConfig, list[str]]:
    """Validate a parsed YAML mapping, dropping only what is invalid; never raises on bad values.

    Every top-level key that validates is kept; inside ``paths``, ``hardware``, ``sampling``,
    ``attribution``, ``geolocation`` only the bad keys are dropped (their defaults apply), inside
    ``datacenters`` only the bad datacenters (only the bad ``carbon_intensity`` of one), inside
    ``hardware.gpu``/``hardware.cpu_tdp_w`` only the bad entries. Returns ``(config, messages)``:
    one message per problem, worded as
    :class:`ConfigError` (``origin: dotted.field: bad value V: why. Fix: ...``), then one line
    listing what was ignored. The dropped dotted keys are appended to ``config.defaults_used``.
    Not a mapping: ``(SiteConfig(), [message])``.
    """
    import copy

    bad = not_a_mapping(data, origin)
    if bad:
        return SiteConfig(), [f"{bad}; nothing from it is in force: {_defaults_in_force()}"]
    data = copy.deepcopy(data or {})
    messages: list[str] = []
    dropped: list[str] = []
    for _ in range(1000):  # each round drops at least one key, so this ends
        try:
            cfg = SiteConfig.model_validate(data)
            break
        except ValidationError as e:
            messages += [m for m in format_error(e, origin, data).splitlines() if m not in messages]
            progress = False
            for err in e.errors():
                loc = tuple(x for x in err.get("loc", ()) if not str(x).startswith("function-"))
                target = _drop_target(loc)
                if target and (_delete(data, target) or _delete(data, target[:1])):
                    dropped.append(".".join(map(str, target)))
                    progress = True
            if not progress:
                gone = _drop_conflicting_datacenters(data)
                dropped += gone
                progress = bool(gone)
            if not progress:  # nothing left to single out: documented defaults
                cfg = SiteConfig()
                dropped.append("(everything)")
                break
    else:  # pragma: no cover - unreachable: every round drops a key
        cfg = SiteConfig()
    if dropped:
        seen = list(dict.fromkeys(dropped))
        messages.append(_in_force_message(cfg, seen, origin))
        cfg = cfg.model_copy(update={"defaults_used": cfg.defaults_used + [d for d in seen if d not in cfg.defaults_used]})
    return cfg, messages


_MISSING = object()


def _value_at(cfg: SiteConfig, dotted: str) -> Any:
    """The value of ``dotted`` (``paths.log_dir``, ``datacenters.bad``) in ``cfg``, or _MISSING."""
    node: Any = cfg
    for k in dotted.split("."):
        if isinstance(node, BaseModel):
            node = getattr(node, k, _MISSING) if k in type(node).model_fields else _MISSING
        elif isinstance(node, dict):
            node = node.get(k, _MISSING)
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _defaults_in_force() -> str:
    """One phrase naming the documented defaults that matter most when no config is in force."""
    d = SiteConfig()
    return (f"documented defaults are in force for every setting (store {d.paths.store_url}, logs "
            f"{d.paths.log_dir}, spool {d.paths.spool_dir}, PUE {DEFAULT_PUE:g}, carbon intensity "
            f"{_tables.WORLD_AVERAGE_G_PER_KWH:g} gCO2e/kWh world average)")


def _in_force_message(cfg: SiteConfig, dropped: list[str], origin: str) -> str:
    """What is in force after the lenient loader dropped the keys ``dropped`` (dotted)."""
    if "(everything)" in dropped:
        return f"{origin}: nothing from this file is in force: {_defaults_in_force()}"
    parts = []
    for d in dropped:
        v = _value_at(cfg, d)
        if v is _MISSING:
            parts.append(f"{d} not defined")
        elif v is None:
            parts.append(f"{d} unset (its documented fallback applies)")
        elif isinstance(v, BaseModel):  # a section: its own settings, not its nested ones (long)
            own = [f"{k} {x!r}" for k, x in v.model_dump().items() if not isinstance(x, (dict, list))]
            parts.append(f"{d} = its documented defaults ({', '.join(own[:4])}{', ...' if len(own) > 4 else ''})")
        else:
            parts.append(f"{d} = {v!r} (documented default)")
    return (f"{origin}: every other key of this file is in force; in place of the bad keys: "
            + "; ".join(parts))


def _load_lenient(p: str) -> tuple[SiteConfig, list[str], str | None, str | None]:
    """``(config, messages, text, fatal)`` of file ``p``: ``fatal`` is the error text when the file
    cannot be read, is not YAML or its top level is no mapping (config = documented defaults),
    else None; ``text`` is the file's text when it was read."""
    try:
        text = read_text(p)
    except ConfigError as e:
        return defaults_without_file(), [], None, str(e)
    try:
        data = parse_yaml_text(text, p)
    except ConfigError as e:
        return defaults_without_file(), [], text, str(e)
    bad = not_a_mapping(data, p)
    if bad:
        return defaults_without_file(), [], text, bad
    cfg, messages = site_config_from_dict_lenient(data, origin=p)
    return cfg.model_copy(update={"source_path": p}), messages, text, None


# --------------------------------------------------------------------------- last good copy
#: Suffix of the copy of the last site config that loaded without any problem (same directory).
LAST_GOOD_SUFFIX = ".last-good"


def last_good_path(path: str | os.PathLike) -> str:
    """``<path>.last-good``: where :func:`load_site_config_for_hooks` keeps the last good copy."""
    return os.fspath(path) + LAST_GOOD_SUFFIX


def save_last_good(path: str | os.PathLike, text: str) -> bool:
    """Keep ``text`` (a site config that loaded with no problem) as ``<path>.last-good``.

    Written only when its content differs from the existing copy; atomically (a temporary file in
    the same directory, fsync, ``os.replace``), with the site config's own permission bits (0600
    if it cannot be read: the config may hold store credentials), so whoever may read site.yaml
    (jobenergy as an ordinary user) may read its last good copy.
    Returns True when the copy now holds ``text``, False when it could not be written; never raises
    (a failure is logged as a warning, since the hooks must go on).
    """
    import logging

    from slurm_energy.fileio import atomic_write

    lg = last_good_path(path)
    try:
        try:
            with open(lg, encoding="utf-8") as fh:
                if fh.read() == text:
                    return True
        except FileNotFoundError:
            pass
        try:
            mode = os.stat(path).st_mode & 0o644  # never group/other-writable or executable
        except OSError:
            mode = 0o600
        atomic_write(lg, text, mode=mode, fsync=True)
    except (OSError, UnicodeError) as e:
        logging.getLogger("slurm_energy.config").warning(
            "cannot keep the last good site config as %s: %s", lg, e)
        return False
    return True


def load_site_config_lenient(path: str | os.PathLike | None = None) -> tuple[SiteConfig, list[str]]:
    """Load the site configuration keeping every part that is valid (:func:`site_config_from_dict_lenient`),
    as the hooks do, but without their last good copy: an unusable file gives the documented
    defaults, the message saying so. Returns ``(config, messages)``; never raises ConfigError."""
    return load_site_config_for_hooks(path, save=False, last_good=False)


def load_site_config_for_hooks(path: str | os.PathLike | None = None, save: bool = True,
                               last_good: bool = True) -> tuple[SiteConfig, list[str]]:
    """Site config for the Slurm hooks: lenient, and an unparsable file falls back to the last good copy.

    File chosen as in :func:`load_site_config`. When the file loads leniently with no message, its
    text is kept as ``<path>.last-good`` (:func:`save_last_good`; never raises). When the file
    cannot be read, is not YAML (a missing ``}``, a duplicate key) or its top level is no mapping,
    ``<path>.last-good`` is loaded leniently instead and the first message says the site config is
    unparsable, gives the exact YAML error and the time (mtime, ISO 8601) of the copy now in force;
    ``config.source_path`` is then the copy's path. Without a readable copy: documented defaults,
    and the message says so. Invalid keys in a parsable file: as :func:`load_site_config_lenient`.

    ``save=False`` (readers such as jobenergy) never writes the copy, only falls back to it;
    ``last_good=False`` never reads it either (:func:`load_site_config_lenient`).

    :returns: ``(config, messages)``; messages empty when all is well. Never raises ConfigError.
    """
    from datetime import datetime

    p = config_path(path)
    if p is None:
        return defaults_without_file(), []
    cfg, messages, text, fatal = _load_lenient(p)
    if fatal is None:
        if save and not messages and text is not None:
            save_last_good(p, text)
        return cfg, messages
    if not last_good:
        return cfg, [f"{fatal}\nNothing from {p} is in force: {_defaults_in_force()}"]
    what = "cannot be read" if text is None else "is unparsable"
    lg = last_good_path(p)
    try:
        mtime = datetime.fromtimestamp(os.stat(lg).st_mtime).astimezone().isoformat(timespec="seconds")
    except OSError as e:
        return cfg, [f"{fatal}\nThe site config {p} {what} and there is no last good copy "
                     f"({lg}: {e.strerror}): {_defaults_in_force()}. Fix {p} (check it with "
                     f"`slurm-energy check-config {p}`)"]
    good, good_msgs, _t, good_fatal = _load_lenient(lg)
    if good_fatal is not None:
        return good, [f"{fatal}\nThe site config {p} {what} and its last good copy cannot be used "
                      f"either ({good_fatal}): {_defaults_in_force()}. Fix {p}"]
    return good, [f"{fatal}\nThe site config {p} {what}; the last good copy {lg} from {mtime} is in "
                  f"force instead (every setting as it was then). Fix {p} (check it with "
                  f"`slurm-energy check-config {p}`)"] + good_msgs


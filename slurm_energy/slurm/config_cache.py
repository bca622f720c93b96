"""The site config for the Prolog and Epilog without importing pydantic: a cached, resolved copy.

The Prolog/Epilog must stay light (2 s, exit 0 whatever happens), so they do not validate
site.yaml themselves. The first hook that sees a new site.yaml text loads it the full way
(:func:`slurm_energy.config.lenient.load_site_config_for_hooks`: valid parts kept, last good copy
when unparsable) and writes ``<site.yaml>.resolved.json``: the validated config as JSON, the
problems found, and the text it came from. Every later hook reads that copy as long as
site.yaml's text (and this slurm-energy version and config schema) is unchanged: three file
reads, a CRC-32 and a string comparison, no pydantic (nor hashlib: loading OpenSSL cost more than the
comparison). The copy is root-only (0600: the store URL may hold a password); a copy that cannot
be read or written only costs the full load.

Readers (``jobenergy``, ``rollup``) run as ordinary users, who cannot read that copy: beside it the
full load writes ``<site.yaml>.reader.json`` (:data:`READER_SUFFIX`), the same key and problems with
only what readers use (``paths.store_url``, ``admins``, ``timezone``, ``source_path``,
``sampling.interim_s``), readable by
whoever may read site.yaml itself (its group and world read bits, never more; none: no reader copy).

Without a site.yaml (documented defaults) there is nothing to key a copy on: the full load is used.
"""

from __future__ import annotations

import json
import os

from slurm_energy._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (milliseconds of a hook's CPU)
if TYPE_CHECKING:
    from typing import Any, Protocol

    from slurm_energy.config import SiteConfig

    class HookSite(Protocol):
        """A site config as the hooks, the readers and the Prolog's reading take it: the full
        :class:`~slurm_energy.config.schema.SiteConfig` or its resolved copy (:class:`ConfigView`),
        read by section (``cfg.paths.spool_dir``, ``cfg.hardware``, ``cfg.sampling.interval_s``,
        ``cfg.node_meter``)."""

        @property
        def paths(self) -> Any: ...
        @property
        def hardware(self) -> Any: ...
        @property
        def sampling(self) -> Any: ...
        @property
        def node_meter(self) -> Any: ...

    _Dict = dict[str, Any]
else:
    _Dict = dict

#: Suffix of the resolved copy next to the site config.
RESOLVED_SUFFIX = ".resolved.json"
#: Suffix of the readers' copy (module docstring): readable by those who may read site.yaml.
READER_SUFFIX = ".reader.json"
ENV_VAR = "SLURM_ENERGY_CONFIG"  # as slurm_energy.config.schema.ENV_VAR (that module imports pydantic)
DEFAULT_PATH = "/etc/slurm-energy/site.yaml"


class ConfigView(_Dict):
    """A resolved site config as nested dicts with attribute access (``cfg.paths.spool_dir``),
    frozen as :class:`~slurm_energy.config.schema.SiteConfig` is: what the hooks, readers and
    rated-power look-ups read of one. Setting or removing a key raises TypeError."""

    def __init__(self, data: dict[str, Any]):
        super().__init__({k: type(self)(v) if isinstance(v, dict) else v for k, v in data.items()})

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def _frozen(self, *_a: Any, **_kw: Any) -> Any:
        raise TypeError("the site config is read-only: make a new view (ConfigView({**cfg, key: value}))")

    __setitem__ = __delitem__ = __setattr__ = __delattr__ = __ior__ = _frozen
    update = pop = popitem = setdefault = clear = _frozen


def _site_path() -> str | None:
    p = os.environ.get(ENV_VAR) or (DEFAULT_PATH if os.path.exists(DEFAULT_PATH) else None)
    return p or None


_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # slurm_energy/
#: The code the copy was validated by: a copy made by another schema or loader (an upgrade, or a
#: checkout changed under an editable install, both at version 0.1.0) may lack a field the code
#: reads, or hold a value the loader now drops (a carbon intensity outside carbon/units.py's limits).
SCHEMA_FILES = tuple(os.path.join(_PKG, *p) for p in (("config", "schema.py"), ("config", "lenient.py"),
                                                      ("config", "load.py"), ("carbon", "units.py")))


def _key(text: bytes) -> str:
    """What the copy is valid for: this version, the CRC-32 of :data:`SCHEMA_FILES` (their
    contents, not mtimes: nodes that installed the same code at different times share a site.yaml
    and its copy) and site.yaml's exact text (bytes kept as is)."""
    import zlib

    crc = 0
    try:
        for path in SCHEMA_FILES:
            with open(path, "rb") as f:
                crc = zlib.crc32(f.read(), crc)
        schema = f"{crc:08x}"
    except OSError:
        schema = "?"
    return f"{__version__}\n{schema}\n{text.decode('utf-8', 'surrogateescape')}"


def _cached(p: str | None, suffixes: tuple[str, ...] = (RESOLVED_SUFFIX,)) \
        -> tuple[bytes | None, tuple[ConfigView, list[str]] | None]:
    """(site.yaml's text, (config, problems) from the first copy (``<site.yaml><suffix>``) that
    matches that text)."""
    text: bytes | None = None
    if p is None:
        return None, None
    try:
        with open(p, "rb") as f:
            text = f.read()
    except OSError:
        return None, None
    for suffix in suffixes:
        try:
            with open(p + suffix, encoding="utf-8") as f:
                cached = json.load(f)
            if cached.get("key") == _key(text):
                return text, (ConfigView(cached["config"]), list(cached.get("problems", [])))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return text, None


def reader_config() -> tuple[ConfigView, list[str], str] | None:
    """``(config, problems, site.yaml's path)`` for a reader (``jobenergy``, any user): the hooks'
    resolved copy, else the readers' copy (:data:`READER_SUFFIX`), when one matches site.yaml's
    text; None otherwise (no site.yaml, stale or unreadable copies: load it in full)."""
    p = _site_path()
    hit = _cached(p, (RESOLVED_SUFFIX, READER_SUFFIX))[1]
    return None if hit is None or p is None else (*hit, p)


def cached_hook_config() -> tuple[ConfigView, list[str]] | None:
    """``(config, problems)`` from the resolved copy when it matches site.yaml's text (the hooks'
    common case: json and zlib only); None when :func:`load_hook_config` must load in full."""
    return _cached(_site_path())[1]


def load_hook_config() -> tuple[HookSite, list[str]]:
    """``(config, problems)`` for a hook: the resolved copy when it matches site.yaml's text, else
    the full lenient load (which then refreshes the copy). ``problems`` are the loader's messages,
    each saying what is in force. Never raises for a bad or missing file."""
    p = _site_path()
    text, hit = _cached(p)
    if hit is not None:
        return hit
    from slurm_energy.config.lenient import load_site_config_for_hooks

    cfg, problems = load_site_config_for_hooks(p)
    if p is not None and text is not None:
        key, data = _key(text), cfg.model_dump(mode="json")
        _save(p + RESOLVED_SUFFIX, {"key": key, "problems": problems, "config": data})
        _save_reader_copy(p, {"key": key, "problems": problems, "config": reader_view(data)})
    return cfg, problems


def reader_view(config: dict[str, Any]) -> dict[str, Any]:
    """What the readers' copy keeps of a resolved config: ``paths.store_url``, ``admins``,
    ``timezone``, ``source_path``, ``sampling.interim_s`` (jobenergy's note on stale running records)."""
    return {"paths": {"store_url": (config.get("paths") or {}).get("store_url")}, "admins": config.get("admins"),
            "timezone": config.get("timezone"), "source_path": config.get("source_path"),
            "sampling": {"interim_s": (config.get("sampling") or {}).get("interim_s")}}


def _save_reader_copy(site: str, data: dict[str, Any]) -> None:
    """Write the readers' copy with site.yaml's group/world read bits and group (a group that
    cannot be set drops the group bit); remove it when site.yaml is readable by its owner only."""
    path = site + READER_SUFFIX
    try:
        st = os.stat(site)
        bits = st.st_mode & 0o044
        if not bits:
            os.unlink(path)
            return
    except OSError:
        return
    _save(path, data, 0o600 | bits, st.st_gid if bits & 0o040 else -1)


def _save(path: str, data: dict[str, Any], mode: int = 0o600, gid: int = -1) -> None:
    """Write ``data`` atomically with ``mode`` (default 0600) and group ``gid`` (-1: the writer's);
    a failure is ignored (the next hook loads in full)."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(path)))
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            if gid != -1:
                try:
                    os.fchown(f.fileno(), -1, gid)
                except OSError:
                    mode &= ~0o040
            if mode != 0o600:
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def problem_lines(problems: list[str]) -> list[str]:
    """The config problems as a job record's errors, one line each (``site config problem: ...``):
    a message's lines joined with ``; `` (PyYAML's quoted snippet and its ``^`` dropped: the message
    names the line and column), so a record never carries a newline (shown escaped as ``\\n``)."""
    out = []
    for m in problems:
        lines = [x.strip() for x in m.splitlines() if x.strip() and not x.startswith("    ")]
        out.append("site config problem: " + "; ".join(lines))
    return out


def load_config(errors: list[str]) -> SiteConfig:
    """The full site config for the detached sampler and finalizer (carbon resolution; valid parts
    kept; unparsable file: its last good copy); each problem is appended to ``errors`` saying what
    is in force. Never raises for a bad file."""
    from slurm_energy.config.lenient import load_site_config_for_hooks

    cfg, problems = load_site_config_for_hooks()
    errors += problem_lines(problems)
    return cfg


def load_light_config(errors: list[str]) -> HookSite:
    """The site config as the Prolog/Epilog read it (:func:`load_hook_config`: the resolved copy,
    no pydantic import, when it matches site.yaml), for a detached process that reads only what a
    hook reads (the sampler's start: a short job's Epilog waits for it); problems as :func:`load_config`."""
    cfg, problems = load_hook_config()
    errors += problem_lines(problems)
    return cfg

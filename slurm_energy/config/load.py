"""Strict loading of the site configuration: find the file, parse YAML (duplicate keys rejected),
validate (:mod:`slurm_energy.config.schema`). Errors: :class:`ConfigError`, whose message names the
field (dotted path), the bad value and the fix.

Where the file is found (:func:`load_site_config`): the path given, else ``$SLURM_ENERGY_CONFIG``,
else ``/etc/slurm-energy/site.yaml``, else documented defaults (``defaults_used`` says which).

YAML is read with :class:`UniqueKeyLoader` (a ``yaml.SafeLoader``): a key given twice in one mapping
is an error naming the key and both lines, since PyYAML would silently keep only the last.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from pydantic import ValidationError

from slurm_energy.carbon.units import UNIT_FACTORS, ImplausibleIntensityError
from slurm_energy.config import schema
from slurm_energy.config.schema import ENV_VAR, SiteConfig
from slurm_energy.errors import ConfigError, SlurmEnergyError

_HINTS = {
    "pue": "PUE = facility energy / IT energy: a number in [1.0, 4.0], typically 1.1-2.0",
    "alpha": "alpha is the fraction of emissions counted, in [0, 1] (1.0 = no offset)",
    "interval_s": "sampling interval in seconds, > 0 (e.g. 5)",
    "timeout_s": "timeout in seconds, in (0, 30]",
    "country": "an ISO 3166 code, alpha-2 (FR) or alpha-3 (FRA)",
    "policy": "one of shared, exclusive_whole_node, utilisation_weighted",
    "value": "a number >= 0 in the given unit",
    "unit": "one of " + ", ".join(UNIT_FACTORS),
    "basis": "one of lifecycle, direct (or leave it out)",
    "year": "a four-digit year",
    "cpu_w_per_core": "watts per core, in (0, 100] (default 12)",
    "ram_w_per_gb": "watts per GB of RAM, in (0, 10] (default 0.3725)",
    "timezone": "an IANA zone such as Europe/Paris",
}


def _location_of(loc: list[str], data: Any) -> dict | None:
    """The ``location`` mapping that applies to the entry at ``loc``: its datacenter's, else the
    site's top-level one; None when neither is written."""
    if not isinstance(data, dict):
        return None
    dcs = data.get("datacenters")
    if len(loc) >= 2 and loc[0] == "datacenters" and isinstance(dcs, dict) and isinstance(dcs.get(loc[1]), dict):
        own = dcs[loc[1]].get("location")
        if isinstance(own, dict):
            return own
    top = data.get("location")
    return top if isinstance(top, dict) else None


def _ci_hint(loc: list[str], data: Any) -> str:
    """Fix for a bad ``carbon_intensity``: its dotted field, and the grid average of the location
    that applies (the bundled table, :mod:`slurm_energy.carbon.tables`, with its source), else how
    to find one. Never a number that fits no site (there is no universal grid intensity)."""
    from slurm_energy.carbon import tables

    field = ".".join(loc[: loc.index("carbon_intensity") + 1])
    where = _location_of(loc, data) or {}
    row = None
    try:
        if where.get("region"):
            row = tables.lookup_zone(str(where["region"]))
        if row is None and where.get("country"):
            row = tables.lookup_country(str(where["country"]))
    except FileNotFoundError:  # table not built: no figure to offer
        row = None
    if row is not None:
        year = f" {row.year}" if row.year else ""
        return (f"write {field}: {{value: {row.g_per_kwh:g}, unit: gCO2e/kWh}} ({row.zone}{year} grid average, bundled "
                f"table: {row.source.split(';')[0].strip()}) or your electricity supplier's figure; or remove {field} "
                "to use that table value")
    return (f"write {field}: {{value: <number>, unit: gCO2e/kWh}} with your grid's intensity (your electricity "
            "supplier's figure, at most 2000 gCO2e/kWh); or remove it and set location.country (ISO code) to use the "
            "bundled table's value for that country (check-config then prints the value in force)")


def _ci_fix(err: Any, loc: list[str], data: Any) -> str:
    """Fix for a bad ``carbon_intensity``: an implausibly low value's own fix (the value it probably
    meant), else :func:`_ci_hint` (the grid's table figure) and when 0 may be written."""
    exc = (err.get("ctx") or {}).get("error")
    bare = err.get("input")
    if isinstance(bare, (int, float)) and not isinstance(bare, bool) and loc and loc[-1] == "carbon_intensity":
        field = ".".join(loc)  # a bare number: the value was meant, only its unit is missing
        unit = "kgCO2e/kWh" if 0 < bare < 1 else "gCO2e/kWh"  # below 1 g/kWh no grid is: kg meant
        return (f"write {field}: {{value: {bare:g}, unit: {unit}}} if {bare:g} is in {unit} (other units: "
                "gCO2e/kWh, kgCO2e/kWh, kgCO2e/MWh, tCO2e/MWh, gCO2e/MWh); otherwise " + _ci_hint(loc, data))
    if not isinstance(exc, ImplausibleIntensityError):
        return _ci_hint(loc, data)
    if exc.guess is not None:
        return exc.fix
    return _ci_hint(loc, data) + (f"; {exc.note}" if exc.note else "")


def documented_example() -> str:
    """Where this installation's documented example of every key is: the ``site.yaml`` installed
    with the package (``slurm_energy/site_config/site.yaml``: a pip or .deb install has it; a
    checkout's is its ``site_config/site.yaml``)."""
    from slurm_energy.fileio import shipped_file

    path = shipped_file("slurm_energy.site_config", "site_config", "site.yaml")
    return path if os.path.exists(path) else "site_config/site.yaml (in the source tree)"


def _keys_at(loc: list[str]) -> list[str]:
    """The keys the schema allows beside ``loc``'s last (its siblings): the fields of the model
    that ``loc[:-1]`` leads to (a name under a mapping of models, e.g. a datacenter's, skipped)."""
    import typing

    from pydantic import BaseModel

    model: Any = SiteConfig
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            continue  # a mapping's key (a datacenter's or GPU's name): the model stays its values'
        inner = [a for a in [field.annotation, *typing.get_args(field.annotation)]
                 for a in [a, *typing.get_args(a)] if isinstance(a, type) and issubclass(a, BaseModel)]
        if not inner:
            return []
        model = inner[0]
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def did_you_mean(loc: list[str]) -> str | None:
    """The allowed key closest to the unknown key ``loc[-1]`` (``samplng`` -> ``sampling``), or None."""
    import difflib

    if not loc:
        return None
    near = difflib.get_close_matches(loc[-1], _keys_at(loc), n=1, cutoff=0.7)
    return near[0] if near else None


def format_error(e: ValidationError, origin: str, data: Any = None) -> str:
    lines = []
    for err in e.errors():
        loc = [str(x) for x in err.get("loc", ()) if not str(x).startswith("function-")]
        path = ".".join(loc) or "(top level)"
        bad = err.get("input")
        msg = err.get("msg", "")
        if err.get("type") == "extra_forbidden":
            near = did_you_mean(loc)
            fix = (f"unknown key: {'did you mean ' + repr(near) + '? ' if near else ''}fix its spelling or remove it "
                   f"(documented keys: {documented_example()})")
        elif "carbon_intensity" in loc and loc[-1] != "unit":
            fix = _ci_fix(err, loc, data)
        else:
            leaf = loc[-1] if loc else ""
            fix = _HINTS.get(leaf, f"see {documented_example()} for the documented form")
        shown = "{" + ", ".join(map(str, bad)) + "}" if isinstance(bad, dict) and len(bad) > 3 else repr(bad)
        end = "" if msg.endswith(("?", ".")) else "."
        lines.append(f"{origin}: {path}: bad value {shown}: {msg}{end} Fix: {fix}")
    return "\n".join(lines)


def not_a_mapping(data: Any, origin: str) -> str | None:
    """The error for parsed YAML whose top level is no mapping (None: a mapping, or empty)."""
    if data is None or isinstance(data, dict):
        return None
    return f"{origin}: top level must be a mapping of keys (cluster_name:, datacenters:, ...), got {type(data).__name__}"


def site_config_from_dict(data: Any, origin: str = "site config") -> SiteConfig:
    """Validate a parsed YAML mapping into a :class:`SiteConfig`.

    :raises ConfigError: not a mapping, or invalid; the message names the dotted field path, the
        bad value and the fix (one line per problem).
    """
    bad = not_a_mapping(data, origin)
    if bad:
        raise ConfigError(bad)
    try:
        return SiteConfig.model_validate(data or {})
    except ValidationError as e:
        raise ConfigError(format_error(e, origin, data)) from None


def config_path(path: str | os.PathLike | None) -> str | None:
    """The file to load: ``path``, else ``$SLURM_ENERGY_CONFIG``, else :data:`DEFAULT_PATH` if it
    exists, else None (documented defaults)."""
    if path is None:
        default = schema.DEFAULT_PATH
        path = os.environ.get(ENV_VAR) or (default if os.path.exists(default) else None)
    return None if path is None else os.fspath(path)


def defaults_without_file() -> SiteConfig:
    cfg = SiteConfig()
    return cfg.model_copy(update={"defaults_used": ["config_file"] + cfg.defaults_used})


class DuplicateKeyError(SlurmEnergyError, yaml.constructor.ConstructorError):
    """A mapping in the YAML text has the same key twice (PyYAML would keep only the last)."""


def _key_path(root: yaml.Node, target: yaml.Node) -> list[str]:
    """Dotted key path from ``root`` down to mapping node ``target`` (list of keys; [] = top level)."""
    stack: list[tuple[yaml.Node, list[str]]] = [(root, [])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, yaml.MappingNode):
            stack += [(v, path + [str(getattr(k, "value", "?"))]) for k, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(v, path + [f"[{i}]"]) for i, v in enumerate(node.value)]
    return []


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping, at any level.

    PyYAML (like most YAML parsers) silently keeps the last of two equal keys, so a second
    ``sampling:`` block would wipe out the first; YAML 1.2 (section 3.2.1.1) requires keys to be
    unique. Merge keys (``<<``) are left to PyYAML (overriding a merged key is allowed).
    :raises DuplicateKeyError: naming the dotted key and both line numbers (1-based).
    """

    def construct_document(self, node):
        self._se_root = node
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable key: PyYAML's own error follows
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    parent = _key_path(getattr(self, "_se_root", node), node)
                    dotted = ".".join(parent + [str(key)])
                    raise DuplicateKeyError(
                        problem=f"duplicate key {dotted!r} at line {first} and again at line {line}; "
                                f"YAML keeps only the last, so the one at line {first} would be silently "
                                f"lost. Fix: merge the two into one {str(key)!r} entry")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_text(p: str) -> str:
    """Text of file ``p``. :raises ConfigError: unreadable (message names path, reason and fix)."""
    try:
        with open(p, encoding="utf-8") as fh:
            return fh.read()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read the site config ({e.strerror}); fix the path or set "
                          f"{ENV_VAR}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: cannot read the site config (not UTF-8 text: {e}); save it as "
                          f"UTF-8") from None


def parse_yaml_text(text: str, origin: str = "site config") -> Any:
    """Parse YAML ``text`` (safe loader, duplicate keys rejected, see :class:`UniqueKeyLoader`).

    :raises ConfigError: not YAML or a duplicate key; the message starts with ``origin`` and
        contains the exact YAML error (line and column), then a line ``ORIGIN: line L, column C: what
        is wrong. Fix: ...`` (:func:`slurm_energy.config.yaml_errors.explain`).
    """
    loader = None
    try:
        loader = UniqueKeyLoader(text)  # raises ReaderError itself on a control character
        loader.name = origin  # marks say 'in "/etc/slurm-energy/site.yaml", line 3' (not <unicode string>)
        return loader.get_single_data()
    except yaml.YAMLError as e:
        from slurm_energy.config.yaml_errors import explain

        hint = explain(e, origin, text)  # "ORIGIN: line L, column C: what is wrong. Fix: ..."
        raw = str(e).strip().replace('"<unicode string>"', f'"{origin}"')
        raise ConfigError(f"{origin}: not valid YAML: {raw}" + (f"\n{hint}" if hint else "")) from None
    finally:
        if loader is not None:
            loader.dispose()


def _read_yaml(p: str) -> Any:
    """Parsed YAML of file ``p``. :raises ConfigError: unreadable, not YAML, or a duplicate key."""
    return parse_yaml_text(read_text(p), p)


def load_site_config(path: str | os.PathLike | None = None) -> SiteConfig:
    """Load and validate the site configuration.

    ``path`` None: ``$SLURM_ENERGY_CONFIG``, else ``/etc/slurm-energy/site.yaml`` if it exists,
    else documented defaults (``defaults_used`` then also contains ``"config_file"``).
    :raises ConfigError: file given but missing/unreadable, not YAML, or invalid (message names
        field, value and fix).
    """
    p = config_path(path)
    if p is None:
        return defaults_without_file()
    return site_config_from_dict(_read_yaml(p), origin=p).model_copy(update={"source_path": p})


"""MkDocs hooks (mkdocs.yml ``hooks:``): pages generated from the code at build time, so they cannot
drift from it.

* ``admins/config-reference.md``: every key of ``/etc/slurm-energy/site.yaml`` from the pydantic
  schema (:mod:`slurm_energy.config.schema`): type, default, bounds, and the schema's own comment.
* ``reference/cli.md``: ``jobenergy`` and every ``slurm-energy`` sub-command's ``--help``, from the
  argparse parsers the commands run.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_INTERNAL = {"defaults_used", "source_path"}  # filled by the loader, not written by an admin


def _comments(cls: type) -> dict[str, str]:
    """Field name -> the comment the source gives it (lines above and at its end), base classes too."""
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.startswith("slurm_energy"):
            out.update({k: v for k, v in _own_comments(base).items() if v or k not in out})
    return out


def _own_comments(cls: type) -> dict[str, str]:
    out: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines()[1:]:
        s = line.strip()
        if s.startswith("#"):
            above.append(s.lstrip("# "))
            continue
        m = re.match(r"(\w+)\s*:[^=]*(=.*)?$", s)
        if m and not s.startswith(("def ", "@", "return")):
            trail = s.split("  # ", 1)[1] if "  # " in s else ""
            out[m.group(1)] = " ".join([*above, trail]).strip()
        above = []
    return out


def _type_name(t: object) -> str:
    origin = typing.get_origin(t)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(t))
    if origin is typing.Literal:
        return " / ".join(repr(a) for a in typing.get_args(t))
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in typing.get_args(t))}]"
    if t is type(None):
        return "null"
    return getattr(t, "__name__", str(t))


def _bounds(field) -> str:
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(f"{signs[k]} {getattr(m, k)}" for m in field.metadata for k in signs if hasattr(m, k))


def _model_of(t: object) -> type | None:
    from pydantic import BaseModel

    for a in (t, *typing.get_args(t)):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
    return None


def _rst(text: str) -> str:
    """A docstring's reST roles and literals as Markdown code."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return " ".join(text.replace("``", "`").split())


def model_tables(root: type, *, top: str = "Top level", skip: frozenset[str] = frozenset()) -> list[str]:
    """One Markdown table per pydantic model reachable from ``root``: key, type, default, bounds and
    the comment the source gives each field (units included)."""
    lines: list[str] = []
    todo: list[tuple[str, type]] = [("", root)]
    done: set[type] = set()
    while todo:
        prefix, cls = todo.pop(0)
        if cls in done:
            continue
        done.add(cls)
        lines += [f"## `{prefix}`" if prefix else f"## {top}", "", _rst(inspect.getdoc(cls) or ""), "",
                  "| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
        notes = _comments(cls)
        for name, field in cls.model_fields.items():
            if name in skip:
                continue
            key = f"{prefix}.{name}" if prefix else name
            default = "(required)" if field.is_required() else repr(field.get_default(call_default_factory=True))
            sub = _model_of(field.annotation)
            if sub is not None:
                args = typing.get_args(field.annotation)
                many = typing.get_origin(field.annotation) in (dict, list) or any(
                    typing.get_origin(a) in (dict, list) for a in args)
                todo.append((f"{key}[]" if many else key, sub))
                if len(default) > 40:
                    default = "see below"
            meaning = notes.get(name, "").replace("|", "\\|")
            lines.append(f"| `{key}` | {_type_name(field.annotation).replace('|', ' or ')} | `{default}` | "
                         f"{_bounds(field)} | {meaning} |")
        lines.append("")
    return lines


def config_reference() -> str:
    from slurm_energy.config import schema

    return "\n".join([
        "# Site configuration reference", "",
        "Generated from the configuration schema (`slurm_energy/config/schema.py`) each time the docs are",
        f"built. The file is `{schema.DEFAULT_PATH}` (or `${schema.ENV_VAR}`); every key is optional,",
        "unknown keys are refused with the key's name, and `slurm-energy check-config` validates a file and",
        "prints what it resolves to per partition. A commented example of every key is `site_config/site.yaml`",
        "in the source tree (the Debian package installs it as `/etc/slurm-energy/site.yaml`).",
        "`datacenters.<name>[]` and `hardware.gpu[]` are mappings: one entry per datacenter / GPU model name.", "",
        *model_tables(schema.SiteConfig, skip=_INTERNAL)]) + "\n"


def record_reference() -> str:
    from slurm_energy import model

    return "\n".join([
        "# Record fields", "",
        "A job's record as the store keeps it and `jobenergy --json` prints it, generated from the data model",
        "(`slurm_energy/model.py`) each time the docs are built. Energies are in joules (J) unless the name",
        "says kWh; `None` (JSON `null`) means not measured, never 0. A job's record holds one node summary",
        "per node (`nodes[]`), each with its devices (`nodes[].devices[]`).", "",
        *model_tables(model.JobRecord, top="The job")]) + "\n"


def store_schema() -> str:
    import sqlite3
    import tempfile

    from slurm_energy.store import schema
    from slurm_energy.store.sqlstore import open_store

    with tempfile.TemporaryDirectory() as tmp:
        open_store(f"sqlite:///{tmp}/jobs.db").close()
        db = sqlite3.connect(f"{tmp}/jobs.db")
        ddl = [r[0] for r in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type DESC, name")]
        db.close()
    return "\n".join([
        "# Store schema", "",
        f"The SQL schema of the job store at version {schema.SCHEMA_VERSION}, as a new SQLite store is created",
        "by the product's own migrations (`slurm_energy/store/schema.py`), read back from `sqlite_master`",
        "when the docs are built. PostgreSQL gets the same tables and columns (`DOUBLE PRECISION` where SQLite",
        "shows `REAL` affinity). Upgrades apply the missing migrations in order, each in one transaction; see",
        "[the store](../STORE.md) and [operations](../admins/operations.md#upgrades).", "",
        "```sql", *(d.strip() + ";" for d in ddl), "```", ""])


def _help(parser: argparse.ArgumentParser) -> str:
    os.environ["COLUMNS"] = "100"
    return parser.format_help()


def cli_reference() -> str:
    from slurm_energy.cli import jobenergy, main

    lines = ["# Command-line reference", "",
             "Generated from the argument parsers each time the docs are built: what `--help` prints.",
             "The same text is in the man pages, `man jobenergy` and `man slurm-energy`.", "",
             "## jobenergy", "", "```text", _help(jobenergy.build_parser()).rstrip(), "```", "",
             "## slurm-energy", "", "```text"]
    top = main.build_parser()
    lines += [_help(top).rstrip(), "```", ""]
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        lines += [f"### slurm-energy {name}", "", "```text", _help(parser).rstrip(), "```", ""]
    return "\n".join(lines) + "\n"


GENERATED = {"admins/config-reference.md": config_reference, "reference/cli.md": cli_reference,
             "reference/record.md": record_reference, "reference/store-schema.md": store_schema}


def on_files(files, config):
    from mkdocs.structure.files import File

    for path, make in GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files

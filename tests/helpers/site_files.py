"""The tests' one site-config writer, behind the ``site_config`` fixture (tests/conftest.py).

``site_config(**overrides)`` writes ``tmp_path/site.yaml`` as YAML (``yaml.safe_dump`` of the
keyword arguments: a dict is a section, e.g. ``outputs={"mail": {"program": p}}``), reads it back
through the real loader (:func:`slurm_energy.config.load_site_config`, the one every command uses)
and returns the :class:`~slurm_energy.config.SiteConfig`, its ``source_path`` that file.
``site_config.write(**overrides)`` writes the file only and returns its path (a config a test
expects to be refused, or one a child process reads).

Every file carries ``cluster_name: t`` and a ``paths:`` section keeping the node's files under
``tmp_path`` (``spool_dir`` tmp/spool, ``spool_fallback_dir`` tmp/spool2, ``log_dir`` tmp/log; not
this machine's /run/slurm-energy, which a node finalizer's sweep drains) unless the overrides say
otherwise: ``paths=`` entries are merged into those, and a value of None leaves a key out
(``cluster_name=None``; ``paths={"log_dir": None}``); ``bare=True`` writes the overrides alone.
``text=`` writes that YAML text as it is, for a test of the text itself (duplicate keys, an empty
file, a YAML syntax error).
$SLURM_ENERGY_CONFIG points at the file (never this machine's /etc/slurm-energy/site.yaml) and
$SLURM_ENERGY_STORE is unset.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig


def _without_none(d: dict) -> dict:
    return {k: (_without_none(v) if isinstance(v, dict) else v) for k, v in d.items() if v is not None}


class SiteConfigFiles:
    """``site.yaml`` files under one test's ``tmp_path`` (see the module's docstring)."""

    def __init__(self, tmp_path: Path, monkeypatch: Any) -> None:
        self.tmp_path = tmp_path
        self._monkeypatch = monkeypatch

    def defaults(self) -> dict:
        t = self.tmp_path
        return {"cluster_name": "t",
                "paths": {"spool_dir": f"{t}/spool", "spool_fallback_dir": f"{t}/spool2", "log_dir": f"{t}/log"}}

    def write(self, *, bare: bool = False, name: str = "site.yaml", text: str | None = None, **overrides: Any) -> Path:
        if text is not None and (bare or overrides):
            raise TypeError("site_config.write: text= is the whole file; give no overrides with it")
        data = {} if bare else self.defaults()
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        path = self.tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text is not None else yaml.safe_dump(_without_none(data), sort_keys=False))
        self._monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(path))
        self._monkeypatch.delenv("SLURM_ENERGY_STORE", raising=False)
        return path

    def __call__(self, *, bare: bool = False, name: str = "site.yaml", text: str | None = None,
                 **overrides: Any) -> SiteConfig:
        from slurm_energy.config import load_site_config  # the package on first use, not at collection

        return load_site_config(self.write(bare=bare, name=name, text=text, **overrides))

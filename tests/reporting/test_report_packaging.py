"""The report templates must ship with a non-editable install (pyproject explicit package list)."""

from __future__ import annotations

import os

import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _setuptools_cfg() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_subpackage_is_listed():
    # packages.find cannot see package-dir mapped packages, so the list is explicit; a sub-package
    # missing from it would be silently left out of `pip install .`.
    listed = set(_setuptools_cfg()["packages"])
    on_disk = {
        os.path.relpath(d, ROOT).replace(os.sep, ".")
        for d, _, files in os.walk(os.path.join(ROOT, "slurm_energy"))
        if "__init__.py" in files
    }
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_templates_are_mapped_and_packaged():
    cfg = _setuptools_cfg()
    assert cfg["package-dir"]["slurm_energy.templates"] == "templates"
    assert "slurm_energy.templates" in cfg["packages"]
    patterns = cfg["package-data"]["slurm_energy.templates"]
    for name in ("report.html.j2", "report.css"):
        assert os.path.isfile(os.path.join(ROOT, "templates", name))
        assert any(name.endswith(p.lstrip("*")) for p in patterns), name

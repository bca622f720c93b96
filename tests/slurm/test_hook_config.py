"""The Prolog/Epilog read a resolved copy of site.yaml: no pydantic on their path, same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITE = """paths:
  spool_dir: {d}/spool
  log_dir: {d}/log
hardware:
  ram_w_per_gb: 0.5
  cpu_tdp_w: {{"Mystery CPU": 90}}
sampling: {{intervl_s: 2}}
"""


def _load_in_fresh_python(site: str) -> dict:
    code = ("import json, sys; from slurm_energy.slurm.hookconfig import load_hook_config;"
            "cfg, problems = load_hook_config();"
            "print(json.dumps({'pydantic': 'pydantic' in sys.modules, 'spool': cfg.paths.spool_dir,"
            " 'ram': cfg.hardware.ram_w_per_gb, 'tdp': dict(cfg.hardware.cpu_tdp_w), 'problems': problems}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "SLURM_ENERGY_CONFIG": site}, check=True)
    return json.loads(out.stdout)


def test_second_hook_reads_the_resolved_copy_without_pydantic(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE.format(d=tmp_path))
    first = _load_in_fresh_python(str(site))
    second = _load_in_fresh_python(str(site))
    assert first["pydantic"] and not second["pydantic"]
    assert first == {**second, "pydantic": True}
    assert second["spool"] == f"{tmp_path}/spool" and second["ram"] == 0.5 and second["tdp"] == {"Mystery CPU": 90.0}
    # the typo is still reported on every job, saying what is in force
    assert len(second["problems"]) == 2 and "sampling.intervl_s" in second["problems"][0]
    copy = tmp_path / "site.yaml.resolved.json"
    assert (os.stat(copy).st_mode & 0o777) == 0o600


def test_an_edited_site_config_is_loaded_in_full_again(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE.format(d=tmp_path))
    _load_in_fresh_python(str(site))
    site.write_text(SITE.format(d=tmp_path).replace("0.5", "0.75"))
    again = _load_in_fresh_python(str(site))
    assert again["pydantic"] and again["ram"] == 0.75
    assert json.loads((tmp_path / "site.yaml.resolved.json").read_text())["config"]["hardware"]["ram_w_per_gb"] == 0.75


def test_prolog_entry_imports_nothing_heavy(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE.format(d=tmp_path))
    _load_in_fresh_python(str(site))  # the copy exists, as after the first job
    code = ("import sys; import slurm_energy.slurm.hooks as h; from slurm_energy.slurm.runtime import load_config;"
            "from slurm_energy.pipeline import open_readers, device_inventory; errors = [];"
            "cfg = load_config(errors, light=True); r, n = open_readers(cfg); device_inventory(r, n);"
            "print(sorted(m for m in ('pydantic', 'sqlalchemy', 'matplotlib', 'pandas', 'jinja2', 'yaml')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "SLURM_ENERGY_CONFIG": str(site)}, check=True)
    assert out.stdout.strip() == "[]", out.stderr

"""The Prolog/Epilog read a resolved copy of site.yaml: no pydantic on their path, same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SITE = """paths:
  spool_dir: {d}/spool
  log_dir: {d}/log
hardware:
  ram_w_per_gb: 0.5
  cpu_tdp_w: {{"Mystery CPU": 90}}
sampling: {{intervl_s: 2}}
"""


def _load_in_fresh_python(site: str) -> dict:
    code = ("import json, sys; from slurm_energy.slurm.config_cache import load_hook_config;"
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
    code = ("import sys; import slurm_energy.slurm.hooks as h; import slurm_energy.slurm.hooks.prolog;"
            "from slurm_energy.slurm.config_cache import load_light_config;"
            "from slurm_energy.pipeline import open_readers, device_inventory; errors = [];"
            "cfg = load_light_config(errors); r, n = open_readers(cfg); device_inventory(r, n);"
            "print(sorted(m for m in ('pydantic', 'sqlalchemy', 'matplotlib', 'pandas', 'jinja2', 'yaml')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "SLURM_ENERGY_CONFIG": str(site)}, check=True)
    assert out.stdout.strip() == "[]", out.stderr


#: Top-level packages the Prolog/Epilog must never load (seconds of CPU between them in a burst).
HEAVY = {"pydantic", "pydantic_core", "sqlalchemy", "jsonschema", "matplotlib", "pandas", "numpy", "jinja2",
         "yaml", "requests", "urllib3", "psutil", "pynvml", "amdsmi", "prometheus_client", "psycopg"}
#: Modules a hook may import beyond a bare ``python -I -S`` with json (how the hook scripts start
#: it): the Prolog imported 80 beyond ``python -I`` before the light entry (issue 12: imports are
#: most of a hook's CPU), now 65, most of them for its first counter reading (readers, sample file,
#: the dataclasses of slurm_energy.core); the Epilog 17. A new import on this path must justify
#: itself by raising these bounds. +1 each (issue 22): slurm_energy.textsafe (no imports of its
#: own), which escapes a user's text in the hooks' log lines. +2 (issue 29) on the Prolog's full-way
#: reading: slurm_energy.sampling.files (the readers' explicit file source, os and errno only) and
#: slurm_energy.devices.hardware (the typed hardware config the readers take, dataclasses only).
#: +1 each (issue 29): slurm_energy.jobmeta (no imports of its own), the one declaration of the
#: job's identity fields the hooks' context uses. +1 on the Prolog's full-way reading where RAPL
#: measures no CPU: slurm_energy.sampling.readers.hwmon_power (the hwmon power meters that measure
#: ARM server CPUs, looked for before the TDP model; its stdlib imports are loaded already).
#: The node sampler (``sampling.sampler: node``, the default) adds slurm_energy.slurm.sampler_join and
#: fcntl (the node's lock probed) to each hook's path; the wake-up signal is a number, not the signal
#: module, and threading (nodestats: _thread's get_ident), bisect (sampletable: where rows are
#: sliced), select (processes: where a pidfd is waited on) and encodings.ascii (prolograw: the boot
#: id read as bytes) left the hooks' path, so it fits the same bounds: measured, the Prolog 69 (the
#: per-job sampler's 67), the Epilog 20 (20), the raw Prolog 22 starting the node sampler (20).
MAX_PROLOG_MODULES = 71
MAX_EPILOG_MODULES = 20
#: The Prolog once a sampler has listed the node's counter files (every job but a node's first, on
#: a node without job GPUs: slurm_energy.slurm.prolograw): the files are read, not the readers
#: imported; 20 modules (21 with slurm_energy.textsafe, issue 22; 22 with slurm_energy.jobmeta, issue 29).
MAX_PROLOG_RAW_MODULES = 22

#: the repo's code (as every other test here, and as _load_in_fresh_python made the resolved copy),
#: run as the hook scripts run it (slurm_energy/slurm/hooks/__main__.py: ``-I -S``, the package dir first)
_RUN_HOOK = """import json, os, sys
sys.path.insert(0, sys.argv[2])
base = set(sys.modules)
from slurm_energy.slurm import hooks
hooks.main([sys.argv[1]])
print(json.dumps(sorted(set(sys.modules) - base)))
"""


def _hook_modules(tmp_path, which: str, site, job: str = "4343") -> set[str]:
    env = {"SLURM_JOB_ID": job, "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid()),
           "SLURM_JOB_USER": "u", "SLURMD_NODENAME": "n1", "SLURM_NODELIST": "n1", "SLURM_CLUSTER_NAME": "t",
           "SLURM_JOB_CPUS_PER_NODE": "1", "SLURM_JOB_WORK_DIR": str(tmp_path), "SLURM_JOB_EXIT_CODE2": "0:0",
           "SLURM_ENERGY_CONFIG": str(site), "LANG": "C.UTF-8",
           # the marks root of this test alone: the host's may hold an old job's directory, which
           # the Prolog's sweep removes with shutil (+7 modules; CI's unit stage met one)
           "SLURM_ENERGY_MARKS_DIR": str(tmp_path / "marks")}
    out = subprocess.run([sys.executable, "-I", "-S", "-c", _RUN_HOOK, which, REPO], capture_output=True, text=True,
                         cwd="/", env=env, check=True, timeout=60)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("sampler", ["node", "job"])  # the default, and a process per job
def test_prolog_and_epilog_import_no_heavy_module_and_few_modules(tmp_path, sampler):
    site = tmp_path / "site.yaml"
    site.write_text(SITE.format(d=tmp_path).replace("{intervl_s: 2}", f"{{intervl_s: 2, sampler: {sampler}}}"))
    _load_in_fresh_python(str(site))  # the copy exists, as after the first job
    bare = subprocess.run([sys.executable, "-I", "-S", "-c", "import sys; print(len(sys.modules))"],
                          capture_output=True, text=True, check=True)
    assert int(bare.stdout) > 10  # the interpreter's own start-up modules are not counted below
    prolog = _hook_modules(tmp_path, "prolog", site)  # starts the job's (or the node's) sampler, a real process
    recipe = tmp_path / "spool" / "prolog-files-n1.json"
    for _ in range(200):  # the sampler lists the node's counter files once it has taken the job up
        if recipe.exists():
            break
        time.sleep(0.05)
    epilog = _hook_modules(tmp_path, "epilog", site)  # stops it (the node sampler: the job's last row), starts the finalizer
    assert "slurm_energy.slurm.hooks.prolog" in prolog and "slurm_energy.slurm.hooks.epilog" in epilog  # the sets are real
    assert ("slurm_energy.slurm.sampler_join" in prolog) == (sampler == "node")  # the path this case measures
    for name, mods, bound in (("prolog", prolog, MAX_PROLOG_MODULES), ("epilog", epilog, MAX_EPILOG_MODULES)):
        heavy = {m for m in mods if m.split(".")[0] in HEAVY}
        assert heavy == set(), f"the {name} imported {sorted(heavy)}"
        assert len(mods) <= bound, f"the {name} imported {len(mods)} modules: {sorted(mods)}"
    # nor what a hook's start-up needs no longer (each was milliseconds of CPU per hook)
    assert {"logging", "subprocess", "site"} & (prolog | epilog) == set()
    assert {"dataclasses", "typing", "slurm_energy.core"} & epilog == set()
    log = (tmp_path / "log" / "hooks.log").read_text()
    assert "hook=prolog job=4343 node=n1 outcome=ok" in log and "hook=epilog job=4343 node=n1 outcome=terminated" in log
    raw = _hook_modules(tmp_path, "prolog", site, job="4344")
    _hook_modules(tmp_path, "epilog", site, job="4344")
    assert (tmp_path / "spool" / "jobs" / "4344-r0" / "samples-n1.jsonl").exists()  # its sampler wrote the row
    assert {m for m in raw if m.split(".")[0] in HEAVY} == set() and "slurm_energy.core" not in raw
    assert len(raw) <= MAX_PROLOG_RAW_MODULES, f"the prolog imported {len(raw)} modules: {sorted(raw)}"


def test_a_copy_made_by_another_config_schema_is_not_used(tmp_path, monkeypatch):
    from slurm_energy.slurm import config_cache as hookconfig

    schema = tmp_path / "schema.py"
    schema.write_text("# v1\n")
    units = tmp_path / "units.py"  # carbon/units.py: the limits the loader checks intensities against
    units.write_text("# limits v1\n")
    monkeypatch.setattr(hookconfig, "SCHEMA_FILES", (str(schema), str(units)))
    site = tmp_path / "site.yaml"
    site.write_text(SITE.format(d=tmp_path))
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    hookconfig.load_hook_config()  # writes the copy
    cfg, _ = hookconfig.load_hook_config()
    assert isinstance(cfg, hookconfig.ConfigView)  # read from the copy
    schema.write_text("# v2: a field added\n")  # same version string, same site.yaml text
    cfg, _ = hookconfig.load_hook_config()
    assert not isinstance(cfg, hookconfig.ConfigView) and cfg.hardware.ram_w_per_gb == 0.5  # loaded in full
    cfg, _ = hookconfig.load_hook_config()
    assert isinstance(cfg, hookconfig.ConfigView) and cfg.hardware.ram_w_per_gb == 0.5  # the refreshed copy
    units.write_text("# limits v2: a carbon intensity limit changed\n")  # schema.py as it was
    cfg, _ = hookconfig.load_hook_config()
    assert not isinstance(cfg, hookconfig.ConfigView)  # loaded in full again
    cfg, _ = hookconfig.load_hook_config()
    assert isinstance(cfg, hookconfig.ConfigView)

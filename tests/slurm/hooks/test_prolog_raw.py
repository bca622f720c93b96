"""The Prolog's first reading as raw files (issue 12): the sampler writes the row the Prolog would
have written, with the Prolog's time and the Prolog's counter values. In-process, the detached
sampler stubbed: its start (node_reading.prolog_reading_by_sampler) is called by hand."""

from __future__ import annotations

import json
import os

from slurm_energy.sampling.samplefile import read_sample_file
from slurm_energy.slurm import detach, prolograw
from slurm_energy.slurm.config_cache import load_light_config
from slurm_energy.slurm.hooks.prolog import prolog
from slurm_energy.slurm.node_reading import prolog_reading_by_sampler, spool_from_dir
from tests.fakes.powercap import Zone, build_tree, zone_dir
from tests.helpers.jobrecord_factory import hook_env, site_yaml


def _env(job: str) -> dict:
    return hook_env(job)


def _setup(tmp_path, monkeypatch) -> str:
    rapl = build_tree(tmp_path / "sys", [Zone("intel-rapl:0", "package-0", energy_uj=1_000_000)])
    site_yaml(tmp_path, f"hardware:\n  rapl_root: {rapl}\n", monkeypatch=monkeypatch)
    monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(tmp_path / "marks"))
    monkeypatch.setattr(detach, "spawn", lambda *a, **kw: 4_000_000)  # no sampler process: called below
    assert os.path.isfile(os.path.join(zone_dir(rapl, "intel-rapl:0"), "energy_uj"))
    return os.path.join(rapl, "intel-rapl:0", "energy_uj")  # the path the reader reads (a symlink in sysfs)


def _sampler_start(tmp_path, job: str):
    spool, ctx = spool_from_dir(str(tmp_path / "spool" / "jobs" / f"{job}-r0"), "n1")
    prolog_reading_by_sampler(load_light_config([]), ctx, spool)
    return spool


def _package_uj(samples) -> int:
    (r,) = [r for r in samples.readings if r.device_class == "cpu"]
    return r.energy_uj


def test_the_sampler_writes_the_prologs_row_from_the_files_the_prolog_read(tmp_path, monkeypatch):
    energy = _setup(tmp_path, monkeypatch)
    # the node's first job: no file list yet, so the Prolog reads the full way; its sampler makes the list
    assert prolog(_env("11")) == 0
    first = _sampler_start(tmp_path, "11")
    assert [s.kind for s in read_sample_file(first.samples)] == ["prolog"]
    recipe = json.loads((tmp_path / "spool" / "prolog-files-n1.json").read_text())
    assert recipe["files"] == sorted([energy, "/proc/meminfo", "/proc/stat"])
    # the next job: the Prolog reads those three files (package counter at 1,000,000 uJ) and writes no row
    assert prolog(_env("12")) == 0
    spool = first.__class__(first.spool_dir, "12", 0, "n1")
    raw = json.loads(open(prolograw.raw_path(spool)).read())
    assert raw["files"][energy].strip() == "1000000" and not os.path.exists(spool.samples)
    with open(energy, "w") as f:  # the job starts and runs: 4 J later the sampler starts
        f.write("5000000\n")
    _sampler_start(tmp_path, "12")
    (row,) = read_sample_file(spool.samples)
    assert row.kind == "prolog" and abs(row.t - raw["t"]) < 1e-6  # the Prolog's instant (the file keeps us)...
    assert _package_uj(row) == 1_000_000  # ...and its counter value, not the sampler's 5,000,000
    assert row.node.ncpu == os.cpu_count() and row.node.cpu_total_s > 0
    assert not os.path.exists(prolograw.raw_path(spool)) and spool.read_errors() == []


def test_a_file_list_that_misses_a_counter_is_dropped_and_made_again(tmp_path, monkeypatch):
    energy = _setup(tmp_path, monkeypatch)
    assert prolog(_env("21")) == 0
    _sampler_start(tmp_path, "21")
    recipe_file = tmp_path / "spool" / "prolog-files-n1.json"
    recipe = json.loads(recipe_file.read_text())
    recipe_file.write_text(json.dumps({**recipe, "files": ["/proc/meminfo", "/proc/stat"]}))  # a zone added since
    assert prolog(_env("22")) == 0
    spool = _sampler_start(tmp_path, "22")
    assert not os.path.exists(spool.samples)  # no row mixing the Prolog's instant with the sampler's
    (err,) = spool.read_errors()
    assert "prolog reading: not written from the Prolog's files" in err and energy in err
    assert not recipe_file.exists()
    assert prolog(_env("23")) == 0  # the full way again; its sampler makes the list again
    third = _sampler_start(tmp_path, "23")
    assert [s.kind for s in read_sample_file(third.samples)] == ["prolog"] and _package_uj(
        read_sample_file(third.samples)[0]) == 1_000_000
    assert energy in json.loads(recipe_file.read_text())["files"]


def test_a_job_with_gpus_reads_the_full_way(tmp_path, monkeypatch):
    _setup(tmp_path, monkeypatch)
    assert prolog(_env("31")) == 0
    _sampler_start(tmp_path, "31")
    assert prolog(dict(_env("32"), SLURM_JOB_GPUS="0")) == 0  # no NVIDIA/AMD GPU here: unresolved
    spool = _sampler_start(tmp_path, "32")
    assert not os.path.exists(prolograw.raw_path(spool))
    assert [s.kind for s in read_sample_file(spool.samples)] == ["prolog"]


def test_a_zone_added_since_the_list_sends_the_prolog_the_full_way(tmp_path, monkeypatch):
    _setup(tmp_path, monkeypatch)
    assert prolog(_env("41")) == 0
    _sampler_start(tmp_path, "41")
    build_tree(tmp_path / "sys", [Zone("intel-rapl:1", "package-1", energy_uj=7_000_000)])  # a second package
    assert prolog(_env("42")) == 0
    spool = _sampler_start(tmp_path, "42")
    (row,) = read_sample_file(spool.samples)  # written by the Prolog itself, both packages in it
    assert row.kind == "prolog" and spool.read_errors() == []
    assert sorted(r.energy_uj for r in row.readings if r.device_class == "cpu") == [1_000_000, 7_000_000]

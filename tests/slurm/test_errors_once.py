"""An error is on a job's record once, however many of its processes recorded it: a site-config
problem is recorded by the Prolog and again by the finalizer (each loads the config), each line of
the spool's errors file stamped with its own time; the record showed it twice."""

from __future__ import annotations

import types

from test_no_data import T0, _row, _spool, rapl

from slurm_energy.accounting.merge import combine_errors, merge_records
from slurm_energy.slurm import attempt as spool_mod
from slurm_energy.slurm.config_cache import load_light_config
from slurm_energy.slurm.jobend import finish
from slurm_energy.store import open_store
from tests.fakes.slurm_facts import no_slurm  # noqa: F401  (a fixture)
from tests.helpers.jobrecord_factory import job_record


def _clock(stamp: str):
    """The spool module's clock, stamping record_error's lines with ``stamp``."""
    import time

    return types.SimpleNamespace(strftime=lambda fmt: stamp, time=time.time)


def test_a_config_error_from_the_prolog_and_the_finalizer_is_on_the_record_once(tmp_path, monkeypatch, no_slurm):
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: c1\npaths:\n  spool_dir: {tmp_path}/spool\n  results_dir: {tmp_path}/results\n"
                    f"  store_url: sqlite:///{tmp_path}/jobs.db\n  log_dir: {tmp_path}/log\n"
                    "outputs:\n  prometheus:\n    enabled: false\nbogus_key: 1\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    # RAPL package 5 J -> 65 J over 10 s, the job all of the busy CPU time: measured, 60 J
    spool, _ctx = _spool(tmp_path, [_row(0, "prolog", 0.0, 0.0, rapl(5_000_000)),
                                   _row(10, "final", 4.0, 4.0, rapl(65_000_000))])
    prolog_errors: list[str] = []
    load_light_config(prolog_errors)  # the Prolog's loader (resolved copy, no pydantic)
    monkeypatch.setattr(spool_mod, "time", _clock("2026-12-02T10:49:33"))
    for e in prolog_errors:  # as the Prolog records them
        spool.record_error(e)
    monkeypatch.setattr(spool_mod, "time", _clock("2026-12-02T10:49:35"))  # the finalizer, 2 s later
    assert finish.finalize_main(spool.dir, "n1", T0 + 10, "0:0", "terminated") == 0
    assert len(spool.read_errors()) == 4  # both sources did record both problems

    (rec,) = open_store(f"sqlite:///{tmp_path}/jobs.db", readonly=True).get_job("61")
    from slurm_energy.config.load import documented_example

    once = [f"2026-12-02T10:49:33 site config problem: {site}: bogus_key: bad value 1: Extra inputs are not "
            f"permitted. Fix: unknown key: fix its spelling or remove it (documented keys: {documented_example()})",
            f"2026-12-02T10:49:33 site config problem: {site}: every other key of this file is in force; in place "
            "of the bad keys: bogus_key not defined"]
    assert [e for e in rec.errors if "site config problem" in e] == once
    assert [e for e in rec.nodes[0].errors if "site config problem" in e] == once
    assert rec.nodes[0].devices[0].energy_j == 60.0  # 65 J - 5 J, share 4/4


def test_merge_keeps_each_error_once_in_order_first_occurrence():
    a = job_record("80", node="n1", expected=("n1", "n2"),
                   errors=["2026-12-02T10:49:33 site config problem: x", "prolog reading: OSError: gone"])
    b = job_record("80", node="n2", expected=("n1", "n2"),
                   errors=["2026-12-02T10:49:36 site config problem: x", "sampler: killed"])
    assert merge_records([a, b]).errors == ["2026-12-02T10:49:33 site config problem: x",
                                            "prolog reading: OSError: gone", "sampler: killed"]
    # a message that only contains a time stamp further in is not shortened into another one
    assert combine_errors(["x 2026-12-02T10:49:33 y"], ["x y"]) == ["x 2026-12-02T10:49:33 y", "x y"]


def test_a_yaml_problem_is_one_line_on_the_record_without_pyyamls_snippet(tmp_path):
    """site.yaml indented with a tab: the check-config message has PyYAML's lines (its snippet and
    ``^``); a record's error is one line (a tester saw ``\\n`` escapes on the record), and still
    names the file, the line and column, and the fix."""
    from slurm_energy.config.lenient import load_site_config_lenient
    from slurm_energy.slurm.config_cache import problem_lines

    p = tmp_path / "site.yaml"
    p.write_text("cluster_name: c1\nsampling:\n\tinterval_s: 5\n")
    _cfg, problems = load_site_config_lenient(str(p))
    assert "\n" in problems[0] and "    ^" in problems[0]
    (line,) = problem_lines(problems[:1])
    assert "\n" not in line and "^" not in line and "\tinterval_s" not in line
    assert line.startswith(f"site config problem: {p}: not valid YAML: while scanning for the next token; ")
    assert f'in "{p}", line 3, column 1:' in line
    assert f"{p}: line 3, column 1: a tab character: YAML indents with spaces only. Fix: replace the tab(s)" in line

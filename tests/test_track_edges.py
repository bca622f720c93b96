"""Issue 28 for ``track()`` outside Slurm: how a run ended is on its record (exception, Ctrl-C,
SIGTERM, an uncaught exception with no ``stop()``); ``result()`` from the first second, a short
repr and an HTML one; no report overwritten unasked; a read-only working directory; carbon facts
as arguments. Scripts that a researcher would run are run as an ordinary user
(tests/helpers/ordinary_user.py)."""

from __future__ import annotations

import csv
import io
import os
import signal
import time
import warnings

import pytest

from slurm_energy import track
from slurm_energy.carbon.tables import lookup_country
from tests.helpers import ordinary_user as ou


def _busy(s):
    t = time.time() + s
    while time.time() < t:
        pass


def _status(d, label):
    return {r["status"] for r in csv.DictReader(io.StringIO((d / f"energy-{label}.csv").read_text()))}


# ------------------------------------------------------------------------- runs that end badly


def test_an_exception_in_the_block_makes_a_partial_record_and_report(outside_slurm):
    with pytest.raises(ValueError, match="diverged"), track(label="boom", out=str(outside_slurm), interval_s=0.1) as t:
        _busy(0.3)
        raise ValueError("loss diverged")
    rec = t.record
    assert rec.status.value == "partial" and rec.status_text == "partial"
    assert rec.exit_code == "1" and rec.job_state == "FAILED"
    assert any("run ended early: the run raised ValueError: loss diverged" in e for e in rec.errors)
    assert _status(outside_slurm, "boom") == {"partial"}
    assert rec.it_kwh > 0  # measured up to the exception
    assert not os.path.exists(t.sampler.dir)  # report written: the samples' temp dir removed


def test_a_decorated_function_that_raises_keyboardinterrupt_is_recorded_as_interrupted(outside_slurm):
    seen = []

    @track(label="dec", out=str(outside_slurm), interval_s=0.1, report=False)
    def train():
        from slurm_energy.api import current

        seen.append(current())
        _busy(0.2)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train()
    rec = seen[0].record
    assert rec.status_text == "partial" and rec.exit_code == "0:2" and rec.job_state == "CANCELLED"
    assert "KeyboardInterrupt: Ctrl-C or SIGINT" in rec.errors[0]


def test_a_clean_block_and_sys_exit_0_stay_complete(outside_slurm):
    with pytest.raises(SystemExit), track(label="ok", out=str(outside_slurm), interval_s=0.1, report=False) as t:
        _busy(0.2)
        raise SystemExit(0)
    assert t.record.status.value == "complete" and t.record.exit_code == "0" and t.record.errors == []


SIGTERM_SCRIPT = '''
import time
from slurm_energy import track
with track(label="term", interval_s=0.1) as t:
    print("IN-BLOCK", flush=True)
    time.sleep(120)
'''

NO_STOP_SCRIPT = '''
import time
from slurm_energy import track
t = track(label="nostop", interval_s=0.1).start()
time.sleep(0.3)
raise RuntimeError("out of memory, say")
'''


def test_sigterm_to_a_script_in_a_block_writes_a_partial_report(home):
    script = ou.write(home, "s.py", SIGTERM_SCRIPT)
    p = ou.popen([ou.PY, str(script)], home)
    try:
        assert "IN-BLOCK" in p.stdout.readline()
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + 15, err
    assert _status(home, "term") == {"partial"}
    html = (home / "energy-term.html").read_text()
    assert "the run was stopped by SIGTERM" in html and "exit code 0:15" in html
    assert list((home / "tmp").glob("slurm-energy-*")) == []


def test_an_uncaught_exception_without_stop_is_recorded_at_exit(home):
    script = ou.write(home, "s.py", NO_STOP_SCRIPT)
    r = ou.run([ou.PY, str(script)], home)
    assert r.returncode == 1 and "out of memory, say" in r.stderr
    assert _status(home, "nostop") == {"partial"}
    assert "the run raised RuntimeError: out of memory, say" in (home / "energy-nostop.html").read_text()
    assert list((home / "tmp").glob("slurm-energy-*")) == []


# -------------------------------------------------------------------------------- API edges


def test_result_in_the_first_interval_covers_the_run_up_to_the_call(outside_slurm):
    with track(label="early", out=str(outside_slurm), interval_s=5.0, report=False) as t:
        _busy(0.4)
        t0 = time.monotonic()
        r = t.result()  # 0.4 s into a 5 s interval: a row is taken now
        asked_s = time.monotonic() - t0
        assert r.final is False and r.it_kwh is not None and r.it_kwh > 0
        assert r.note == "energy from the start up to this call"
        assert 0.3 <= r.elapsed_s <= 0.4 + asked_s + 0.2
        assert r.classes["cpu"].method == "tdp_estimate" and r.classes["cpu"].coverage > 0.5
        assert r.covers == f"process {os.getpid()} and its children"
        text = repr(r)
        assert text.startswith("<slurm_energy.Result so far, ") and len(text) < 400 and "kWh" in text
        assert "PUE 1.58 DEFAULT" in text and "cpu " in text and "tdp_estimate" in text
        html = r._repr_html_()
        assert "<table>" in html and "<td>cpu</td>" in html and "measures: process" in html
    assert repr(t.result()).startswith("<slurm_energy.Result final, ")
    assert repr(t) == "<slurm_energy.Tracker 'early' local stopped>"


def test_an_existing_report_is_never_overwritten_unasked(outside_slurm):
    out = outside_slurm / "out"
    out.mkdir()
    (out / "energy-same.html").write_text("the first run's report")
    with pytest.raises(FileExistsError, match=r"energy-same.html exists .*pass overwrite=True"):
        track(label="same", out=str(out)).start()
    from slurm_energy.api import current

    assert current() is None  # nothing left active, no sampler started
    assert (out / "energy-same.html").read_text() == "the first run's report"
    with track(label="same", out=str(out), interval_s=0.1, overwrite=True):
        _busy(0.2)
    assert "the first run's report" not in (out / "energy-same.html").read_text()


def test_overwrite_removes_the_earlier_runs_phases_and_prediction_csv(outside_slurm):
    """A label's files describe one run: the first run marked a phase and declared 1e18 FLOPs (its
    ``.phases.csv`` and ``.prediction.csv``); the overwriting run did neither, so neither file stays
    (a fresh tester found the first run's phase and FLOPs under the new report)."""
    out = outside_slurm / "out"
    out.mkdir()
    with track(label="ow", out=str(out), interval_s=0.1) as t:
        t.tag(flops=1e18)
        with t.phase("old-phase"):
            _busy(0.2)
    first = sorted(p.name for p in out.iterdir())
    assert first == ["energy-ow.csv", "energy-ow.html", "energy-ow.phases.csv", "energy-ow.prediction.csv"]
    assert "old-phase" in (out / "energy-ow.phases.csv").read_text()
    with track(label="ow", out=str(out), interval_s=0.1, overwrite=True):
        _busy(0.2)
    assert sorted(p.name for p in out.iterdir()) == ["energy-ow.csv", "energy-ow.html"]
    assert "old-phase" not in (out / "energy-ow.html").read_text()


def test_default_labels_differ_between_runs():
    from slurm_energy.api import default_label

    a = default_label("hf-train")
    assert a.startswith("hf-train-") and a.endswith(f"-{os.getpid()}") and len(a.split("-")) == 4


READ_ONLY_SCRIPT = '''
import warnings
from slurm_energy import track
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    with track(label="ro", interval_s=0.1) as t:
        x = sum(range(2_000_000))
print("WARN", " | ".join(str(m.message) for m in w))
print("KEPT", t.samples_kept)
print("STATUS", t.record.status_text)
'''


def test_read_only_working_directory_says_so_suggests_out_and_keeps_the_samples(home):
    work = home / "ro"
    work.mkdir()
    script = ou.write(home, "s.py", READ_ONLY_SCRIPT)
    u = ou.ordinary_user()
    if u is not None:
        os.chown(work, u[1], u[2])
    os.chmod(work, 0o555)
    r = ou.run([ou.PY, str(script)], work, home=home)
    assert r.returncode == 0, r.stderr
    warn = r.stdout.split("WARN ", 1)[1].splitlines()[0]
    assert f"{work} is not a writable directory" in warn and "pass out='" in warn
    kept = r.stdout.split("KEPT ", 1)[1].splitlines()[0]
    assert kept.startswith(str(home / "tmp" / "slurm-energy-"))
    assert os.path.getsize(os.path.join(kept, "samples.jsonl")) > 0
    assert f"samples kept in {kept}/samples.jsonl" in r.stderr
    assert os.listdir(work) == []


# ------------------------------------------------------------------ carbon facts as arguments


def test_carbon_facts_as_arguments_override_site_yaml(outside_slurm):
    (outside_slurm / "site.yaml").write_text(
        f"cluster_name: t\npue: 1.3\nlocation:\n  country: DE\nhardware:\n  rapl_root: {outside_slurm}/none\n")
    with track(label="fr", out=str(outside_slurm), interval_s=0.1, report=False, pue=1.0, country="FR") as t:
        _busy(0.2)
    c = t.record.carbon
    fr = lookup_country("FR")
    assert c.pue == 1.0 and c.pue_source == "datacenter given: track() pue=1"
    assert c.ci_g_per_kwh == fr.g_per_kwh and "country FR" in c.ci_source and c.defaults_used == ["alpha"]
    # CO2e = IT kWh x PUE x CI (g/kWh) x alpha / 1000
    assert t.record.co2e_kg == pytest.approx(t.record.it_kwh * 1.0 * fr.g_per_kwh / 1000, rel=1e-9)
    with track(label="ci", out=str(outside_slurm), interval_s=0.1, report=False, ci=56, alpha=0.5) as t2:
        _busy(0.2)
    c2 = t2.record.carbon
    assert c2.pue == 1.3 and c2.pue_source == "site config: pue"  # not given: site.yaml's
    assert c2.ci_g_per_kwh == 56 and c2.alpha == 0.5
    assert t2.record.co2e_kg == pytest.approx(t2.record.it_kwh * 1.3 * 56 * 0.5 / 1000, rel=1e-9)


def test_bad_carbon_argument_is_an_error_naming_it(outside_slurm):
    with pytest.raises(ValueError, match=r"track\(\): pue=0.9: .*a PUE is facility / IT energy, 1.0"):
        track(label="x", pue=0.9).start()
    with pytest.raises(ValueError, match=r"track\(\): country='XX': is not a country"):  # the value given, named
        track(label="x", country="XX").start()
    with pytest.raises(ValueError, match=r"track\(\): country='France': must be an ISO 3166 country code"):
        track(label="x", country="France").start()


def test_without_any_facts_the_defaults_are_said_prominently(outside_slurm, capsys):
    with warnings.catch_warnings(), track(label="dflt", out=str(outside_slurm), interval_s=0.1) as t:
        _busy(0.2)
    err = capsys.readouterr().err
    assert "PUE 1.58 is the DEFAULT datacenter industry average" in err and "give track(pue=1.0)" in err
    assert "475 gCO2e/kWh is the DEFAULT world average" in err and "track(country='FR')" in err
    assert t.record.carbon.defaults_used == ["pue", "alpha", "ci"]
    assert "(default)" in (outside_slurm / "energy-dflt.html").read_text()


# --------------------------------------- srun -n without the hooks: the job's tasks by environment

TASK = '''
import json, os, sys, time
from slurm_energy import track
rank = int(os.environ["SLURM_LOCALID"])


def spin(s):
    c0 = time.process_time()
    while time.process_time() - c0 < s:
        pass
    return time.process_time() - c0


with track(label="srun", interval_s=0.1) as t:
    if rank == 0:
        open("go", "w").close()              # rank 1 spins only while rank 0 measures
        cpu = spin(1.0)
        while not os.path.exists("done-1"):
            time.sleep(0.02)
    else:
        while not os.path.exists("go"):
            time.sleep(0.02)
        cpu = spin(1.0)
        open("done-1", "w").close()
json.dump({"cpu_s": cpu, "mode": t.mode, "covers": t.covers,
           "record_cpu_s": t.record.nodes[0].cpu_time_s if t.record is not None else None},
          open(f"cpu-{rank}.json", "w"))
'''


def test_srun_tasks_without_the_hooks_are_measured_once_by_local_rank_0(home):
    """Two tasks of one step, as srun starts them (siblings, not one's children), sharing the job's
    SLURM_JOB_ID: local rank 0's record has both tasks' CPU time, once."""
    import json
    import random

    script = ou.write(home, "task.py", TASK)
    job = str(random.randint(10**8, 10**9))  # a job id no other process on this machine carries
    env = dict(SLURM_JOB_ID=job, SLURM_STEP_ID="0", SLURM_ENERGY_MARKS_DIR=str(home / "no-marks"))
    ps = [ou.popen([ou.PY, str(script)], home, SLURM_LOCALID=str(i), **env) for i in (0, 1)]
    for p in ps:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    r0, r1 = (json.loads((home / f"cpu-{i}.json").read_text()) for i in (0, 1))
    assert r0["mode"] == "local" and r1["mode"] == "noop"
    assert r0["covers"] == f"Slurm job {job}'s processes on this node (SLURM_JOB_ID={job} in their environment)"
    both = r0["cpu_s"] + r1["cpu_s"]  # about 2 CPU-s
    assert 0.85 * both <= r0["record_cpu_s"] <= both + 0.6, (r0, r1)


KILLED_SCRIPT = '''
import time
from slurm_energy import track
with track(label="killed", interval_s=0.1) as t:
    with t.phase("epoch 0"):
        print("IN-BLOCK", flush=True)
        time.sleep(120)
'''


def test_a_sigkilled_script_still_gets_its_partial_report(home):
    """SIGKILL (the OOM killer's signal) leaves the process no chance: its child sampler sees it
    gone without a stop and finishes the measurement itself (report, samples removed)."""
    script = ou.write(home, "s.py", KILLED_SCRIPT)
    p = ou.popen([ou.PY, str(script)], home)
    try:
        assert "IN-BLOCK" in p.stdout.readline()
        time.sleep(0.5)
        p.kill()
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
    deadline = time.time() + 60
    while not (home / "energy-killed.csv").exists() or list((home / "tmp").glob("slurm-energy-*")):
        assert time.time() < deadline, f"no report 60 s after the kill: {os.listdir(home)}"
        time.sleep(0.2)
    assert _status(home, "killed") == {"partial"}
    html = (home / "energy-killed.html").read_text()
    assert "the measured process ended without stopping the measurement (killed by SIGKILL" in html
    assert ",phase,epoch 0," in (home / "energy-killed.phases.csv").read_text()  # its marks kept

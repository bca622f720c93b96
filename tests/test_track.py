"""``slurm_energy.track``: local sampler outside Slurm, marks only inside a sampled job, no-op ranks."""

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from slurm_energy.api import local_rank, slurm_marks_path, track

REPO = Path(__file__).resolve().parents[1]


def _busy(s):
    t = time.time() + s
    while time.time() < t:
        pass


def _sampler_threads():
    """Running samplers of this process: child processes ``python -m slurm_energy.sampling.local``
    (track) and sampler threads (run/attach)."""
    import psutil

    kids = []
    for c in psutil.Process().children():
        try:
            if "slurm_energy.sampling.local" in c.cmdline() and c.status() != psutil.STATUS_ZOMBIE:
                kids.append(c.pid)
        except psutil.Error:
            pass
    return kids + [t for t in threading.enumerate() if t.name == "slurm-energy-sampler"]


def test_light_import():
    code = "import sys, slurm_energy; from slurm_energy import track; " \
           "print(sorted(m for m in ('pydantic', 'sqlalchemy', 'matplotlib', 'pandas', 'psutil') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_the_result_its_repr_names_is_importable_from_the_package():
    # `t.result()` prints <slurm_energy.Result ...>; a fresh tester's `from slurm_energy import Result` failed
    from slurm_energy import Result
    from slurm_energy.reporting.result import Result as TheResult

    assert Result is TheResult
    assert repr(Result(final=False, source="x", note="not measured here")).startswith("<slurm_energy.Result ")


def test_local_rank_precedence():
    assert local_rank({}) == 0
    assert local_rank({"SLURM_LOCALID": "2"}) == 2
    assert local_rank({"SLURM_LOCALID": "0", "LOCAL_RANK": "3"}) == 3  # torchrun inside a batch step
    assert local_rank({"LOCAL_RANK": "x"}) == 0


def test_outside_slurm_runs_the_sampler_and_writes_the_report(outside_slurm):
    out = outside_slurm / "out"
    out.mkdir()
    with track(label="unit", out=str(out), interval_s=0.2) as t:
        assert t.mode == "local" and len(_sampler_threads()) == 1
        t.tag(model_params=1200, tokens=3e6, flops=2.5e12)
        with t.phase("warmup"):
            _busy(0.3)
        for e in range(2):
            with t.phase(f"epoch {e}"):
                _busy(0.5)
            t.stage((e + 1) / 2)
        so_far = t.result()
        assert so_far.final is False and so_far.source == "local sampler" and so_far.it_kwh > 0
    assert not _sampler_threads()
    r = t.result()
    rec = r.record
    assert r.final and rec.job_id == "unit" and rec.tags == {"model_params": 1200, "tokens": 3e6, "flops": 2.5e12}
    assert [p.name for p in rec.phases] == ["warmup", "epoch 0", "epoch 1"]
    assert [s.fraction for s in rec.stages] == [0.5, 1.0]
    assert r.classes["cpu"].method == "tdp_estimate" and 0.5 < r.classes["cpu"].coverage <= 1.0
    totals = {w.kind: w.it_j for w in rec.phase_totals}
    assert totals["in_phases"] + totals["outside"] == pytest.approx(rec.it_kwh * 3.6e6, rel=1e-6)
    assert sum(p.it_j for p in rec.phases) <= rec.it_kwh * 3.6e6
    assert rec.stages[-1].it_j >= rec.stages[0].it_j
    html = (out / "energy-unit.html").read_text()
    assert "epoch 1" in html and "Phases" in html
    assert (out / "energy-unit.csv").exists()


def test_bad_input_warns_and_the_record_survives(outside_slurm):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with track(label="bad", out=str(outside_slurm), interval_s=0.2, report=False) as t:
            t.stage(1.7)
            t.stage("half")
            t.tag(flops="a lot", precision="bf16")
            t.phase("left open")
            _busy(0.2)
    msgs = " | ".join(str(x.message) for x in w)
    assert "stage(1.7) ignored" in msgs and "stage('half') ignored" in msgs
    assert "tag flops='a lot' ignored" in msgs and "never closed" in msgs and "'left open'" in msgs
    (p,) = t.record.phases
    assert p.name == "left open" and "never_closed" in p.flags and t.record.stages == []
    assert t.record.tags == {"precision": "bf16"}


def test_decorator_and_nested_track_share_one_sampler(outside_slurm):
    seen = []

    @track(label="inner")
    def step():
        seen.append(len(_sampler_threads()))
        _busy(0.1)

    with track(label="outer", out=str(outside_slurm), interval_s=0.2, report=False) as t:
        step()
        step()
    assert seen == [1, 1]  # the decorated function became a phase of the outer measurement
    assert [p.name for p in t.record.phases] == ["inner", "inner"]


def test_other_ranks_are_cheap_no_ops(outside_slurm, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    before = set(os.listdir(outside_slurm))
    with track(label="r1", out=str(outside_slurm)) as t:
        with t.phase("epoch 0"):
            t.stage(0.5)
        t.tag(flops=1.0)
        assert t.mode == "noop" and not _sampler_threads()
    assert t.result().source == "other rank" and t.record is None
    assert set(os.listdir(outside_slurm)) == before  # no report, no files


def test_inside_a_sampled_slurm_job_only_marks_are_written(outside_slurm, monkeypatch):
    root = outside_slurm / "marks"
    (root / "555").mkdir(parents=True)
    monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(root))
    monkeypatch.setenv("SLURM_JOB_ID", "555")
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    monkeypatch.setenv("SLURM_LOCALID", "0")
    assert slurm_marks_path() == str(root / "555" / "marks-n7.jsonl")
    with track(label="bert-small", out=str(outside_slurm)) as t:
        assert t.mode == "slurm" and not _sampler_threads()
        with t.phase("epoch 0"):
            pass
        t.stage(1.0)
        t.tag(tokens=10)
    ev = [json.loads(x) for x in (root / "555" / "marks-n7.jsonl").read_text().splitlines()]
    # the labelled block is a phase of the job's record (what `jobenergy --label bert-small` selects)
    assert [e["ev"] for e in ev] == ["begin", "begin", "end", "stage", "tag", "end"]
    assert ev[0]["name"] == "bert-small" and ev[0]["id"] == ev[5]["id"]
    assert ev[1]["name"] == "epoch 0" and ev[1]["id"] == ev[2]["id"] and ev[3]["frac"] == 1.0
    assert ev[4]["tags"] == {"tokens": 10}
    assert t.record is None and not list(outside_slurm.glob("energy-*"))
    # without a label, no block phase: only what the script marks
    (root / "555" / "marks-n7.jsonl").unlink()
    with track(out=str(outside_slurm)) as t:
        t.stage(0.5)
    ev = [json.loads(x) for x in (root / "555" / "marks-n7.jsonl").read_text().splitlines()]
    assert [e["ev"] for e in ev] == ["stage"]


def test_carbon_facts_given_to_track_inside_a_sampled_slurm_job_are_said_not_to_be_used(outside_slurm, monkeypatch,
                                                                                         capsys):
    """Inside a Slurm job the record is the site's accounting: track(pue=1.0, country="SE") cannot
    change it, and the script's stderr says so (a tester's researcher believed PUE 1.0 applied)."""
    root = outside_slurm / "marks"
    (root / "558").mkdir(parents=True)
    for k, v in {"SLURM_ENERGY_MARKS_DIR": str(root), "SLURM_JOB_ID": "558", "SLURMD_NODENAME": "n7",
                 "SLURM_LOCALID": "0"}.items():
        monkeypatch.setenv(k, v)
    with track(label="pue-override", out=str(outside_slurm), pue=1.0, country="SE") as t:
        assert t.mode == "slurm"
    err = capsys.readouterr().err
    assert ("slurm-energy: track(country='SE', pue=1.0) inside a Slurm job: not used; the carbon facts are the "
            "site config's (the job's record is the site's accounting)") in err
    with track(label="plain", out=str(outside_slurm)):
        pass
    assert "not used" not in capsys.readouterr().err  # nothing given, nothing said


def test_slurm_job_without_the_hooks_measures_locally(outside_slurm, monkeypatch):
    monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(outside_slurm / "none"))
    monkeypatch.setenv("SLURM_JOB_ID", "556")
    assert slurm_marks_path() is None
    with track(label="x", out=str(outside_slurm), interval_s=0.2, report=False) as t:
        assert t.mode == "local"


def test_demo_training_script_outside_slurm_gets_the_same_report(outside_slurm):
    """examples/train_digits.py run directly: the report the Slurm job gets (phases, stages, plot
    bands), written by the local sampler into the current directory."""
    pytest.importorskip("sklearn")
    env = dict(os.environ, TRAIN_SECONDS="2", EPOCHS="2", SAMPLE_SECONDS="0.25", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, str(REPO / "examples" / "train_digits.py")], cwd=outside_slurm, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "test_accuracy=" in out.stdout and "slurm-energy: report" in out.stderr
    rows = (outside_slurm / "energy-train-digits.phases.csv").read_text().splitlines()
    names = [r.split(",")[1:3] for r in rows[1:]]
    assert names == [["phase", "load data"], ["phase", "epoch 0"], ["phase", "epoch 1"], ["phase", "evaluate"],
                     ["in_phases", "all phases (nested counted once)"], ["outside", "outside any phase"],
                     ["stage", "50%"], ["stage", "100%"]]
    html = (outside_slurm / "energy-train-digits.html").read_text()
    assert "Phases and stages" in html and "Shaded bands: the outermost phases" in html
    assert (outside_slurm / "energy-train-digits.csv").exists()


def test_child_sampler_ends_when_the_training_process_dies(outside_slurm):
    """A training script killed without leaving its block: its sampler process ends by itself."""
    import psutil

    code = ("import os, sys\nfrom slurm_energy import track\nt = track(label='k', interval_s=0.1).start()\n"
            "print(t.sampler.pid, flush=True)\nos._exit(3)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=outside_slurm, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 3, out.stderr
    pid = int(out.stdout.strip())
    for _ in range(100):
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"sampler {pid} still running 10 s after the training process died")


def test_result_inside_a_sampled_job_reads_the_jobs_record_so_far(outside_slurm, monkeypatch):
    """In a job the node's sampler measures, t.result() is the job's latest (interim) record from the
    store: 0.5 kWh of CPU so far, status running -> not final; no store readable -> 'unavailable'."""
    from slurm_energy.model import JobRecord, Method, Status
    from slurm_energy.store import open_store

    root = outside_slurm / "marks"
    (root / "557").mkdir(parents=True)
    for k, v in {"SLURM_ENERGY_MARKS_DIR": str(root), "SLURM_JOB_ID": "557", "SLURMD_NODENAME": "n1"}.items():
        monkeypatch.setenv(k, v)
    with track() as t:
        r = t.result()
        assert r.source == "unavailable" and "jobenergy 557" in r.note and r.it_kwh is None
        url = f"sqlite:///{outside_slurm}/jobs.db"
        (outside_slurm / "site.yaml").write_text(f"cluster_name: t\npaths:\n  store_url: {url}\n")
        st = open_store(url)
        st.put(JobRecord(cluster="t", job_id="557", start_time=1e9, end_time=1e9 + 3600, status=Status.RUNNING,
                         energy_it_j={"cpu": 1.8e6}, methods={"cpu": Method.COUNTER}, it_kwh=0.5, facility_kwh=0.75,
                         co2e_kg=0.3))
        st.close()
        r = t.result()
    assert r.source == "slurm store" and r.final is False and r.it_kwh == 0.5 and r.co2e_kg == 0.3
    assert r.classes["cpu"].energy_kwh == pytest.approx(0.5) and r.classes["cpu"].method == "counter"


def test_result_cite_of_a_local_track_and_its_phase(outside_slurm, monkeypatch):
    """track().result().cite(): the citation of this measurement, and of one phase only."""
    monkeypatch.chdir(outside_slurm)
    with track(label="cite-me", interval_s=0.2) as t, t.phase("fine-tuning"):
        _busy(0.6)
    r = t.result()
    line = r.cite(fmt="line")
    assert line.startswith("slurm-energy ") and "run cite-me" in line and "Slurm" not in line
    card = r.cite(phase="fine-tuning", fmt="modelcard")
    assert "training_type: fine-tuning" in card and "emissions:" in card
    with pytest.raises(ValueError, match="no selected job marked a phase or stage of that name"):
        r.cite(phase="pretraining")


def test_a_report_that_cannot_be_written_is_recorded_on_the_job(outside_slurm, monkeypatch):
    """track() writes its report through the report sink (pipeline.publish), so a failure is in
    the record's errors and report_error, as for a Slurm job, and the samples are kept."""
    from slurm_energy.reporting import report

    def broken(rec, out_dir, uid, gid, umask=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "write_reports", broken)
    with track("full", out=str(outside_slurm), interval_s=0.2) as t:
        _busy(0.3)
    assert t.record.errors == ["report not written: [Errno 28] No space left on device"]
    assert "No space left on device" in t.record.report_error and "jobenergy -l full" in t.record.report_error
    assert t.report_paths == () and os.path.exists(os.path.join(t.samples_kept, "samples.jsonl"))
    import shutil

    shutil.rmtree(t.samples_kept, ignore_errors=True)

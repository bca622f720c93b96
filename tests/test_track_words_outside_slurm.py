"""Words that fit where it ran: a laptop report says "run", not job/Account/Partition/"cgroup CPU
time"/"site config"; result() before any interval says so; result() inside the block is not
charged to the run."""

from __future__ import annotations

import html
import re
import time

from slurm_energy import track
from slurm_energy.api import Result
from slurm_energy.model import Method
from tests.helpers.jobrecord_factory import device, finished, job_record


def _text(page):
    page = re.sub(r"<style>.*?</style>|<svg.*?</svg>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_laptop_report_speaks_of_a_run_without_slurm_words(outside_slurm):
    with track(label="laptop", out=str(outside_slurm), interval_s=0.2, pue=1.0, ci=56.0):
        t = time.time() + 0.5
        while time.time() < t:
            pass
    text = _text((outside_slurm / "energy-laptop.html").read_text())
    assert "Energy and carbon report — run laptop" in text and " Run Label laptop " in text
    for word in ("Account", "Partition", "cgroup CPU time", "site config", "Job id", "job laptop"):
        assert word not in text, word
    assert "the process tree's share by its CPU time / node busy CPU time" in text
    assert "0.3725 W/GB (Green Algorithms 0.3725 W/GB)" in text  # the default, not a site's setting


def test_a_slurm_job_report_keeps_its_job_words():
    from slurm_energy.reporting.report import render_html

    rec = finished(job_record(devices=[device("cpu", 3600.0)], node_fields={"cpu_time_source": "cgroup-v2"}))
    text = _text(render_html(rec))
    assert "Energy and carbon report — job 100" in text and "Account physics" in text and "Partition batch" in text


def test_result_with_a_record_and_nothing_measured_yet_says_why():
    rec = finished(job_record(devices=[device("cpu", None, method=Method.UNAVAILABLE)], start=0.0, end=0.02))
    r = Result.from_record(rec, False, "local sampler", "energy from the start up to this call")
    assert repr(r) == ("<slurm_energy.Result so far, 0.02 s: no energy: no sampling interval measured yet "
                       "(each device needs two readings)>")
    assert "energy from the start up to this call" not in repr(r)


def test_result_calls_inside_the_block_are_not_charged_to_the_run(outside_slurm):
    # the block only sleeps; each t.result() summarises the samples in this process (its CPU-s are
    # counted with time.thread_time and subtracted by the sampler's probe): the run's CPU time stays
    # what the sleeping block used, 0 CPU-s give or take a 10 ms tick per look, not the results' cost
    with track(label="asks", out=str(outside_slurm), interval_s=0.2, pue=1.0, ci=56.0) as t:
        for _ in range(40):
            t.result()
        time.sleep(0.3)
        overhead = t.sampler.overhead_s
    rec = t.record
    assert overhead > 0.1  # what the 40 summaries cost, CPU-s
    # without the subtraction the run's CPU time is >= the overhead; with it what remains is the
    # sleeping block's 0 and the rounding of the two 10 ms-tick reads per call (unbiased, a few ticks
    # in all): well under half the overhead
    assert rec.nodes[0].cpu_time_s < 0.5 * overhead

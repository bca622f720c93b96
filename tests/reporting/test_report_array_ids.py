"""The report of an array task or het job component is named and keyed by the id Slurm users know
(``<array job id>_<task id>``, ``<het job id>+<offset>``, as squeue/sacct print it and sbatch's
``%A_%a`` writes it), not by the task's own SLURM_JOB_ID; the CSV keeps that raw id beside it."""

from __future__ import annotations

import csv
import io
import json
import os

from slurm_energy.config import SiteConfig
from slurm_energy.outputs.report import ReportSink
from slurm_energy.pipeline import finalise_job
from slurm_energy.reporting import report
from slurm_energy.reporting.report import render_csv, render_prediction_csv
from slurm_energy.slurm.context import JobContext
from slurm_energy.slurm.jobend import node_record as jobend_node
from tests.helpers.report_records import sample_record
from tests.helpers.samplefile_rows import node_rows, spool_with_rows


def _ids(text: str) -> list[tuple[str, str, str]]:
    return [(r["device_class"], r["job_id"], r["job_id_raw"]) for r in csv.DictReader(io.StringIO(text))]


def test_array_task_report_files_and_csv_use_array_job_id_underscore_task():
    rec = sample_record()  # job id 4242
    rec.array_job_id, rec.array_task_id = "4240", "2"  # task 2 of array 4240: squeue shows 4240_2
    assert report.report_names(rec) == ("energy-4240_2.html", "energy-4240_2.csv")
    assert report.phases_csv_name(rec) == "energy-4240_2.phases.csv"
    assert report.prediction_csv_name(rec) == "energy-4240_2.prediction.csv"
    assert _ids(render_csv(rec)) == [("cpu", "4240_2", "4242"), ("gpu", "4240_2", "4242"),
                                     ("ram", "4240_2", "4242"), ("total", "4240_2", "4242")]


def test_het_component_report_uses_het_job_id_plus_offset():
    rec = sample_record()
    rec.job_id, rec.het_job_id, rec.het_job_offset = "1236", "1234", "1"  # component 1 of het job 1234
    assert report.report_names(rec) == ("energy-1234+1.html", "energy-1234+1.csv")
    assert _ids(render_csv(rec))[-1] == ("total", "1234+1", "1236")


def test_plain_job_keeps_its_id_in_both_columns():
    rec = sample_record()
    assert report.report_names(rec) == ("energy-4242.html", "energy-4242.csv")
    assert _ids(render_csv(rec))[-1] == ("total", "4242", "4242")
    assert ",status,pue_default,ci_default,job_id_raw," in render_csv(rec).splitlines()[0]


def test_prediction_csv_rows_carry_the_array_task_id():
    rec = sample_record()
    rec.array_job_id, rec.array_task_id = "4240", "2"
    rec.tags = {"flops": 1.5e18}
    rows = list(csv.reader(io.StringIO(render_prediction_csv(rec))))
    assert rows[1:] and {r[0] for r in rows[1:]} == {"4240_2"}


def test_finalizer_names_an_array_tasks_report_from_slurmctld_never_from_the_jobs_environment(tmp_path):
    """Slurm 22.05 tells the Prolog no array ids. The job's processes' environment is its user's to
    set (``export SLURM_ARRAY_JOB_ID=20``): what the sampler saw there (jobenv-<node>.json) is not
    the job's identity (issue 22). slurmctld's facts (scontrol show job) are: task 3 of array 20,
    whose own job id is 27, -> energy-20_3.*; without them, energy-27.*."""
    rows, static = node_rows(13)
    spool = spool_with_rows(str(tmp_path / "spool"), "27", "n1", static, rows)
    with open(spool.jobenv, "w") as f:
        json.dump({"array_job_id": "20", "array_task_id": "3"}, f)  # an old sampler's file, or a lie
    ctx = JobContext(job_id="27", uid=os.getuid(), gid=os.getgid(), node="n1", nodelist="n1",
                     prolog_time=rows[0]["t"], cpus_per_node="64", work_dir=str(tmp_path / "work"))
    os.mkdir(tmp_path / "work")
    cfg = SiteConfig()
    rec = finalise_job([jobend_node.node_record(cfg, spool, ctx, rows[-1]["t"])], cfg)
    assert (rec.array_job_id, rec.array_task_id) == (None, None)
    rec = finalise_job([jobend_node.node_record(cfg, spool, ctx, rows[-1]["t"],
                                             slurm_facts={"array_job_id": "20", "array_task_id": "3"})], cfg)
    assert ReportSink(uid=os.getuid(), gid=os.getgid()).publish(rec) == []  # (a record of uid 0: root writes none)
    assert sorted(os.listdir(tmp_path / "work")) == ["energy-20_3.csv", "energy-20_3.html"]
    text = (tmp_path / "work" / "energy-20_3.csv").read_text()
    assert {(job, raw) for _, job, raw in _ids(text)} == {("20_3", "27")}

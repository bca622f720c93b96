"""Issue 14 on the real test cluster: one real job's energy through Prometheus (PromQL over the HTTP
API, node_exporter reading the textfile), in ``sacct -o AdminComment`` (slurmdbd), ``jobenergy --seff``
and the month's HTML report, and the write-back's bad-input paths against the cluster's real Slurm
commands (run for the cluster's version through ``cluster.run``)."""

from __future__ import annotations

import os
import time

import pytest

from slurm_energy.outputs.slurm_writeback import PREFIX, SlurmWriteback, summary_text

pytestmark = pytest.mark.slurm

JOB = """#!/bin/bash
#SBATCH --job-name=outputs
#SBATCH --output=slurm-%j.out
#SBATCH --cpus-per-task=1
#SBATCH --mem=200M
/opt/slurm-energy/venv/bin/python -c '
import time
t0 = time.time()
while time.time() - t0 < 8:
    sum(i * i for i in range(10000))'
"""


@pytest.fixture(scope="module")
def finished_job(cluster):
    wd = cluster.workdir("alice", f"e2e-outputs-{os.getpid()}")
    job = cluster.sbatch("alice", wd, JOB)
    (rec,) = cluster.wait_record(job)
    return job, rec, wd


def _sacct_admin_comment(cluster, job: str) -> str:
    out = cluster.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "AdminComment"], check=True)
    return out.stdout.strip()


def _writeback(cluster, **kw) -> SlurmWriteback:
    """The write-back sink with the cluster's own scontrol/sacct/sacctmgr (its Slurm version)."""
    def run(argv, timeout_s=15.0):
        r = cluster.run(argv, timeout=timeout_s + 30)
        return r.returncode, (r.stdout + r.stderr).strip()

    return SlurmWriteback(run=run, **kw)


def _version(cluster) -> tuple:
    return tuple(int(x) for x in cluster.version.split(".")[:2])


def test_job_energy_through_prometheus_promql(cluster, prom_stack, finished_job):
    job, rec, _ = finished_job
    want_j = sum(v for v in rec.energy_it_j.values() if v is not None)
    assert want_j > 0
    q = f'sum by (job_id) (slurm_energy_job_joules_total{{job_id="{job}",cluster="lab"}})'
    res: list = []
    t0 = time.time()
    # while the job ran, node_exporter exported its energy so far (interim); the final total follows
    # the store write within a scrape or two
    while time.time() - t0 < 30 and not (res and float(res[0]["value"][1]) == pytest.approx(want_j, rel=1e-9)):
        time.sleep(1)
        res = prom_stack.query(q)
    assert res, f"PromQL {q} returned nothing; textfile: {open(cluster.base / 'textfile' / 'slurm_energy.prom').read()}"
    assert float(res[0]["value"][1]) == pytest.approx(want_j, rel=1e-9)
    # per class with its method label (no RAPL here: the labelled TDP model)
    by_cls = {r["metric"]["device_class"]: (float(r["value"][1]), r["metric"]["method"])
              for r in prom_stack.query(f'slurm_energy_job_joules_total{{job_id="{job}"}}')}
    assert by_cls["cpu"] == (pytest.approx(rec.energy_it_j["cpu"], rel=1e-9), "tdp_estimate")
    (co2,) = prom_stack.query(f'slurm_energy_job_co2e_grams_total{{job_id="{job}"}}')
    assert float(co2["value"][1]) == pytest.approx(rec.co2e_gross_kg * 1000, rel=1e-9)
    assert co2["metric"]["user"] == "alice" and co2["metric"]["account"] == "research"
    (info,) = prom_stack.query(f'slurm_energy_job_info{{job_id="{job}"}}')
    assert info["metric"]["status"] == rec.status.value


def test_admin_comment_in_sacct(cluster, finished_job):
    job, rec, _ = finished_job
    got = ""
    t0 = time.time()
    while time.time() - t0 < 30 and PREFIX not in got:
        got = _sacct_admin_comment(cluster, job)
        time.sleep(1)
    assert got == summary_text(rec), got
    assert f"{rec.it_kwh:.4g} kwh it" in got and f"{rec.co2e_gross_kg * 1000:.4g} g co2e" in got


def test_other_tools_text_kept_and_owned_field_skipped(cluster, finished_job):
    job, rec, _ = finished_job
    cluster.run(["sacctmgr", "-i", "modify", "job", "where", f"jobid={job}", "set",
                 f"AdminComment=site: checked | {PREFIX} old"], check=True)
    assert _writeback(cluster).publish(rec) == []
    assert _sacct_admin_comment(cluster, job) == f"site: checked | {summary_text(rec)}"
    # a jobstats-owned field is left alone, with a note
    cluster.run(["sacctmgr", "-i", "modify", "job", "where", f"jobid={job}", "set", "AdminComment=JS1:H4sIAAAA"],
                check=True)
    notes = _writeback(cluster).publish(rec)
    assert len(notes) == 1 and "owned by another tool" in notes[0]
    assert _sacct_admin_comment(cluster, job).lower() == "js1:h4siaaaa"  # as it was (22.05's sacctmgr lowercases)


def test_tres_before_25_11_is_a_note_and_a_refusing_sacctmgr_too(cluster, finished_job):
    _job, rec, _ = finished_job
    v = _version(cluster)
    if v >= (25, 11):
        pytest.skip(f"Slurm {cluster.version} has sacctmgr modify job ... set TRES=: see the next test")
    notes = _writeback(cluster, admin_comment=False, tres_energy=True).publish(rec)
    assert notes == [f"slurm write-back: energy TRES not set: needs Slurm >= 25.11 (sacctmgr {v[0]}.{v[1]:02d})"]
    # asked anyway (version check off), the real sacctmgr refuses the TRES field: a note, no exception
    notes = _writeback(cluster, admin_comment=False, tres_energy=True, check_version=False).publish(rec)
    assert len(notes) == 1 and "energy TRES not set: sacctmgr refused" in notes[0]


def test_tres_on_25_11_or_later(cluster, finished_job):
    job, rec, _ = finished_job
    if _version(cluster) < (25, 11):
        pytest.skip(f"Slurm {cluster.version}: sacctmgr cannot set a job's TRES before 25.11")
    if not os.environ.get("SLURM_ENERGY_TEST_TRES"):
        pytest.skip("TRES write-back is permanent: verified end to end on the cgroup v2 VM cluster "
                    "(tests/e2e/test_cgroup_v2_vm.py, the finalizer writes it and sacct shows it); "
                    "set SLURM_ENERGY_TEST_TRES=1 to run it on this cluster too")
    assert _writeback(cluster, admin_comment=False, tres_energy=True).publish(rec) == []
    out = cluster.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "TRESUsageInTot,AllocTRES"], check=True).stdout
    assert f"energy={round(rec.it_kwh * 3.6e6)}" in out, out


def test_dashboard_queries_run_on_real_prometheus_and_top_jobs_has_the_job(cluster, prom_stack, finished_job):
    import json
    from pathlib import Path

    job, rec, _ = finished_job
    dash = json.loads((Path(__file__).resolve().parents[2] / "dashboards" / "slurm-energy.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) == 7
    for e in exprs:  # every panel's PromQL parses and runs (variables at "All")
        prom_stack.query(e.replace("$cluster", ".*").replace("$account", ".*").replace("$user", ".*"))
    top = next(p for p in dash["panels"] if p["type"] == "table")["targets"][0]["expr"]
    assert top.startswith("topk(20, ")
    top = top.replace("topk(20, ", "topk(100000, ")  # other tests' jobs may be larger: all of them
    res = {r["metric"]["job_id"]: float(r["value"][1])
           for r in prom_stack.query(top.replace("$cluster", ".*").replace("$account", ".*").replace("$user", ".*"))}
    assert res[job] == pytest.approx(rec.it_kwh, rel=1e-9)  # kWh


def test_jobenergy_seff_as_the_user(cluster, finished_job):
    job, rec, _ = finished_job
    out = cluster.jobenergy("--seff", job, user="alice")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Job ID: {job}"
    assert "Cores: 1" in lines  # sacct's AllocCPUS for --cpus-per-task=1
    assert "Memory Efficiency: " in out.stdout and "of 200.00 MiB" in out.stdout  # --mem=200M
    cpu_s = rec.nodes[0].cpu_time_s
    eff = next(x for x in lines if x.startswith("CPU Efficiency: "))
    assert eff.startswith(f"CPU Efficiency: {100 * cpu_s / rec.elapsed_s:.2f}%")
    assert f"Energy (IT, job's share): {rec.it_kwh:.4g} kWh" in lines
    assert any(x.startswith(f"CO2e: {rec.co2e_gross_kg * 1000:.4g} g") for x in lines)


def test_month_html_report_has_the_job(cluster, finished_job):
    import datetime as dt

    job, rec, _ = finished_job
    month = dt.datetime.fromtimestamp(rec.end_time, dt.timezone.utc).strftime("%Y-%m")
    out = cluster.base / "jobs" / f"rollup-{month}-{os.getpid()}.html"  # same path inside a Debian root
    r = cluster.run(["/opt/slurm-energy/venv/bin/slurm-energy", "rollup", "--month", month, "--by", "account",
                     "--format", "html", "--out", str(out)])
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "<svg" in html
    # the account's row is the rollup of the store's jobs that ended this month (other tests' too)
    from slurm_energy.reporting.rollup_table import month_bounds
    from slurm_energy.store import open_store
    from tests.helpers.rollup_oracle import rollup

    t0, t1 = month_bounds(month)
    st = open_store(cluster.store_url, readonly=True)
    try:
        recs = [r for r in st.query(start=t0, end=t1) if t0 <= r.end_time < t1 and r.status.value != "running"]
    finally:
        st.close()
    row = next(r for r in rollup(recs, "account", t0, t1).to_dict("records") if r["account"] == "research")
    assert (f"<tr><td>research</td><td>{row['jobs']}</td><td>{row['attempts']}</td><td>{row['unmeasured_jobs']}</td>"
            f"<td>{row['it_kwh']:.4g}</td>") in html
    # the job is listed among the top 10 exactly when its IT energy is among the month's 10 largest
    top = html.split("<h2>Top jobs by IT energy</h2>")[1].split("</table>")[0]
    tenth = sorted((r.it_kwh for r in recs if r.it_kwh is not None), reverse=True)[:10][-1]
    listed = f"<td>{job}</td><td>alice</td><td>research</td><td>debug</td>" in top
    assert listed == (rec.it_kwh > tenth or (rec.it_kwh == tenth and listed))

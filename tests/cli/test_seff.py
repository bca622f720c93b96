"""jobenergy --seff: the seff-like block (CPU and memory efficiency vs the allocation, energy by class)."""

from __future__ import annotations

import subprocess

from slurm_energy.cli.jobenergy import main
from slurm_energy.model import Method
from slurm_energy.reporting.seff import seff_block
from slurm_energy.slurm.clients.sacct import allocation, parse_mem
from tests.helpers.jobrecord_factory import finished, node_record, store_with

T0 = 1_700_000_000.0


def rec():
    # 1 h, 1 node; CPU time 5400 s on 2 allocated cores = 5400 / (2 x 3600) = 75.00 %;
    # peak 512 MiB of 2 GiB requested = 25.00 %; cpu 1 kWh, ram 0.1 kWh (tdp model), gpu unmeasured
    r = node_record(job_id="55", start=T0, end=T0 + 3600, exit_code="0:0", job_state="COMPLETED", gpu_j=None)
    r.nodes[0].cpu_time_s = 5400.0
    r.nodes[0].max_mem_bytes = 512 * 2**20
    f = finished(r)
    f.methods["gpu"] = Method.UNAVAILABLE
    f.energy_it_j["gpu"] = None
    return f


def test_block_lines_computed_by_hand():
    alloc = {"cpus": 2, "nodes": 1, "req_mem_bytes": 2 * 2**30}
    lines = seff_block(rec(), alloc).splitlines()
    assert "CPU Utilized: 01:30:00" in lines
    assert "CPU Efficiency: 75.00% of 02:00:00 core-walltime" in lines
    assert "Job Wall-clock time: 01:00:00" in lines
    assert "Memory Utilized: 512.00 MiB" in lines
    assert "Memory Efficiency: 25.00% of 2.00 GiB" in lines
    assert "Energy (IT, job's share): 1.1 kWh" in lines
    assert "  cpu: 1 kWh  tdp_estimate (estimated: rated power x utilisation x time)" in lines
    assert "  gpu: n/a (not measured)  unavailable (not measured)" in lines
    # IT 1.1 kWh x PUE 1.5 = 1.65 kWh; x 400 g/kWh = 660 g
    assert "Facility energy: 1.65 kWh (IT x PUE 1.5)" in lines
    assert any(x.startswith("CO2e: 660 g (400 gCO2e/kWh") for x in lines)
    assert "Method: cpu=tdp_estimate,gpu=unavailable,ram=tdp_estimate" in lines


def test_no_sacct_says_why_and_keeps_the_energy():
    text = seff_block(rec(), {}, "/usr/bin/sacct not found")
    assert "Cores: n/a (/usr/bin/sacct not found)" in text
    assert "CPU Efficiency: n/a (/usr/bin/sacct not found)" in text
    assert "Energy (IT, job's share): 1.1 kWh" in text


def test_req_mem_forms():
    assert parse_mem("200M", 1, 1) == 200 * 2**20
    assert parse_mem("4G", 4, 1) == 4 * 2**30
    assert parse_mem("500Mc", 4, 1) == 4 * 500 * 2**20  # per CPU (sacct < 21.08)
    assert parse_mem("2Gn", 8, 2) == 2 * 2 * 2**30  # per node
    assert parse_mem("", 1, 1) is None


def test_allocation_from_sacct_output_and_missing_sacct(tmp_path):
    def fake_run(argv, **kw):
        assert argv[-2:] == ["-o", "AllocCPUS,ReqMem,NNodes"]
        return subprocess.CompletedProcess(argv, 0, "2|300M|1\n", "")

    assert allocation("7", run=fake_run) == ({"cpus": 2, "nodes": 1, "req_mem_bytes": 300 * 2**20}, "")
    assert allocation("7", sacct=str(tmp_path / "none")) == ({}, f"{tmp_path / 'none'} not found")


def test_jobenergy_seff_prints_the_block(tmp_path, site_config, capsys, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    url = store_with(tmp_path, rec())
    monkeypatch.setattr("slurm_energy.slurm.clients.sacct.SACCT", str(tmp_path / "no-sacct"))
    assert main(["--store", url, "--seff", "55"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Job ID: 55\n") and "CPU Utilized: 01:30:00" in out and "Coverage:" in out
    assert main(["--store", url, "--seff"]) == 2


SACCT_DOWN = """#!/bin/sh
echo "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:db:6819: \
Connection refused" >&2
echo "sacct: error: Sending PersistInit msg: Connection refused" >&2
echo "sacct: error: Problem talking to the database: Connection refused" >&2
exit 1
"""


def test_allocation_failure_is_one_line_with_the_fix():
    said = []

    def fake_run(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, "", "sacct: error: a\nsacct: error: Problem talking to the database: x\n")

    assert allocation("7", run=fake_run, warn=said.append) == ({}, "sacct failed (exit 1)")
    assert said == ["--seff: job 7's allocation (cores, requested memory) is unknown: sacct failed (exit 1): Problem "
                    "talking to the database: x; its CPU and memory efficiency show n/a, the energy is shown. Fix: "
                    "check that `sacct -j 7` works here (slurmdbd reachable, SLURM_CONF pointing at the cluster)"]
    empty = lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "", "")
    assert allocation("7", run=empty) == ({}, "sacct knows no job 7")


def test_jobenergy_seff_with_failing_sacct_says_so_once_and_shows_the_record(tmp_path, site_config, capsys, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    url = store_with(tmp_path, rec())
    sacct = tmp_path / "sacct"
    sacct.write_text(SACCT_DOWN)
    sacct.chmod(0o755)
    monkeypatch.setattr("slurm_energy.slurm.clients.sacct.SACCT", str(sacct))  # a real program that fails as sacct does
    assert main(["--store", url, "--seff", "55"]) == 0
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert err == ["jobenergy: --seff: job 55's allocation (cores, requested memory) is unknown: sacct failed (exit 1): "
                   "Problem talking to the database: Connection refused; its CPU and memory efficiency show n/a, the "
                   "energy is shown. Fix: check that `sacct -j 55` works here (slurmdbd reachable, SLURM_CONF "
                   "pointing at the cluster)"]
    assert "persist" not in cap.out + cap.err  # sacct's raw chain of lines is not passed on
    assert "Cores: n/a (sacct failed (exit 1))" in cap.out
    assert "Energy (IT, job's share): 1.1 kWh" in cap.out and "CPU Utilized: 01:30:00" in cap.out


def test_default_pue_is_labelled():
    # IT 1.1 kWh x the default PUE 1.58 = 1.738 kWh; the site config set no PUE
    r = finished(node_record(job_id="56", start=T0, end=T0 + 3600), pue=1.58, ci=475.0)
    r.carbon.defaults_used = ["pue", "ci", "alpha"]
    lines = seff_block(r, {"cpus": 1, "nodes": 1, "req_mem_bytes": None}).splitlines()
    assert ("Facility energy: 1.738 kWh (IT x PUE 1.58, industry average PUE 1.58 (Uptime Institute Global Data "
            "Center Survey 2023): the default, no site value)") in lines

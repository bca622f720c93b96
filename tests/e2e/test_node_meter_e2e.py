"""The node meter end to end on the test cluster: a fake ACPI power meter (the test cluster's
site.yaml sets node_meter.source acpi_power_meter, acpi_root $L/hwmon, interval_s 1) and a Redfish
emulator (sushy-static serving tests/fakes/redfish.py's mockups; the site config switched to it for
that test). The record's rest of node equals the meter minus the components, by hand; reconcile
for the window sums to the meter."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from tests.fakes import hwmon as fake_hwmon
from tests.fakes import redfish as mockups

pytestmark = pytest.mark.slurm

NODE_W = 300.0  # the fake meter's reading, W

JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --cpus-per-task=1
#SBATCH --mem=300M
#SBATCH -w n1
sleep 12
"""


def _meter_installed_now(cluster) -> None:
    """The meter of the test appears after the cluster's earlier jobs ran without one: wait for n1's
    meter process (if any, with the source it was started with) to leave, and clear the nodes' "no
    meter found" marks, which otherwise hold a new look off for an hour (docs/NODE_METER.md)."""
    from slurm_energy.slurm.nodemeter import NONE_FOUND, lock_path
    from slurm_energy.slurm.processes import lock_taken

    spool = cluster.base / "spool"
    for _ in range(300):  # it leaves at its next reading once no sampler runs on the node (interval 1 s)
        if lock_taken(lock_path(str(spool), "n1")) is not True:
            break
        time.sleep(0.1)
    for node in ("n1", "n2"):
        (spool / NONE_FOUND.format(node=node)).unlink(missing_ok=True)


@pytest.fixture
def acpi_meter(cluster):
    root = cluster.base / "hwmon"  # node_meter.acpi_root of the test cluster's site config
    shutil.rmtree(root, ignore_errors=True)
    fake_hwmon.acpi_power_meter(root, 0, "", int(NODE_W * 1e6), interval_ms=1000)
    _meter_installed_now(cluster)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _check_rest(rec, meter_w: float) -> None:
    ns = rec.nodes[0]
    r = ns.rest_of_node
    assert r is not None and r.energy_j is not None, (r, rec.errors)
    assert r.metered_s > 5
    # metered = meter W x metered seconds; rest = metered - components (>= 0); the job's part = rest x share
    assert r.node_metered_j == pytest.approx(meter_w * r.metered_s, rel=0.02)
    assert r.node_rest_j == pytest.approx(max(0.0, r.node_metered_j - r.node_components_j), rel=1e-6)
    assert r.energy_j == pytest.approx(r.node_rest_j * r.share, rel=1e-6)
    assert rec.rest_of_node_j == pytest.approx(r.energy_j)
    assert rec.it_kwh * 3.6e6 == pytest.approx(sum(v for v in rec.energy_it_j.values() if v) + r.energy_j, rel=1e-6)


def _reconcile(cluster, rec) -> dict:
    out = subprocess.run([sys.executable, "-m", "slurm_energy.cli.main", "reconcile", "--node", "n1", "--format", "json",
                          "--since", f"uts{int(rec.start_time) - 5}", "--until", f"uts{int(rec.end_time) + 5}"],
                         capture_output=True, text=True, env={**os.environ, "SLURM_ENERGY_CONFIG": str(cluster.site)},
                         check=True)
    return json.loads(out.stdout)


def test_acpi_power_meter_job_carries_the_rest_of_node_and_reconciles(cluster, acpi_meter):
    wd = cluster.workdir("alice", f"meter-{os.getpid()}")
    job = cluster.sbatch("alice", wd, JOB)
    (rec,) = cluster.wait_record(job)
    assert rec.nodes[0].rest_of_node.method == "node_meter:acpi_power_meter"
    _check_rest(rec, NODE_W)
    meter = cluster.base / "spool" / "node-meter-n1.jsonl"
    assert oct(meter.stat().st_mode & 0o777) == "0o600"
    for p in _reconcile(cluster, rec)["periods"]:  # metered = jobs + idle + residual, per period
        assert p["metered_kwh"] == pytest.approx(p["jobs_kwh"] + p["idle_kwh"] + p["residual_kwh"], abs=1e-12)
        assert p["metered_kwh"] * 3.6e6 == pytest.approx(NODE_W * p["metered_s"], rel=0.02)


@pytest.fixture
def redfish_site(cluster, tmp_path):
    sushy = os.path.join(os.path.dirname(sys.executable), "sushy-static")
    if not os.path.exists(sushy):
        pytest.fail("sushy-tools is not installed in the test venv (pyproject's test extra)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = mockups.dell_idrac(tmp_path / "mock", consumed_w=NODE_W)
    p = subprocess.Popen([sushy, "-i", "127.0.0.1", "-p", str(port), "-m", root],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cred = cluster.base / "etc" / "redfish-credentials"
    cred.write_text("root:calvin\n")
    os.chmod(cred, 0o600)
    site = cluster.site
    before = site.read_text()
    site.write_text(before.replace("  source: acpi_power_meter\n", f"  source: redfish\n  redfish: {{url: "
                                   f"'http://127.0.0.1:{port}', credentials_file: {cred}}}\n"))
    _meter_installed_now(cluster)
    time.sleep(0.5)
    yield
    site.write_text(before)
    p.terminate()
    p.wait(5)


def test_redfish_emulator_job_carries_the_rest_of_node(cluster, redfish_site):
    wd = cluster.workdir("bob", f"redfish-{os.getpid()}")
    job = cluster.sbatch("bob", wd, JOB)
    (rec,) = cluster.wait_record(job)
    assert rec.nodes[0].rest_of_node.method == "node_meter:redfish"
    _check_rest(rec, NODE_W)  # PowerControl[0].PowerConsumedWatts of the Dell shape

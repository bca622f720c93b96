"""GPUs allocated but idle, end to end on the test cluster: a fake AMD MI300X (tests/fakes/drm.py:
amdgpu's hwmon power1_average in µW, the PCI device's gpu_busy_percent, power1_cap 750 W) is
switched every 8 s by a helper process between idle (60 W, 0 % busy) and busy (400 W, 90 %) while
a real Slurm job holds it (``--gres=gpu:1``). Prolog -> sampler -> Epilog -> finalizer -> store,
report, ``jobenergy -l`` / ``--json`` / ``--seff``, the Prometheus textfile and the rollup, nothing
patched.

Hand rule (accounting/idle_gpu.py, site defaults): an interval between two GPU readings is idle
when the reading at its end says 0 % busy and the card's mean power (trapezoid) is at most
0.25 x 750 W = 187.5 W. Idle-to-idle intervals are 60 W (a switch either way averages (60 + 400) /
2 = 230 W > 187.5 W, or ends at 90 %): idle energy = 60 W x the idle seconds, e.g. 10 s idle =
600 J = 1.667e-4 kWh, measured by power integration."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.fakes.drm import FakeSysfs
from tests.helpers.samplefile_rows import read_samples

pytestmark = pytest.mark.slurm

IDLE_W, BUSY_W, PERIOD_S, BOUND_W = 60.0, 400.0, 8.0, 0.25 * 750.0
VENV_PY = "/opt/slurm-energy/venv/bin/python"

# power1_average (µW) and gpu_busy_percent switched between idle and busy every PERIOD_S
WRITER = r"""
import os, sys, time
power, busy, idle_w, busy_w, period = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
def put(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
    os.replace(tmp, path)
t0 = time.time()
while True:
    idle = int((time.time() - t0) / period) % 2 == 0
    put(power, int((idle_w if idle else busy_w) * 1e6))
    put(busy, 0 if idle else 90)
    time.sleep(0.01)
"""

GPU_JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --mem=200M
#SBATCH -w n1
#SBATCH --gres=gpu:1
sleep 24
"""


@pytest.fixture
def switching_gpu(cluster):
    root = cluster.base / "sysfs"  # hardware.drm_root / kfd_root of the test cluster's site config
    shutil.rmtree(root, ignore_errors=True)
    fs = FakeSysfs(root)
    fs.other("0000:02:00.0", "1a03:2000", card=0)
    hw = fs.gpu("0000:c1:00.0", "1002:74a1", "amdgpu", card=1, render=128,
                hwmon={"power1_average": int(IDLE_W * 1e6), "power1_cap": 750_000_000},
                extra={"gpu_busy_percent": 0, "current_compute_partition": "SPX"})
    busy = hw.parent.parent / "gpu_busy_percent"
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(hw / "power1_average"), str(busy), str(IDLE_W),
                          str(BUSY_W), str(PERIOD_S)])
    time.sleep(0.3)
    yield
    p.kill()
    p.wait()
    shutil.rmtree(root, ignore_errors=True)  # later GPU jobs must see no AMD GPU again


def _hand_idle(cluster, job: str) -> tuple[float, float, float]:
    """(idle s, idle J, GPU-measured s) by the hand rule over the job's raw GPU readings."""
    f = cluster.base / "spool" / "jobs" / f"{job}-r0" / "samples-n1.jsonl"
    pts = []
    for r in sorted(read_samples(str(f)), key=lambda r: r["t"]):
        for x in r["readings"]:
            if x.get("device_class") == "gpu" and x.get("power_w") is not None:
                pts.append((r["t"], x["power_w"], x.get("util")))
    idle_s = idle_j = 0.0
    for (t0, p0, _), (t1, p1, u1) in itertools.pairwise(pts):
        mean = (p0 + p1) / 2
        if u1 is not None and u1 <= 0.0 and mean <= BOUND_W and t1 > t0:
            idle_s += t1 - t0
            idle_j += mean * (t1 - t0)
    return idle_s, idle_j, pts[-1][0] - pts[0][0]


def test_idle_gpu_energy_through_slurm_store_and_every_output(cluster, switching_gpu):
    wd = cluster.workdir("alice", f"idle-{os.getpid()}")
    job = cluster.sbatch("alice", wd, GPU_JOB)
    (rec,) = cluster.wait_record(job)
    (gpu,) = [d for d in rec.nodes[0].devices if d.device_class == "gpu"]
    idle_s, idle_j, span = _hand_idle(cluster, job)
    # 8 s of every 16 s idle, less the intervals that switch (sampled every 2 s): some, not all; 60 W in each
    assert 2.0 <= idle_s <= 0.7 * span, (idle_s, span)
    assert idle_j == pytest.approx(IDLE_W * idle_s)
    assert gpu.idle_s == pytest.approx(idle_s) and gpu.idle_energy_j == pytest.approx(idle_j)
    assert gpu.idle_bound_w == pytest.approx(BOUND_W) and gpu.method.value == "power_integration"
    assert rec.gpu_idle_s == pytest.approx(idle_s) and rec.gpu_idle_energy_j == pytest.approx(idle_j)
    assert rec.gpu_idle_method == "power_integration"
    kwh = idle_j / 3.6e6  # e.g. 10 s x 60 W = 600 J = 1.667e-4 kWh

    # jobenergy -l: one gpu_idle row, Energy_kWh = the idle energy; --json: the labelled block
    out = cluster.jobenergy("-l", "-P", job, user="alice")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    rows = [dict(zip(lines[0].split("|"), ln.split("|"))) for ln in lines[1:]]
    (row,) = [r for r in rows if r["Class"] == "gpu_idle"]
    assert float(row["Energy_kWh"]) == pytest.approx(kwh, rel=1e-3)
    assert "measured energy in an idle state (power_integration)" in row["Covers"]
    js = json.loads(cluster.jobenergy("--json", job, user="alice").stdout)["jobs"][0]["gpu_idle"]
    assert js["energy_j"] == pytest.approx(idle_j) and js["label"].startswith("measured energy in an idle state")
    seff = cluster.jobenergy("--seff", job, user="alice").stdout
    assert "GPU allocated but idle:" in seff and "measured energy in an idle state" in seff

    # the report: the line, and the band on the plot
    html = wd / f"energy-{job}.html"
    cluster.wait_files(html)
    text = html.read_text()
    assert "GPU allocated but idle" in text and "GPU idle-draw bound (188 W)" in text

    # the Prometheus textfile: the new series (the interim value until the finalizer's final one), promtool-clean
    from prometheus_client.parser import text_string_to_metric_families

    t_end = time.time() + 60
    while True:
        prom = (cluster.base / "textfile" / "slurm_energy.prom").read_text()
        fams = {f.name: f for f in text_string_to_metric_families(prom)}
        got = [x for x in fams.get("slurm_energy_job_gpu_idle_joules", type("F", (), {"samples": []})).samples
               if x.labels["job_id"] == job]
        if (got and got[0].value == pytest.approx(idle_j)) or time.time() > t_end:
            break
        time.sleep(0.5)
    (s,) = got
    assert s.value == pytest.approx(idle_j) and s.labels["method"] == "power_integration"
    if shutil.which("promtool"):
        chk = subprocess.run(["promtool", "check", "metrics"], input=prom, capture_output=True, text=True)
        assert chk.returncode == 0, chk.stdout + chk.stderr

    # the rollup: alice's idle-GPU kWh includes this job's, and it is among the month's top jobs
    month = time.strftime("%Y-%m", time.gmtime(rec.start_time))
    r = cluster.run(["/opt/slurm-energy/venv/bin/slurm-energy", "rollup", "--month", month, "--by", "user",
                     "--format", "json", "--store", cluster.store_url])
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (next(x for x in got["rows"] if x["user"] == "alice")["gpu_idle_kwh"] or 0) >= kwh * (1 - 1e-6)
    # among the month's top jobs, unless the store already holds 10 jobs with more idle-GPU energy
    # (a long-lived test cluster's store accumulates them; CI's is fresh)
    top = got["top_gpu_idle_jobs"]
    assert job in [t["job_id"] for t in top] or (len(top) == 10 and min(t["gpu_idle_kwh"] for t in top) >= kwh)

"""AMD and Intel GPUs end to end: a fake DRM/hwmon sysfs tree (the drivers' real layout,
tests/fakes/drm.py) is advanced at a known wattage by a helper process while a real Slurm job
holding the node's GPU (``--gres=gpu:1``) runs; the test cluster's site config points
hardware.drm_root / kfd_root at it. Prolog (resolution to the PCI bus id) -> sampler -> Epilog ->
finalizer -> store and report, nothing patched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from slurm_energy.model import Method
from tests.fakes.drm import FakeSysfs
from tests.helpers.samplefile_rows import read_samples

pytestmark = pytest.mark.slurm

AMD_W, INTEL_W = 300.0, 450.0
VENV_PY = "/opt/slurm-energy/venv/bin/python"

# power1_average (µW) held at AMD_W; energy1_input (µJ, the xe "card" channel) grows at INTEL_W
WRITER = r"""
import os, sys, time
power, energy, amd_w, intel_w = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
t0 = time.time()
def put(path, value):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
    os.replace(tmp, path)
while True:
    put(power, int(amd_w * 1e6))
    put(energy, 10**9 + int(intel_w * (time.time() - t0) * 1e6))
    time.sleep(0.01)
"""

GPU_JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --mem=200M
#SBATCH -w n1
#SBATCH --gres=gpu:1
sleep 10
"""


def _tree(cluster, vendor: str):
    root = cluster.base / "sysfs"  # hardware.drm_root / kfd_root of the test cluster's site config
    shutil.rmtree(root, ignore_errors=True)
    fs = FakeSysfs(root)
    fs.other("0000:02:00.0", "1a03:2000", card=0)  # the BMC's VGA: never one of the job's GPUs
    if vendor in ("amd", "amd-dpx"):  # DPX: the card split in 2 compute partitions, renderD128/129
        dpx = vendor == "amd-dpx"
        hw = fs.gpu("0000:c1:00.0", "1002:74a1", "amdgpu", card=1, render=128, partitions=2 if dpx else 1,
                    hwmon={"power1_average": int(AMD_W * 1e6), "power1_cap": 750_000_000},
                    extra={"gpu_busy_percent": 90, "current_compute_partition": "DPX" if dpx else "SPX"})
        return root, str(hw / "power1_average"), ""
    hw = fs.gpu("0000:8a:00.0", "8086:0bd5", "xe", card=1, render=128, tiles=2,
                hwmon={"energy1_input": 10**9, "energy1_label": "card", "energy2_input": 1, "energy2_label": "pkg",
                       "power1_rated_max": 600_000_000})
    return root, "", str(hw / "energy1_input")


@pytest.fixture
def fake_drm(cluster, request):
    root, power, energy = _tree(cluster, request.param)
    p = subprocess.Popen([sys.executable, "-c", WRITER, power, energy, str(AMD_W), str(INTEL_W)])
    time.sleep(0.3)
    yield request.param
    p.kill()
    p.wait()
    shutil.rmtree(root, ignore_errors=True)  # later GPU jobs must see no AMD/Intel GPU again


def _gpu_span(cluster, job: str, method: str) -> float:
    f = cluster.base / "spool" / "jobs" / f"{job}-r0" / "samples-n1.jsonl"
    ts = [r["t"] for r in read_samples(str(f))
          if any(x.get("device_class") == "gpu" and x.get("method") == method for x in r["readings"])]
    return ts[-1] - ts[0]


@pytest.mark.parametrize("fake_drm, dev_id, model, method, watts, share", [
    ("amd", "0000:c1:00.0", "AMD Instinct MI300X", Method.POWER_INTEGRATION, AMD_W, 1.0),
    ("intel", "0000:8a:00.0", "Intel Data Center GPU Max 1550", Method.COUNTER, INTEL_W, 1.0),
    # GRES index 0 = the first partition's render node: half the card's energy, labelled
    ("amd-dpx", "0000:c1:00.0/xcp0", "AMD Instinct MI300X", Method.POWER_INTEGRATION, AMD_W, 0.5),
], indirect=["fake_drm"])
def test_amd_and_intel_gpu_energy_through_prolog_epilog_report(cluster, fake_drm, dev_id, model, method, watts,
                                                               share):
    wd = cluster.workdir("alice", f"drm-{fake_drm}-{os.getpid()}")
    job = cluster.sbatch("alice", wd, GPU_JOB)
    (rec,) = cluster.wait_record(job)
    (gpu,) = [d for d in rec.nodes[0].devices if d.device_class == "gpu"]
    # the Prolog resolved SLURM_JOB_GPUS=0 to the physical card by PCI bus id (the BMC's VGA skipped)
    assert (gpu.device_id, gpu.model) == (dev_id, model)
    assert rec.methods["gpu"] == method and gpu.method == method
    span = _gpu_span(cluster, job, method.value)
    # the whole card over the job's samples at the known wattage, within 1 %; the job's share of it
    assert gpu.device_energy_j == pytest.approx(watts * span, rel=0.01)
    assert gpu.energy_j == pytest.approx(share * gpu.device_energy_j, rel=1e-6)
    assert gpu.coverage > 0.5 and rec.energy_it_j["gpu"] == pytest.approx(gpu.energy_j)
    # hwmon power1_cap / power1_rated_max, x the partition's share
    assert gpu.rated_power_w == pytest.approx((600.0 if fake_drm == "intel" else 750.0) * share)
    if share < 1:
        assert "partition_fraction:0.5" in gpu.flags
    csv, html = wd / f"energy-{job}.csv", wd / f"energy-{job}.html"
    cluster.wait_files(csv, html)
    gpu_rows = [ln for ln in csv.read_text().splitlines() if f",gpu,1,{method.value}," in ln]
    assert len(gpu_rows) == 1, csv.read_text()  # the report's GPU row: one card, measured how
    assert model in html.read_text()  # the report names the card's model


# A training script that declares its work with track().tag() while holding the (fake) MI300X:
# the record gets the tags, and its report and jobenergy -l show predicted vs measured (issue 13.5).
FLOPS = 5e15  # MI300X dense BF16 1.3074e15 FLOP/s (bundled table, Epoch AI): ~0.3 of rated over ~12 s
TRACK_JOB = f"""#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --mem=400M
#SBATCH -w n1
#SBATCH --gres=gpu:1
{VENV_PY} - <<'PY'
import time
from slurm_energy import track
with track(label="e2e-predict") as t:
    t.tag(flops={FLOPS!r}, model_params=1e9, tokens=1e6)
    time.sleep(10)
PY
"""


@pytest.mark.parametrize("fake_drm", ["amd"], indirect=True)
def test_tagged_job_shows_predicted_vs_measured(cluster, fake_drm):
    from slurm_energy.accounting.calibration import check_job

    wd = cluster.workdir("alice", f"drm-predict-{os.getpid()}")
    job = cluster.sbatch("alice", wd, TRACK_JOB)
    (rec,) = cluster.wait_record(job)
    assert rec.tags.get("flops") == FLOPS, (rec.tags, (wd / f"slurm-{job}.out").read_text())
    (gpu,) = [d for d in rec.nodes[0].devices if d.device_class == "gpu"]
    c = check_job(rec)
    # FLOP/s fraction = 5e15 FLOPs / (elapsed s x 1 GPU x 1.3074e15 FLOP/s)
    assert c["flops_frac_measured"] == pytest.approx(FLOPS / (rec.elapsed_s * 1.3074e15))
    # power fraction = measured J / (750 W cap x covered s): the card held 300 W = 0.4 of its cap
    assert c["power_frac_measured"] == pytest.approx(gpu.energy_j / (750.0 * gpu.duration_s))
    assert c["power_frac_measured"] <= 0.4 * 1.01
    # predicted GPU energy at the default 0.76: 1 x 750 W x 0.76 x elapsed s
    assert c["gpu_kwh_predicted"] == pytest.approx(750.0 * 0.76 * rec.elapsed_s / 3.6e6)
    out = subprocess.run([VENV_PY, "-m", "slurm_energy.cli.jobenergy", "--store", cluster.store_url, "-l", "-P", job],
                         capture_output=True, text=True, env=cluster.env, check=True).stdout
    lines = out.strip().splitlines()
    rows = [dict(zip(lines[0].split("|"), ln.split("|"))) for ln in lines[1:]]
    (meas,) = [r for r in rows if r["DeviceID"] == "GPU energy measured"]
    assert float(meas["Energy_kWh"]) == pytest.approx(gpu.energy_j / 3.6e6, rel=1e-3)
    csv = wd / f"energy-{job}.prediction.csv"  # its own file: energy-<id>.csv is one table
    cluster.wait_files(csv)
    assert csv.read_text().startswith("jobid,quantity,predicted,measured,unit,basis")

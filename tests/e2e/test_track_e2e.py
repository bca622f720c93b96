"""End to end: a plain sbatch job whose script uses ``slurm_energy.track`` gets ONE record with its
phases and stages (the Prolog's sampler measures; the script only leaves marks), and srun ranks
other than local rank 0 add nothing."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]

TRAIN_JOB = """#!/bin/bash
#SBATCH --job-name=track-digits
#SBATCH --output=slurm-%j.out
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 TRAIN_SECONDS=10 EPOCHS=2
exec /opt/slurm-energy/venv/bin/python train_digits.py
"""

RANKS_JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --mem=600M
srun /opt/slurm-energy/venv/bin/python -c '
import os, time
from slurm_energy import track
with track() as t:
    print("rank", os.environ["SLURM_LOCALID"], t.mode, flush=True)
    with t.phase("epoch 0"):
        end = time.time() + 5
        while time.time() < end:
            pass
    t.stage(1.0)
    t.tag(tokens=100)
'
"""


def _report(cluster, wd: Path, name: str) -> Path:
    cluster.wait_files(wd / name)
    return wd / name


def test_sbatch_job_using_track_gets_one_record_with_phases_and_stages(cluster):
    wd = cluster.workdir("alice", f"e2e-track-{os.getpid()}")
    shutil.copy(REPO / "examples" / "train_digits.py", wd / "train_digits.py")
    os.chmod(wd / "train_digits.py", 0o644)
    job = cluster.sbatch("alice", wd, TRAIN_JOB)
    recs = cluster.wait_record(job)
    assert len(recs) == 1, recs  # one record: no second sampler, no second job
    rec = recs[0]
    out = (wd / f"slurm-{job}.out").read_text()
    assert "test_accuracy=" in out, out
    # the track(label="train-digits") block is itself a phase (what `jobenergy --label` selects), the others in it
    assert [(p.name, p.depth) for p in rec.phases] == [("train-digits", 0), ("load data", 1), ("epoch 0", 1),
                                                       ("epoch 1", 1), ("evaluate", 1)]
    assert [s.fraction for s in rec.stages] == [0.5, 1.0]
    assert rec.tags["model_params"] == 64 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10
    job_j = rec.it_kwh * 3.6e6
    e0, e1 = rec.phases[2], rec.phases[3]
    # each epoch is ~5 s of a busy core: measured (TDP model here), most of the job's energy
    assert e0.it_j > 0 and e1.it_j > 0 and e0.methods["cpu"].value == "tdp_estimate"
    assert e0.duration_s == pytest.approx(5.0, abs=1.5) and e0.coverage > 0.9
    totals = {w.kind: w.it_j for w in rec.phase_totals}
    assert totals["in_phases"] + totals["outside"] == pytest.approx(job_j, rel=1e-6)
    assert rec.phases[0].it_j <= job_j * (1 + 1e-9)  # the block: inside the job
    assert sum(p.it_j for p in rec.phases[1:]) <= rec.phases[0].it_j * (1 + 1e-9)  # its phases: inside the block
    assert rec.stages[1].it_j == pytest.approx(rec.stages[0].it_j + e1.it_j, rel=0.25)
    assert rec.marks_flags == []
    # the job's report shows them; no report of a second (local) measurement was written
    html = _report(cluster, wd, f"energy-{job}.html").read_text()
    assert "Phases and stages" in html and "epoch 1" in html
    assert _report(cluster, wd, f"energy-{job}.phases.csv").read_text().count("\n") == 1 + 5 + 2 + 2
    assert not list(wd.glob("energy-train-digits*"))
    # the README's `jobenergy --label`: alice's jobs that ran track(label="train-digits"), this one among them
    r = cluster.jobenergy("--label", "train-digits", "-P", "-n", "-o", "JobID", user="alice")
    assert r.returncode == 0 and job in r.stdout.split(), (r.stdout, r.stderr)
    # the marks were read and removed: the finalizer removes them right after storing the record
    # that wait_record saw, so give it a bounded moment
    marks = Path(f"/run/slurm-energy-marks/{job}")  # apart from the fallback spool /run/slurm-energy
    deadline = time.monotonic() + 20
    while marks.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not marks.exists()


def test_srun_ranks_other_than_local_rank_0_add_nothing(cluster):
    wd = cluster.workdir("alice", f"e2e-ranks-{os.getpid()}")
    job = cluster.sbatch("alice", wd, RANKS_JOB)
    (rec,) = cluster.wait_record(job)
    out = (wd / f"slurm-{job}.out").read_text()
    assert sorted(x for x in out.splitlines() if x.startswith("rank")) == ["rank 0 slurm", "rank 1 noop"], out
    assert [p.name for p in rec.phases] == ["epoch 0"] and len(rec.stages) == 1
    assert rec.tags == {"tokens": 100}


TWO_NODE_JOB = """#!/bin/bash
#SBATCH --output=slurm-%j.out
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=300M
srun /opt/slurm-energy/venv/bin/python -c '
import os, time
from slurm_energy import track
with track() as t:
    print("node", os.environ["SLURMD_NODENAME"], t.mode, flush=True)
    with t.phase("epoch 0"):
        end = time.time() + 5
        while time.time() < end:
            pass
    t.stage(1.0)
'
"""


def test_two_node_job_phases_are_summed_over_the_nodes_once(cluster):
    wd = cluster.workdir("alice", f"e2e-track2-{os.getpid()}")
    job = cluster.sbatch("alice", wd, TWO_NODE_JOB)
    (rec,) = cluster.wait_record(job)
    out = (wd / f"slurm-{job}.out").read_text()
    assert sorted(x for x in out.splitlines() if x.startswith("node")) == ["node n1 slurm", "node n2 slurm"], out
    assert sorted(n.node for n in rec.nodes) == ["n1", "n2"]
    per_node = [next(w for w in n.windows if w.kind == "phase") for n in rec.nodes]
    (phase,) = rec.phases  # one "epoch 0": each node's local rank 0 marked it, summed once per node
    assert all(w.it_j > 0 for w in per_node)
    assert phase.it_j == pytest.approx(sum(w.it_j for w in per_node))
    assert phase.it_j <= rec.it_kwh * 3.6e6

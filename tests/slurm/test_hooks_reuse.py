"""A reused job id through the real hook path: Prolog -> sampler -> Epilog -> finalizer -> store ->
jobenergy, run as slurmd runs the hooks (root, no PATH), with the same SLURM_JOB_ID three times:
on node h1, then on another node set (h2, as after a slurmctld state reset / MaxJobId wrap), then on
h1 again (its spool and results directories still hold the first run). Three runs, three rows, none
merged with another; `jobenergy ID` shows the newest with a warning, -S selects an older one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from test_hooks import VENV_PY, _env, _hook, _run_hook, _site


def _as_nobody():  # the job's processes are its user's: in PID mode only they count (issue 22)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)

def _installed_is_this_checkout() -> bool:
    """The hooks run the venv's installed package (python -I), not this checkout: only test it when
    the installed merge/spool code is this checkout's (scripts/run-tests.sh installs it first)."""
    import hashlib
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2] / "slurm_energy"
    out = subprocess.run([VENV_PY, "-I", "-c", "import slurm_energy, os; print(os.path.dirname(slurm_energy.__file__))"],
                         capture_output=True, text=True, cwd="/")
    if out.returncode != 0:
        return False
    inst = Path(out.stdout.strip())
    return all((inst / f).exists() and hashlib.sha256((inst / f).read_bytes()).digest()
               == hashlib.sha256((repo / f).read_bytes()).digest()
               for f in ("accounting/merge.py", "slurm/attempt.py", "slurm/sampler/__main__.py"))


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(VENV_PY) or not _installed_is_this_checkout(),
                                reason="hooks run as root with this checkout installed in the venv "
                                       "(scripts/run-tests.sh installs it)")


def _one_run(tmp_path, node: str, busy_s: float) -> float:
    env = dict(_env("4343", tmp_path / "nowhere", 65534, 65534), SLURMD_NODENAME=node, SLURM_NODELIST=node)
    t0 = time.time()
    rc, _ = _run_hook(_hook(tmp_path, "prolog"), env)
    assert rc == 0
    job = subprocess.Popen([sys.executable, "-c", f"import time\nt=time.time()\nwhile time.time()-t<{busy_s}: pass"],
                           env={"SLURM_JOB_ID": "4343"}, preexec_fn=_as_nobody)
    job.wait()
    rc, _ = _run_hook(_hook(tmp_path, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd",
                                                        SLURM_JOB_EXIT_CODE2="0:0"))
    assert rc == 0
    return t0


def _records(tmp_path, n: int):
    from slurm_energy.store import open_store

    recs = []
    for _ in range(300):  # up to 30 s: the finalizer is a detached process
        if (tmp_path / "lib" / "jobs.db").exists():
            try:
                st = open_store(f"sqlite:///{tmp_path}/lib/jobs.db", readonly=True)
            except RuntimeError:  # the finalizer created the file and is creating the schema
                time.sleep(0.1)
                continue
            recs = [r for r in st.get_job("4343") if r.status.value != "running"]
            st.close()
            if len(recs) >= n:
                break
        time.sleep(0.1)
    return sorted(recs, key=lambda r: r.start_time)


def test_reused_job_id_is_three_jobs_never_merged(tmp_path, capsys, monkeypatch):
    _site(tmp_path)
    t1 = _one_run(tmp_path, "h1", 1.0)
    (first,) = _records(tmp_path, 1)
    t2 = _one_run(tmp_path, "h2", 1.0)
    t3 = _one_run(tmp_path, "h1", 1.0)
    recs = _records(tmp_path, 3)
    assert len(recs) == 3
    assert [[n.node for n in r.nodes] for r in recs] == [["h1"], ["h2"], ["h1"]]
    # each run spans only its own time: starts after its own Prolog, ends before the next one's
    assert t1 <= recs[0].start_time and recs[0].end_time < t2 <= recs[1].start_time
    assert recs[1].end_time < t3 <= recs[2].start_time
    # the first run's row is what it was before the id was reused (not overwritten by a merge)
    assert recs[0].energy_it_j == first.energy_it_j and recs[0].end_time == first.end_time
    # each run's samples are its own: never more than its own span at 0.5 s intervals (+ Prolog,
    # final and Epilog rows)
    for r in recs:
        assert r.nodes[0].n_samples <= (r.end_time - r.start_time) / 0.5 + 4
    # the third run got its own spool directory beside the first's
    jobs = sorted(os.listdir(tmp_path / "spool" / "jobs"))
    assert jobs[0] == "4343-r0" and len(jobs) == 2 and jobs[1].startswith("4343-r0-t")
    # stored runs' node files are out of the results directory's way
    res = tmp_path / "spool" / "results" / "t" / "4343.0"
    for _ in range(100):  # the finalizer moves them after storing and writing the report
        if not list(res.glob("*.json")):
            break
        time.sleep(0.1)
    assert not list(res.glob("*.json")) and len(list((res / "stored").iterdir())) == 3
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(tmp_path / "site.yaml"))
    from slurm_energy.cli.jobenergy import main

    url = f"sqlite:///{tmp_path}/lib/jobs.db"
    assert main(["--store", url, "-P", "-n", "-o", "JobID,NodeList,Start", "4343"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("4343|h1|") and "used by 3 jobs" in err
    start2 = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(recs[1].start_time - 0.5))  # site tz: UTC
    assert main(["--store", url, "-P", "-n", "-o", "JobID,NodeList", "-S", start2, "4343"]) == 0
    assert capsys.readouterr().out.strip() == "4343|h2"

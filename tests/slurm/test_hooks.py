"""The hook scripts as slurmd runs them: root, no PATH, exit 0 within 2 s whatever happens.

No Slurm here: the job is a process carrying SLURM_JOB_ID in its environment (the psutil fallback
for nodes without job cgroups). Real processes, real files.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_energy.slurm.processes import is_running
from tests.helpers.jobrecord_factory import hook_env, site_yaml

REPO = Path(__file__).resolve().parents[2]
VENV_PY = os.environ.get("SLURM_ENERGY_TEST_VENV_PY", "/opt/slurm-energy/venv/bin/python")  # the installed hooks
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(VENV_PY),
                                reason="hooks run as root with the installed venv (scripts/setup.sh)")


def _hook(tmp: Path, which: str) -> str:
    """The repo's hook script, installed by `slurm-energy install` with a test config."""
    out = subprocess.run([VENV_PY, "-m", "slurm_energy.cli.main", "install", "--hooks-dir", str(tmp / "hooks"),
                          "--config", str(tmp / "site.yaml"), "--marks-tmpfs", "none"], capture_output=True, text=True,
                         cwd="/")
    assert out.returncode == 0, out.stderr
    return str(tmp / "hooks" / which)


def _site(tmp: Path, extra: str = "", sampler: str = "") -> None:
    """``sampler``: ``sampling.sampler`` (``job``: a process per job), else the default (the node sampler)."""
    site_yaml(tmp, "sampling:\n  interval_s: 0.5\n" + (f"  sampler: {sampler}\n" if sampler else "")
              + f"hardware:\n  rapl_root: {tmp}/no-powercap\n"
              f"outputs:\n  prometheus:\n    textfile_dir: {tmp}/textfile\n{extra}",
              paths={"store_url": f"sqlite:///{tmp}/lib/jobs.db"})


def _env(job_id: str, workdir: Path, uid: int, gid: int) -> dict:
    return hook_env(job_id, node="h1", uid=uid, gid=gid, user="nobody", context="prolog_slurmd",
                    SLURM_JOB_PARTITION="debug", SLURM_JOB_WORK_DIR=str(workdir))


def _run_hook(script: str, env: dict) -> tuple[int, float]:
    """Run a hook as slurmd does (no PATH), in its own process group, then kill that group the way
    slurmd does when the Prolog exits (TERM, then KILL)."""
    t = time.monotonic()
    p = subprocess.Popen([script], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    _out, _err = p.communicate(timeout=10)  # reads stdout/stderr to EOF, as slurmd does
    dt = time.monotonic() - t
    for s in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, s)
        except ProcessLookupError:
            pass
    return p.returncode, dt


@pytest.mark.parametrize("sampler", ["node", "job"])  # the default, and a sampler process per job
def test_prolog_epilog_measure_a_job_and_report_as_the_user(tmp_path, sampler):
    _site(tmp_path, sampler=sampler)
    nobody = pwd.getpwnam("nobody")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="se-hooks-", dir="/var/tmp"))  # traversable by nobody
    os.chmod(base, 0o755)
    wd = base / "work"
    wd.mkdir()
    os.chown(wd, nobody.pw_uid, nobody.pw_gid)
    env = _env("4242", wd, nobody.pw_uid, nobody.pw_gid)
    rc, dt = _run_hook(_hook(tmp_path, "prolog"), env)
    assert rc == 0 and dt < 2.0, (rc, dt)
    spool = tmp_path / "spool" / "jobs" / "4242-r0"
    pidfile = spool / "sampler-h1.pid" if sampler == "job" else tmp_path / "spool" / "node-sampler-h1.pid"
    for _ in range(100):  # the node sampler writes its PID once it holds the node's lock
        if pidfile.exists():
            break
        time.sleep(0.1)
    pid = int(pidfile.read_text())
    assert is_running(pid) and os.getpgid(pid) == pid  # survived the process-group kill
    assert oct(os.stat(tmp_path / "spool").st_mode & 0o777) == "0o700"  # the spool is root-only
    # "the job": a CPU-bound process of the job's user under a stand-in slurmstepd (a copy of the
    # interpreter named slurmstepd, run as root with its title): PID mode counts the descendants of
    # the job's slurmstepd whose real uid is the job's
    import shutil

    stepd = tmp_path / "slurmstepd"
    shutil.copy(os.path.realpath(sys.executable), stepd)
    code = (f"import os, time\npid = os.fork()\nif pid == 0:\n    os.setgroups([]); os.setgid({nobody.pw_gid}); "
            f"os.setuid({nobody.pw_uid})\n    t = time.process_time()\n    while time.process_time() - t < 3: pass\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    job = subprocess.Popen(["slurmstepd: [4242.batch]", "-c", code], executable=str(stepd),
                           env={"SLURM_JOB_ID": "4242", "PYTHONHOME": sys.base_prefix})
    job.wait()
    rc, dt = _run_hook(_hook(tmp_path, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd",
                                                         SLURM_JOB_EXIT_CODE2="0:0"))
    assert rc == 0 and dt < 2.0, (rc, dt)
    for _ in range(100):  # the per-job sampler is stopped by the Epilog; the node sampler leaves with its last job
        if not is_running(pid):
            break
        time.sleep(0.1)
    assert not is_running(pid)
    html = wd / "energy-4242.html"
    for _ in range(300):  # up to 30 s: the finalizer is a separate process
        if html.exists() and (wd / "energy-4242.csv").exists():
            break
        time.sleep(0.1)
    assert os.lstat(html).st_uid == nobody.pw_uid  # written after dropping root
    from slurm_energy.store import open_store

    st = open_store(f"sqlite:///{tmp_path}/lib/jobs.db")
    for _ in range(50):
        recs = st.get_job("4242")
        if recs:
            break
        time.sleep(0.1)
    (rec,) = recs
    assert rec.energy_it_j["cpu"] > 0 and rec.nodes[0].cpu_time_source == "psutil"
    # a busy loop of 3 CPU-s seen by polling PIDs (no cgroup): never more than it used, most of it seen
    # (the PID fallback starts 0.5 s after the sampler and loses what runs before; cgroups don't)
    assert 1.0 <= rec.nodes[0].cpu_time_s <= 3.15
    assert rec.exit_code == "0:0"
    import shutil

    shutil.rmtree(base)


def test_prolog_exits_0_fast_on_bad_config_and_records_it(tmp_path):
    _site(tmp_path)
    hook = _hook(tmp_path, "prolog")  # installed with a valid config (install refuses an invalid one)...
    epilog = str(tmp_path / "hooks" / "epilog")
    site = tmp_path / "site.yaml"  # ...then edited: a bad value; every other key (the paths) stays in force
    site.write_text(site.read_text().replace("interval_s: 0.5\n", "interval_s: -1\n"))
    env = _env("77", tmp_path / "nowhere", 65534, 65534)
    rc, dt = _run_hook(hook, env)
    assert rc == 0 and dt < 2.0  # nothing raised to slurmd
    errors = (tmp_path / "spool" / "jobs" / "77-r0" / "errors-h1.jsonl").read_text()
    assert "sampling.interval_s" in errors  # recorded on the job, in the site's own spool (not the defaults')
    rc, dt = _run_hook(epilog, dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd"))
    assert rc == 0  # stops the sampler this test started


def test_hooks_exit_0_without_slurm_environment(tmp_path):
    _site(tmp_path)
    for which in ("prolog", "epilog"):
        rc, dt = _run_hook(_hook(tmp_path, which), {})
        assert rc == 0 and dt < 2.0
    log = (tmp_path / "log" / "hooks.log").read_text()
    assert "SLURM_JOB_ID is not set" in log


def test_epilog_without_prolog_records_no_data_job(tmp_path):
    _site(tmp_path)
    env = _env("88", tmp_path / "nowhere", 65534, 65534)
    rc, dt = _run_hook(_hook(tmp_path, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd"))
    assert rc == 0 and dt < 2.0
    from slurm_energy.store import open_store

    for _ in range(300):  # up to 30 s: the finalizer is a separate process
        if (tmp_path / "lib" / "jobs.db").exists():
            recs = open_store(f"sqlite:///{tmp_path}/lib/jobs.db").get_job("88")
            if recs:
                break
        time.sleep(0.1)
    (rec,) = recs
    assert rec.status.value == "no_data", rec.errors  # the job ran, nothing was measured (was: partial)
    assert rec.it_kwh is None  # nothing was sampled: unmeasured, not 0
    assert any("no Prolog context" in e for e in rec.errors)
    # no sample was ever flushed here: the finalizer's note does not claim one was used
    assert [e[20:] for e in rec.errors if "epilog: sampler" in e] == [
        "epilog: sampler no_pidfile; the rows written before the Epilog, if any, and a reading taken after it are used"]


def test_requeued_job_epilog_finds_its_attempt(tmp_path):
    # Slurm may run attempt 0's Epilog with SLURM_JOB_RESTART_COUNT already 1
    from slurm_energy.slurm.attempt import Attempt, find_attempt

    sp = str(tmp_path / "spool")
    a0 = Attempt(sp, "61", 0, "n1").ensure()
    open(a0.context, "w").write("{}")
    assert find_attempt(sp, "61", "n1", 1).dir == a0.dir  # attempt 0 is still waiting for its Epilog
    open(a0.done, "w").write("1")
    a1 = Attempt(sp, "61", 1, "n1").ensure()
    open(a1.context, "w").write("{}")
    assert find_attempt(sp, "61", "n1", 1).dir == a1.dir
    assert find_attempt(sp, "61", "n2", 1).dir == Attempt(sp, "61", 1, "n2").dir  # other node: no Prolog ran


def test_epilog_within_2_s_when_the_sampler_ignores_term_and_the_tail_is_still_read(tmp_path):
    # a stuck sampler (ignores TERM) costs the Epilog its whole wait: it must still exit 0 in < 2 s,
    # and the finalizer (not the Epilog) takes the last reading and marks the node partial. A
    # per-job sampler's fault (the Epilog TERMs and KILLs it): the node sampler's twin, one that does
    # not answer, is tests/slurm/test_hook_faults.py::test_node_sampler_that_does_not_answer_*
    _site(tmp_path, sampler="job")
    nobody = pwd.getpwnam("nobody")
    env = _env("5151", tmp_path / "nowhere", nobody.pw_uid, nobody.pw_gid)
    rc, _ = _run_hook(_hook(tmp_path, "prolog"), env)
    spool = tmp_path / "spool" / "jobs" / "5151-r0"
    real = int((spool / "sampler-h1.pid").read_text())
    os.kill(real, signal.SIGKILL)
    stuck = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                              " time.sleep(60)", str(spool), "sampler"],  # argv names the spool, like the sampler's
                             start_new_session=True)  # root's, leading its group: what the Epilog signals (issue 22)
    (spool / "sampler-h1.pid").write_text(str(stuck.pid))
    time.sleep(0.3)
    rc, dt = _run_hook(_hook(tmp_path, "epilog"), dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmd"))
    assert rc == 0 and dt < 2.0, (rc, dt)
    assert stuck.wait(timeout=5) == -signal.SIGKILL  # TERM ignored, then KILLed
    from slurm_energy.store import open_store

    recs = []
    for _ in range(200):
        if (tmp_path / "lib" / "jobs.db").exists():
            recs = open_store(f"sqlite:///{tmp_path}/lib/jobs.db").get_job("5151")
            if recs:
                break
        time.sleep(0.1)
    (rec,) = recs
    assert rec.status.value == "partial"
    assert any("the sampler did not stop within 1 s of the Epilog's TERM; killed" in e for e in rec.errors)
    from tests.helpers.samplefile_rows import read_samples

    kinds = [r["kind"] for r in read_samples(str(spool / "samples-h1.jsonl"))]
    assert kinds[0] == "prolog" and kinds[-1] == "epilog"  # the finalizer's reading closes the series


def test_unusable_log_dir_falls_back_to_the_default_log_dir(tmp_path, monkeypatch):
    import logging

    from slurm_energy.slurm import log as runtime

    monkeypatch.setattr(runtime, "FALLBACK_LOG_DIR", str(tmp_path / "fallback"))
    (tmp_path / "afile").write_text("x")
    path = runtime.setup_logging(str(tmp_path / "afile" / "log"))  # under a file: cannot be created
    assert path == str(tmp_path / "fallback" / "hooks.log")
    logging.getLogger("slurm_energy.hooks").error("visible")
    assert "visible" in open(path).read()

"""collect as an ordinary user: a clear message, exit 2, no traceback and no silent '0 finalised'."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from slurm_energy.cli.store_cmds import not_root_message
from slurm_energy.slurm.jobend.results import write_node_record
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record


def test_not_root_message_names_paths_user_and_fix():
    assert not_root_message("/var/spool/slurm-energy/results", "sqlite:////s/jobs.db", 0) is None
    msg = not_root_message("/r", "postgresql+psycopg://se:secret@db/energy", 65534)
    assert msg.startswith("collect must run as root")
    assert "/r" in msg and "postgresql+psycopg://se:***@db/energy" in msg and "secret" not in msg
    assert "you are nobody (uid 65534)" in msg and "crontab" in msg


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root and runuser")
def test_collect_as_nobody_is_a_message_not_a_traceback():
    d = tempfile.mkdtemp(prefix="se-collect-", dir="/var/tmp")  # 0755 parents: nobody can reach it
    try:
        os.chmod(d, 0o755)
        url = f"sqlite:///{d}/spool/jobs.db"
        s = open_store(url)
        s.put(finished(node_record(job_id="1")))
        s.close()
        # a stale 2-node attempt that root's collect would finalise (records are root's, dirs 0700)
        p = write_node_record(f"{d}/results", node_record(job_id="500", node="n1", expected=("n1", "n2")))
        t = time.time() - 7200
        os.utime(p, (t, t))
        cfg = f"{d}/site.yaml"
        with open(cfg, "w") as f:
            f.write("cluster_name: c1\noffline: true\n")
        os.chmod(cfg, 0o644)
        env = {"PATH": "/usr/bin:/bin", "SLURM_ENERGY_CONFIG": cfg, "PYTHONPATH": os.getcwd()}
        for store in (url, f"sqlite:///{d}/spool/new.db"):  # existing store, and one to be created
            r = subprocess.run([shutil.which("runuser"), "-u", "nobody", "--", sys.executable, "-m",
                                "slurm_energy.cli.main", "collect", "--store", store, "--results-dir", f"{d}/results"],
                               capture_output=True, text=True, env=env, cwd=d)
            assert r.returncode == 2, r
            assert "Traceback" not in r.stderr and r.stdout == ""
            assert "collect must run as root" in r.stderr
            assert f"{d}/results" in r.stderr and store in r.stderr and "you are nobody (uid 65534)" in r.stderr
        assert not os.path.exists(f"{d}/spool/new.db")
        s = open_store(url, readonly=True)
        assert s.get_job("500") == []  # nothing was stored by the refused run
        s.close()
    finally:
        shutil.rmtree(d)

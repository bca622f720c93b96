"""A node as the finalizer sees it, for the attack tests (issue 22): a site config in a temp dir,
job spools holding real sample rows, the job users alice (uid 2001) and bob (2002) of the test
cluster (tests/e2e/conftest.py), working directories they own. No Slurm: slurmctld's answer, where
a test needs one, is a stand-in ``scontrol`` script printing the text Slurm 22.05 prints."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path

from slurm_energy.core import Reading
from slurm_energy.slurm.context import JobContext
from tests.helpers.samplefile_rows import RAPL_RANGE_UJ, spool_with_rows

T0 = 1_796_210_633.0  # 2026-12-01T10:03:53Z
NODE = "n2"
#: one RAPL package of 100 W rated power (the shape RaplReader writes), 4 CPUs
STATIC = {"host": NODE, "logical_cpus": 4, "devices": [
    {"device_class": "cpu", "device_id": "intel-rapl:0", "model": "package-0", "rated_power_w": 100.0,
     "rated_power_source": "RAPL constraint_0_max_power_uw"}], "reader_notes": []}


def user(name: str) -> tuple[int, int]:
    pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid


def row(t: float, kind: str, job_cpu_s: float, busy_s: float, rapl_uj: int) -> dict:
    """One sample row: the job's CPU time, the node's busy CPU time (s) and the package counter (uJ)."""
    return {"t": t, "kind": kind,
            "job": {"cpu_time_s": job_cpu_s, "mem_bytes": 2**20, "max_mem_bytes": 2**20, "pids": [7916],
                    "source": "cgroup-v1"},
            "node": {"cpu_busy_s": busy_s, "cpu_total_s": 4 * (t - T0) + 1000.0, "ncpu": 4, "mem_used_bytes": 2**30,
                     "mem_total_bytes": 2**34},
            "readings": [Reading("cpu", "intel-rapl:0", "counter", energy_uj=rapl_uj, max_energy_range_uj=RAPL_RANGE_UJ,
                                 max_power_w=100.0).to_dict()]}


#: The job is all the node's busy CPU time (share 1): RAPL 120 J to T0 + 2 s, then 200 J to the
#: sampler's final row at T0 + 5 s, written on the Epilog's TERM (the Epilog's time: T0 + 4.99 s).
ROWS = [row(T0, "start", 0.0, 500.0, 1_000_000), row(T0 + 2.0, "sample", 3.0, 503.0, 121_000_000),
        row(T0 + 5.0, "final", 7.5, 507.5, 321_000_000)]
END = T0 + 4.99
JOB_J = 320.0  # 120 J + 200 J, all of it the job's


class Node:
    """``base`` (a 0755 dir under /var/tmp, traversable by the job users) with ``site.yaml``, the
    spool, results, store and log; ``$SLURM_ENERGY_CONFIG`` and ``$SLURM_ENERGY_MARKS_DIR`` set
    through ``monkeypatch``."""

    def __init__(self, monkeypatch):
        self.base = Path(tempfile.mkdtemp(prefix="se-attack-", dir="/var/tmp"))
        os.chmod(self.base, 0o755)
        self.store_url = f"sqlite:///{self.base}/lib/jobs.db"
        self.marks = self.base / "marks"
        (self.base / "site.yaml").write_text(f"""cluster_name: t
hardware:
  rapl_root: {self.base}/no-powercap
paths:
  spool_dir: {self.base}/spool
  spool_fallback_dir: {self.base}/run-spool
  results_dir: {self.base}/results
  store_url: {self.store_url}
  log_dir: {self.base}/log
outputs:
  slurm:
    admin_comment: false
""")
        monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(self.base / "site.yaml"))
        monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(self.marks))
        monkeypatch.delenv("SLURM_ENERGY_STORE", raising=False)

    def workdir(self, owner: str, name: str | bytes) -> str:
        """A working directory of ``owner``'s (``name`` may be bytes that are not UTF-8); the path
        as the OS gives it to Python (surrogateescape)."""
        uid, gid = user(owner)
        d = os.path.join(os.fsencode(self.base), os.fsencode(name))
        os.mkdir(d, 0o755)
        os.chown(d, uid, gid)
        return os.fsdecode(d)

    def job(self, job_id: str, owner: str, work_dir: str, job_name: str = "train", rows=ROWS):
        """The spool the Prolog and the sampler leave: context (slurmd's environment), inventory, rows."""
        uid, gid = user(owner)
        spool = spool_with_rows(str(self.base / "spool"), job_id, NODE, STATIC, rows)
        ctx = JobContext(job_id=job_id, cluster="t", uid=uid, gid=gid, user=owner, job_name=job_name,
                         work_dir=work_dir, node=NODE, nodelist=NODE, prolog_time=T0, cpus_per_node="4")
        with open(spool.context, "w", encoding="utf-8") as f:
            f.write(ctx.to_json())
        return spool

    def store(self):
        from slurm_energy.store import open_store

        return open_store(self.store_url, readonly=True)

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

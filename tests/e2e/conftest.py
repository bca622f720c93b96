"""Fixtures for end-to-end tests on the real Slurm test cluster (scripts/testcluster.sh).

When SLURM_ENERGY_TEST_CLUSTER is set (scripts/run-tests.sh, CI) a cluster that is not running is
an error, not a skip: CI must never pass by skipping the real-Slurm tests.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TC = REPO / "scripts" / "testcluster.sh"
VENV_PY = "/opt/slurm-energy/venv/bin/python"


JOBENERGY = "/opt/slurm-energy/venv/bin/jobenergy"  # the same path on the host and in a Debian root


class Cluster:
    """The running test cluster in ``base`` ($L), whatever its Slurm version.

    A cluster on another Slurm than the host's runs in a Debian root (scripts/slurm-root.sh) where
    the host's Slurm commands cannot talk to it: run sbatch, squeue, scancel, sacct and jobenergy
    through :meth:`run` (``scripts/testcluster.sh exec``), which runs them for the active version.
    Files under ``base`` (store, spool, job dirs) have the same path inside the root and out."""

    def __init__(self, base: Path):
        self.base = base
        self.conf = base / "etc" / "slurm.conf"
        self.site = base / "etc" / "site.yaml"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), SLURM_ENERGY_CONFIG=str(self.site))
        state = {}
        f = base / "etc" / "cluster.env"
        if f.exists():
            state = dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line)
        self.root = state.get("ROOT", "")  # "" : the host's Slurm
        out = subprocess.run(self.cmd(["slurmd", "-V"]), capture_output=True, text=True, env=self._tc_env).stdout
        self.version = out.split()[-1] if out.strip() else ""  # e.g. "24.11.5"

    @property
    def _tc_env(self) -> dict:
        return dict(os.environ, L=str(self.base))

    def cmd(self, argv: list[str], user: str = "root", cwd: str | Path = "/") -> list[str]:
        """argv that runs ``argv`` for the cluster's Slurm version as ``user`` in ``cwd``."""
        return ["bash", str(TC), "exec", "-u", user, "-C", str(cwd), "--", *argv]

    def run(self, argv: list[str], user: str = "root", cwd: str | Path = "/", check: bool = False,
            timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a Slurm or slurm-energy command for the cluster's version; stdout/stderr as text."""
        return subprocess.run(self.cmd(argv, user, cwd), capture_output=True, text=True, env=self._tc_env,
                              check=check, timeout=timeout)

    def jobenergy(self, *args: str, user: str = "root") -> subprocess.CompletedProcess:
        """``jobenergy ARGS`` as ``user`` (the installation the cluster's hooks use)."""
        return self.run([JOBENERGY, *args], user=user)

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.base}/lib/jobs.db"

    def workdir(self, user: str, name: str) -> Path:
        d = self.base / "jobs" / user / name
        pw = pwd.getpwnam(user)
        d.mkdir(parents=True, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
        return d

    def sbatch(self, user: str, workdir: Path, script: str, *args: str) -> str:
        """Submit ``script`` (text) with plain sbatch as ``user`` from ``workdir``; returns the job id."""
        pw = pwd.getpwnam(user)
        f = workdir / "job.sbatch"
        f.write_text(script)
        os.chown(f, pw.pw_uid, pw.pw_gid)
        out = self.run(["sbatch", "--parsable", *args, str(f)], user=user, cwd=workdir)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().split(";")[0]

    def wait_record(self, job_id: str, timeout_s: float = 180.0):
        """The job's final (not running) records from the store, waiting for the finalizer."""
        from slurm_energy.errors import StoreError
        from slurm_energy.model import Status
        from slurm_energy.store import open_store

        t0 = time.time()
        recs: list = []
        last_error = ""
        while time.time() - t0 < timeout_s:
            try:  # a store being created, or a writer's journal being rolled back: try again
                st = open_store(self.store_url, readonly=True) if Path(f"{self.base}/lib/jobs.db").exists() else None
            except StoreError as e:
                st, last_error = None, str(e)
            if st is not None:
                try:
                    recs = st.get_job(job_id)
                finally:
                    st.close()
                if recs and all(r.status != Status.RUNNING for r in recs):
                    return recs
            time.sleep(0.5)
        raise AssertionError(f"job {job_id}: no final record after {timeout_s} s (got {recs}; last store error: "
                             f"{last_error or 'none'}); see {self.base}/log")

    def wait_files(self, *paths: Path, timeout_s: float = 90.0) -> None:
        """Wait until every path exists: the finalizer writes the report just after storing the
        record, and on a loaded 2-core machine rendering it has taken 17 s."""
        t0 = time.time()
        while not all(p.exists() for p in paths):
            if time.time() - t0 > timeout_s:
                raise AssertionError(f"not written after {timeout_s} s: {[str(p) for p in paths if not p.exists()]}; "
                                     f"see {self.base}/log/finalize.log")
            time.sleep(0.25)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    mark = Path("/run/slurm-energy-testcluster")  # the $L of the cluster testcluster.sh started last
    base = Path(os.environ.get("SLURM_ENERGY_TEST_CLUSTER") or os.environ.get("L")
                or (mark.read_text().strip() if mark.exists() else "/var/tmp/slurm-energy-cluster"))
    ok = TC.exists() and subprocess.run(["bash", str(TC), "status"], capture_output=True,
                                        env=dict(os.environ, L=str(base))).returncode == 0
    if not ok:
        if os.environ.get("SLURM_ENERGY_TEST_CLUSTER"):
            pytest.fail(f"SLURM_ENERGY_TEST_CLUSTER={base} but the test cluster is not running")
        pytest.skip("test cluster not running: start it with `scripts/testcluster.sh start`")
    return Cluster(base)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()  # by PID: this Popen's own process
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class PromStack:
    """Debian's prometheus-node-exporter reading the cluster's textfile dir, and Debian's prometheus
    scraping it every second, both on free loopback ports, started and stopped by PID."""

    def __init__(self, url: str, exporter_url: str):
        self.url, self.exporter_url = url, exporter_url

    def query(self, promql: str) -> list:
        import requests

        r = requests.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        r.raise_for_status()
        body = r.json()
        assert body["status"] == "success", body
        return body["data"]["result"]


@pytest.fixture(scope="session")
def prom_stack(cluster, tmp_path_factory):
    import shutil

    import requests

    exe_ne, exe_p = shutil.which("prometheus-node-exporter"), shutil.which("prometheus")
    if not (exe_ne and exe_p):
        msg = "Debian's prometheus and prometheus-node-exporter are needed (scripts/setup.sh installs them)"
        if os.environ.get("SLURM_ENERGY_TEST_CLUSTER"):
            pytest.fail(msg)
        pytest.skip(msg)
    d = tmp_path_factory.mktemp("prom")
    ne_port, p_port = _free_port(), _free_port()
    ne = subprocess.Popen([exe_ne, f"--web.listen-address=127.0.0.1:{ne_port}", "--collector.disable-defaults",
                           "--collector.textfile", f"--collector.textfile.directory={cluster.base}/textfile"],
                          stdout=open(d / "node_exporter.log", "w"), stderr=subprocess.STDOUT)
    (d / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        # the shipped rules, as a site loads them (the dashboard's panels read their series)
        f"rule_files: ['{Path(__file__).resolve().parents[2] / 'prometheus' / 'slurm-energy.rules.yml'}']\n"
        f"scrape_configs:\n  - job_name: node\n    static_configs: [{{targets: ['127.0.0.1:{ne_port}']}}]\n")
    prom = subprocess.Popen([exe_p, f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/tsdb",
                             f"--web.listen-address=127.0.0.1:{p_port}"],
                            stdout=open(d / "prometheus.log", "w"), stderr=subprocess.STDOUT)
    stack = PromStack(f"http://127.0.0.1:{p_port}", f"http://127.0.0.1:{ne_port}/metrics")
    try:
        t0 = time.time()
        while time.time() - t0 < 60:
            try:
                if requests.get(f"{stack.url}/-/ready", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"prometheus did not become ready; see {d}/prometheus.log")
        yield stack
    finally:
        _stop(prom)
        _stop(ne)

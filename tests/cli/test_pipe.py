"""`jobenergy --json | head -1` and `slurm-energy check-config | head`: the reader closes the pipe
early; both commands stop quietly (slurm_energy/cli/pipe.py)."""

import os
import shutil
import subprocess
import sys

import pytest

from slurm_energy.cli.pipe import EXIT_BROKEN_PIPE
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record

N_JOBS = 1600


@pytest.mark.skipif(not shutil.which("bash") or not shutil.which("head"), reason="needs bash and head")
@pytest.mark.parametrize("fmt", ["--json", "-P"])
def test_head_closing_the_pipe_is_not_a_traceback(tmp_path, fmt):
    url = f"sqlite:///{tmp_path}/spool/jobs.db"
    s = open_store(url)
    s.put_many([finished(node_record(job_id=str(1000 + i), start=1.7e9 + i, end=1.7e9 + i + 60))
                for i in range(N_JOBS)])
    s.close()
    (tmp_path / "site.yaml").write_text("cluster_name: c1\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_ENERGY_CONFIG": str(tmp_path / "site.yaml"),
           "PYTHONPATH": os.getcwd()}
    code = "import sys; from slurm_energy.cli.jobenergy import main; sys.exit(main(sys.argv[1:]))"
    # full output first: it must exceed Linux's 64 KiB pipe buffer, so jobenergy is still writing
    # when head exits (1600 jobs: about 4.4 MB of JSON, about 100 kB with -P: more than a 64 KiB pipe)
    full = subprocess.run([sys.executable, "-c", code, "--store", url, "-S", "2000-01-01", fmt],
                          capture_output=True, text=True, env=env)
    assert full.returncode == 0, full.stderr
    assert len(full.stdout.encode()) > 65536
    script = (f'{sys.executable} -c "$CODE" --store {url} -S 2000-01-01 {fmt} 2>"$ERR" | head -1; '
              'echo "rc=${PIPESTATUS[0]}"')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                       env={**env, "CODE": code, "ERR": str(tmp_path / "err")})
    first, status = r.stdout.splitlines()
    assert first == full.stdout.splitlines()[0]
    err = (tmp_path / "err").read_text()
    assert status == f"rc={EXIT_BROKEN_PIPE}"  # 128 + SIGPIPE (13) = 141, as sacct | head
    assert err == "", err  # no traceback, no 'Exception ignored' at exit


def test_slurm_energy_stops_quietly_when_its_reader_has_gone(tmp_path):
    # `slurm-energy check-config site.yaml | head -5`: the same exit as jobenergy's, through the one
    # helper both commands' main() use (a fresh tester's traceback); here the reader is gone before
    # the command writes at all, so the broken pipe is certain
    (tmp_path / "site.yaml").write_text("cluster_name: c1\n")
    code = "import sys; from slurm_energy.cli.main import main; sys.exit(main(sys.argv[1:]))"
    r_fd, w_fd = os.pipe()
    os.close(r_fd)
    try:
        p = subprocess.run([sys.executable, "-c", code, "check-config", str(tmp_path / "site.yaml")], stdout=w_fd,
                           stderr=subprocess.PIPE, text=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                                   "PYTHONPATH": os.getcwd()})
    finally:
        os.close(w_fd)
    assert p.returncode == EXIT_BROKEN_PIPE
    assert p.stderr == ""  # no traceback, no 'Exception ignored' at exit

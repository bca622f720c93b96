"""``jobenergy --json | head -1``: the reader closes the pipe early; jobenergy stops quietly."""

import os
import shutil
import subprocess
import sys

import pytest

from slurm_energy.cli.jobenergy import EXIT_BROKEN_PIPE
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

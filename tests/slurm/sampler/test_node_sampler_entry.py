"""The node sampler's command line (a systemd unit's ExecStart, docs/admins/node-sampler.md): a
wrong command line or an unusable spool is said on stderr with an exit status, not a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from slurm_energy.slurm.sampler.node import main


def test_a_wrong_command_line_is_usage_status_2(capsys):
    assert main([]) == 2
    assert main(["/var/spool/slurm-energy"]) == 2
    assert main(["", "n1"]) == 2
    err = capsys.readouterr().err
    assert err.count("usage: python -I -m slurm_energy.slurm.sampler.node SPOOL_DIR NODE [--stay]") == 3


def test_a_spool_that_cannot_be_made_is_status_1_and_names_it(tmp_path, capsys):
    (tmp_path / "file").write_text("not a directory")
    spool = tmp_path / "file" / "spool"
    assert main([str(spool), "n1"]) == 1
    err = capsys.readouterr().err
    assert f"node sampler: spool {spool} cannot be used" in err and "paths.spool_dir" in err


def test_a_missing_spool_is_made_root_only_and_an_idle_sampler_leaves(tmp_path):
    # the unit may start before the node's first Prolog made the spool; without --stay and with no
    # job on the node the sampler leaves at once
    spool = tmp_path / "spool"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.getcwd(),
           "SLURM_ENERGY_CONFIG": str(tmp_path / "site.yaml")}
    (tmp_path / "site.yaml").write_text(f"cluster_name: c1\npaths:\n  spool_dir: {spool}\n  log_dir: {tmp_path}/log\n"
                                        "node_meter:\n  source: none\n")
    p = subprocess.run([sys.executable, "-m", "slurm_energy.slurm.sampler.node", str(spool), "n1"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(spool).st_mode) == 0o700

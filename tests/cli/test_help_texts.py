"""Help and README say what the commands do (new-user findings)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _help(*argv):
    r = subprocess.run([sys.executable, "-m", *argv, "-h"], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    return " ".join(r.stdout.split())


def test_jobenergy_help_lists_every_measurement_status_including_no_data():
    out = _help("slurm_energy.cli.jobenergy")
    for status in ("complete", "partial", "failed", "running", "no_data"):  # core.Status values
        assert f"{status} (" in out, status
    assert out.count("no_data (") == 2  # the Status column epilog and the -s list


def test_collect_help_says_what_it_does_and_where_to_run_it():
    out = _help("slurm_energy.cli.main", "collect")
    for words in ("as root on every node", "queued", "finalizer died", "'running'", "sacct", "no_data"):
        assert words in out, words


def test_readme_says_install_print_needs_installed_hooks():
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "`--print` writes nothing and prints them only when the hooks" in text
    assert "exits 1" in text

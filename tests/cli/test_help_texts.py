"""Help and the docs say what the commands do (new-user findings)."""

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


def test_install_docs_say_install_print_needs_installed_hooks():
    text = " ".join((ROOT / "docs" / "admins" / "install.md").read_text().split())
    assert "`--print` writes nothing and prints them only when the hooks" in text
    assert "exits 1" in text


def test_track_examples_tag_flops_as_6_n_d():
    import re

    # the track() page and docstring: flops = 6 x model_params x tokens (Kaplan et al. 2020);
    # bert-small: 6 x 110e6 x 2e9 = 1.32e18 FLOPs
    for path in (ROOT / "docs" / "researchers" / "track.md", ROOT / "slurm_energy" / "api.py"):
        [m] = re.findall(r"t\.tag\(model_params=([\d_.e]+), tokens=([\d_.e]+), flops=([\d_.e]+)\)", path.read_text())
        n, d, flops = (float(x.replace("_", "")) for x in m)
        assert (n, d, flops) == (110e6, 2e9, 1.32e18), path
        assert abs(flops - 6 * n * d) <= 1e-9 * flops, path


def test_docs_say_testcluster_start_reinstalls_the_venv_without_setup_done():
    text = " ".join((ROOT / "docs" / "design" / "testing.md").read_text().split())
    assert ("`testcluster.sh start` first runs `scripts/setup.sh` unless `SETUP_DONE=1` is set: besides installing "
            "missing Debian packages, that re-installs **this checkout** (non-editable) into `/opt/slurm-energy/venv`"
            ) in text
    assert "`SETUP_DONE=1 bash scripts/testcluster.sh start`" in text
    # what the page describes is what the script does
    script = (ROOT / "scripts" / "testcluster.sh").read_text()
    assert '[ "${SETUP_DONE:-0}" = 1 ] || bash "$REPO/scripts/setup.sh"' in script

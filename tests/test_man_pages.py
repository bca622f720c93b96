"""jobenergy(1) and slurm-energy(1): generated from the parsers (scripts/man.py), so an option added
to a parser without regenerating the pages fails here, and they render with man-db without a troff
error (a help line starting with ' was once swallowed as a troff request)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_man_pages_match_the_parsers():
    r = subprocess.run([sys.executable, "scripts/man.py", "check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(("page", "expect"), [
    ("jobenergy", ["JOBENERGY(1)", "SYNOPSIS", "--parsable2", "'|'-separated, no trailing '|'",
                   "/etc/slurm-energy/site.yaml", "SLURM_ENERGY_CONFIG", "sacct(1)"]),
    ("slurm-energy", ["SLURM-ENERGY(1)", "slurm-energy collect", "slurm-energy install", "'|'-separated output",
                      "/var/spool/slurm-energy", "jobenergy(1)"]),
])
def test_man_page_renders(page, expect):
    env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "--warnings", "-l", str(ROOT / "man" / f"{page}.1")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    # groff's layout warnings ("cannot adjust line") are cosmetic; anything else is a markup error
    errors = [line for line in r.stderr.splitlines() if "cannot adjust line" not in line and "cannot break line" not in line]
    assert errors == []
    text = re.sub(".\b", "", r.stdout).replace(  # overstrike bold/underline off
        "\u2010", "-").replace("\u2212", "-")
    for want in expect:
        assert want in text, f"{page}(1) lacks {want!r}"

"""``pip install`` from a read-only checkout (a shared clone, a read-only mount) works for an
ordinary user: setuptools' scratch directories go to a temporary directory (setup.py), not into the
source tree (before: ``error: could not create 'build': Permission denied``). The build uses this
environment's setuptools (``--no-build-isolation``, no index: nothing downloaded)."""

from __future__ import annotations

import os
import shutil
import subprocess

from tests.helpers import ordinary_user as ou

SKIP = shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".cluster", "*.pyc", ".mypy_cache",
                              ".ruff_cache", ".pytest_cache")


def test_pip_install_from_a_read_only_checkout_as_an_ordinary_user():
    d = ou.user_dir("se-install-")
    try:
        src = d / "checkout"
        shutil.copytree(ou.REPO, src, ignore=SKIP)
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(src)], check=True)
        before = sorted(os.listdir(src))
        r = ou.run([ou.PY, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(d / "site"), str(src)], d, timeout=300, PIP_NO_CACHE_DIR="1")
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
        assert sorted(os.listdir(src)) == before  # nothing written into the tree (no build/, no egg-info)
        pkg = d / "site" / "slurm_energy"
        for f in ("templates/report.html.j2", "hooks/prolog", "site_config/site.yaml", "callbacks/hf.py"):
            assert (pkg / f).is_file(), f
        code = "import slurm_energy, sys; print(slurm_energy.__file__)"
        r = ou.run([ou.PY, "-c", code], d, PYTHONPATH=str(d / "site"))
        assert r.stdout.strip() == str(pkg / "__init__.py"), r.stderr
    finally:
        ou.remove(d)

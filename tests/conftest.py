"""Tests mirror the package (tests/accounting/ for slurm_energy/accounting/, ...). The shared
helpers are the packages ``tests.helpers`` (jobrecord_factory, report_records, store_backends,
published_runs, ...) and ``tests.fakes``; pytest puts the repository root on ``sys.path``
(``pythonpath`` in pyproject.toml), so every test imports them as ``from tests.helpers... import``."""

import os

import pytest

from tests.helpers.site_files import SiteConfigFiles


@pytest.fixture(autouse=True)
def _not_through_sudo(monkeypatch):
    """Readers act for the sudo caller (slurm_energy.cli.sudo_caller): a suite started with sudo
    must not turn the root-run tests into the invoking user's."""
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.delenv("SUDO_USER", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _unmount_the_suites_marks_tmpfs(tmp_path_factory):
    """The Prolog mounts a tmpfs on its marks dir where it can (below): the suite stops what it
    started, so no tmpfs of a finished run stays mounted under /tmp/pytest-of-root."""
    yield
    root = tmp_path_factory.getbasetemp() / "marks-root"
    if os.path.ismount(root):
        import subprocess

        subprocess.run(["/bin/umount", "-l", str(root)], check=False)


@pytest.fixture(autouse=True)
def _marks_root_of_the_suite(monkeypatch, tmp_path_factory):
    """A hook or sampler run by a test keeps its marks under the suite's tmp dir, not the host's
    /run/slurm-energy-marks (slurm_energy.sampling.marks.MARKS_ROOT): what one test leaves there
    changes what the next one's Prolog does (its sweep), and the host's dir is not the suite's."""
    monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(tmp_path_factory.getbasetemp() / "marks-root"))


@pytest.fixture
def site_config(tmp_path, monkeypatch) -> SiteConfigFiles:
    """The one way a test writes a site config: ``site_config(pue=1.5, location={"country": "FR"})``
    writes ``tmp_path/site.yaml``, loads it through the real loader and returns the SiteConfig;
    ``site_config.write(...)`` returns the file's path only (tests/helpers/site_files.py)."""
    return SiteConfigFiles(tmp_path, monkeypatch)


@pytest.fixture
def outside_slurm(monkeypatch, tmp_path, site_config):
    """A process outside any Slurm job, torchrun or ``slurm-energy run``, offline, with a site.yaml
    of its own in ``tmp_path`` (no RAPL: the TDP estimate); returns ``tmp_path``."""
    for var in ("SLURM_JOB_ID", "LOCAL_RANK", "SLURM_LOCALID", "SLURM_ENERGY_MARKS_DIR", "TORCHELASTIC_RUN_ID",
                "SLURM_ENERGY_RUN_MARKS"):
        monkeypatch.delenv(var, raising=False)
    site_config.write(bare=True, cluster_name="t", hardware={"rapl_root": f"{tmp_path}/no-powercap"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing may be downloaded
    return tmp_path


@pytest.fixture
def home():
    """A directory an ordinary user owns (:func:`ordinary_user.user_dir`), removed afterwards."""
    from tests.helpers import ordinary_user as ou

    d = ou.user_dir("se-home-")
    yield d
    ou.remove(d)

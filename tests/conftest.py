"""Tests mirror the package (tests/accounting/ for slurm_energy/accounting/, ...); the shared
helpers (jobrecord_factory, report_records, store_backends, published_runs, fakes/) live here and
are importable from every sub-directory."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _not_through_sudo(monkeypatch):
    """Readers act for the sudo caller (slurm_energy.cli.sudo_caller): a suite started with sudo
    must not turn the root-run tests into the invoking user's."""
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.delenv("SUDO_USER", raising=False)

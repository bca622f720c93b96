"""Spool trees as fixtures: one job attempt per :class:`~slurm_energy.slurm.attempt.AttemptState`
(:mod:`journal_trees`)."""

from __future__ import annotations

import pytest
from journal_trees import build_trees

from slurm_energy.slurm.attempt import Attempt, AttemptState


@pytest.fixture
def journal_trees(tmp_path) -> dict[AttemptState, Attempt]:
    """One attempt in each state, in one spool (``tmp_path/spool``)."""
    return build_trees(str(tmp_path / "spool"))

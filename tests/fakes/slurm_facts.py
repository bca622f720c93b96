"""A fake :class:`slurm_energy.slurm.clients.facts.SlurmFacts`: Slurm's answers, given by the test.

Callers' tests hand it to :func:`slurm_energy.slurm.clients.facts.use` (the ``no_slurm`` /
``slurm_says`` fixtures below) or to a ``facts=`` argument, instead of patching the commands. What it
answers has the shapes the real parsers return (their tests feed them Slurm's captured text,
tests/slurm/clients/): facts as :func:`~slurm_energy.slurm.clients.scontrol.parse_show_job`'s keys,
``no_data`` records as :func:`~slurm_energy.slurm.clients.sacct.record_from_sacct` builds them. A job
it is not told about is unknown, as it is to a host without slurmctld and slurmdbd.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from slurm_energy.model import JobRecord
from slurm_energy.slurm.clients.facts import UserText, ended_from, use
from slurm_energy.slurm.clients.scontrol import WAIT_S

NO_SLURM = "unavailable: no Slurm here"


@dataclass
class FakeSlurmFacts:
    """Slurm's answers. ``jobs``: slurmctld's facts by job id (``every_job``: for any other id);
    ``rows``: slurmdbd's ``State|Start|End`` facts by job id, once slurmctld forgot the job
    (``every_row``: for any other id); ``states``: slurmdbd's final state by job id; ``ended_jobs``:
    what ``ended_since`` finds (None: no accounting); ``text``: the user text by (job id, start);
    ``cpu_s``/``energy_j``: TotalCPU and ConsumedEnergyRaw by job id. ``asked`` lists every call,
    as (method, job id or since)."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    every_job: dict[str, Any] | None = None
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    every_row: dict[str, Any] | None = None
    states: dict[str, str] = field(default_factory=dict)
    ended_jobs: list[JobRecord] | None = None
    text: UserText = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    energy_j: dict[str, float] = field(default_factory=dict)
    asked: list[tuple[str, object]] = field(default_factory=list)

    def final_facts(self, job_id: str, attempt: int | None = None, wait_s: float = WAIT_S) -> dict[str, Any] | None:
        self.asked.append(("final_facts", job_id))
        got = self.jobs.get(job_id, self.every_job)
        return dict(got) if got is not None else None

    def final_state(self, job_id: str) -> tuple[str | None, str]:
        self.asked.append(("final_state", job_id))
        return (self.states[job_id], "") if job_id in self.states else (None, NO_SLURM)

    def ended(self, job_id: str, attempt: int = 0) -> tuple[bool | None, dict[str, Any] | None]:
        self.asked.append(("ended", job_id))
        got = self.jobs.get(job_id, self.every_job)
        return ended_from(dict(got) if got is not None else None, attempt, lambda: self.rows.get(job_id, self.every_row))

    def ended_since(self, since: float) -> list[JobRecord] | None:
        self.asked.append(("ended_since", since))
        return None if self.ended_jobs is None else [r.model_copy(deep=True) for r in self.ended_jobs]

    def user_text(self, job_ids: Iterable[str]) -> UserText:
        ids = set(job_ids)
        self.asked.append(("user_text", tuple(sorted(ids))))
        return {k: v for k, v in self.text.items() if k[0] in ids}

    def total_cpu(self, job_id: str) -> tuple[float | None, str]:
        self.asked.append(("total_cpu", job_id))
        return (self.cpu_s[job_id], "sacct TotalCPU") if job_id in self.cpu_s else (None, NO_SLURM)

    def consumed_energy(self, job_id: str) -> tuple[float | None, str]:
        self.asked.append(("consumed_energy", job_id))
        if job_id not in self.energy_j:
            return None, NO_SLURM
        return self.energy_j[job_id], "Slurm's ConsumedEnergyRaw (sacct), plugin acct_gather_energy/rapl"


@pytest.fixture()
def no_slurm() -> Iterator[FakeSlurmFacts]:
    """Slurm knows no job (no slurmctld, no slurmdbd here): every fact unknown, none asked of a client."""
    with use(FakeSlurmFacts()) as fake:
        yield fake


@pytest.fixture()
def slurm_says() -> Iterator[FakeSlurmFacts]:
    """A :class:`FakeSlurmFacts` in use that the test fills in (``slurm_says.jobs["7"] = {...}``)."""
    with use(FakeSlurmFacts()) as fake:
        yield fake

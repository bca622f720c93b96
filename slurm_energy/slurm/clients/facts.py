"""Slurm's facts about jobs, behind one small interface (CEEMS's ``Fetcher`` is the model).

:class:`SlurmFacts` is what the rest of the package asks Slurm: a job attempt's final facts
(slurmctld's ``scontrol show job``, slurmdbd's state once slurmctld has forgotten the job), the
jobs that ended since a time (``sacct``), a job's TotalCPU and its ConsumedEnergy.
:class:`SlurmCommands` is the one implementation, over the sacct and scontrol clients
(:mod:`.sacct`, :mod:`.scontrol`: a runner per query and a pure parser of its text). A test hands
its own implementation to :func:`use` (or to the callers that take a ``facts`` argument) instead of
patching the commands.

Off the Prolog/Epilog path: every method may run a client for seconds.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from slurm_energy.model import JobRecord
from slurm_energy.slurm.clients import sacct as _sacct
from slurm_energy.slurm.clients import scontrol as _scontrol
from slurm_energy.slurm.clients.command import SACCT, SCONTROL, Run, Sleep
from slurm_energy.slurm.clients.scontrol import UNFINISHED, WAIT_S, Facts

#: a job's user text by (job id, start time in epoch s): ``{"job_name", "work_dir"}``
UserText = dict[tuple[str, int], dict[str, str]]


class SlurmFacts(Protocol):
    """Slurm's facts about jobs. Every method answers "unknown" (None, or None with why) when Slurm
    cannot be asked or does not know; none raises."""

    def final_facts(self, job_id: str, attempt: int | None = None, wait_s: float = WAIT_S) -> Facts | None:
        """slurmctld's facts about ``job_id`` (``scontrol show job``: the keys of
        :func:`~slurm_energy.slurm.clients.scontrol.parse_show_job`), waiting up to ``wait_s`` s
        until the job has finished or, given its ``attempt`` (restart count), a later attempt shows;
        None when slurmctld does not know the job."""
        ...

    def final_state(self, job_id: str) -> tuple[str | None, str]:
        """slurmdbd's final state of the job's newest run (``sacct -o JobIDRaw,State``: no user text
        in the answer), ``(state, "")`` or ``(None, "unavailable: <why>")``."""
        ...

    def ended(self, job_id: str, attempt: int = 0) -> tuple[bool | None, Facts | None]:
        """(has this attempt ended?, facts) without waiting: slurmctld's facts while it remembers the
        job, else slurmdbd's ``State|Start|End``. ended is None when neither knows the job."""
        ...

    def ended_since(self, since: float) -> list[JobRecord] | None:
        """A ``no_data`` record (no job name or work dir) for every job that ran on a node and
        ended from ``since`` (epoch s) to now; None when accounting cannot be asked."""
        ...

    def user_text(self, job_ids: Iterable[str]) -> UserText:
        """The job name and work dir of each of ``job_ids``, by (job id, start time)."""
        ...

    def total_cpu(self, job_id: str) -> tuple[float | None, str]:
        """The job's TotalCPU (user + system, every step), CPU-s, and its label; None with why."""
        ...

    def consumed_energy(self, job_id: str) -> tuple[float | None, str]:
        """Slurm's ConsumedEnergyRaw, J, and its label; None with why (0 J: not collected)."""
        ...


@dataclass(frozen=True)
class SlurmCommands:
    """:class:`SlurmFacts` from Slurm's own clients (absolute paths: the finalizer runs with an
    empty PATH). ``run``/``sleep``: ``subprocess.run``/``time.sleep``, or a test's stand-ins that
    answer as the clients would."""

    sacct: str = SACCT
    scontrol: str = SCONTROL
    run: Run = subprocess.run
    sleep: Sleep = time.sleep

    def final_facts(self, job_id: str, attempt: int | None = None, wait_s: float = WAIT_S) -> Facts | None:
        return _scontrol.show_job(job_id, attempt=attempt, wait_s=wait_s, scontrol=self.scontrol, run=self.run,
                                  sleep=self.sleep)

    def final_state(self, job_id: str) -> tuple[str | None, str]:
        return _sacct.sacct_state(job_id, sacct=self.sacct, run=self.run, sleep=self.sleep)

    def ended(self, job_id: str, attempt: int = 0) -> tuple[bool | None, Facts | None]:
        return ended_from(self.final_facts(job_id, attempt=attempt, wait_s=0.0), attempt,
                          lambda: _sacct.final_row(job_id, sacct=self.sacct, run=self.run))

    def ended_since(self, since: float) -> list[JobRecord] | None:
        return _sacct.ended_since(since, sacct=self.sacct, run=self.run)

    def user_text(self, job_ids: Iterable[str]) -> UserText:
        return _sacct.user_text(job_ids, sacct=self.sacct, run=self.run)

    def total_cpu(self, job_id: str) -> tuple[float | None, str]:
        return _sacct.total_cpu_s(job_id, sacct=self.sacct, run=self.run, sleep=self.sleep)

    def consumed_energy(self, job_id: str) -> tuple[float | None, str]:
        return _sacct.consumed_energy(job_id, sacct=self.sacct, scontrol=self.scontrol, run=self.run,
                                      sleep=self.sleep)


def ended_from(ctld: Facts | None, attempt: int, dbd: _Later) -> tuple[bool | None, Facts | None]:
    """The rule of :meth:`SlurmFacts.ended`: slurmctld's facts when they hold a state (a later
    restart than ``attempt`` is an end too), else slurmdbd's row (``dbd()``, asked only then).
    (None, None) when neither knows the job. Pure given its inputs."""
    if ctld and ctld.get("job_state"):
        later = int(ctld.get("restarts", 0)) > attempt
        return later or ctld["job_state"] not in UNFINISHED, ctld
    row = dbd()
    if row is None:
        return None, None
    return row.get("job_state") not in UNFINISHED, row


class _Later(Protocol):
    def __call__(self) -> Facts | None: ...


_CURRENT: list[SlurmFacts] = [SlurmCommands()]
_F = TypeVar("_F", bound=SlurmFacts)


def current() -> SlurmFacts:
    """The process's :class:`SlurmFacts`: :class:`SlurmCommands` unless :func:`use` set another."""
    return _CURRENT[-1]


@contextmanager
def use(facts: _F) -> Iterator[_F]:
    """Within the block, :func:`current` is ``facts`` (a test's fake, or clients at other paths),
    in every thread of the process."""
    _CURRENT.append(facts)
    try:
        yield facts
    finally:
        _CURRENT.remove(facts)

"""The one small interface every output implements (after codecarbon's ``BaseOutput``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord


@dataclass
class SinkResult:
    """What one sink did with one record.

    ``ok`` False means the output was not (fully) produced; ``detail`` then says why, in words fit
    to be recorded on the job (``record.errors``). When ``ok``, ``detail`` says where it went
    (file paths, store URL without password) or is empty.
    """

    sink: str
    ok: bool
    detail: str = ""
    paths: tuple[str, ...] = ()


class Sink(Protocol):
    """An output for finished job records.

    ``publish`` reports failures it expects (a directory not writable) in its :class:`SinkResult`
    and raises only when the record could not be kept at all (the store is down): the caller then
    records that on the job's spool. ``keeps_errors`` says the sink persists ``record.errors``, so
    :func:`slurm_energy.pipeline.publish` re-publishes to it when a later sink fails.
    """

    name: str
    keeps_errors: bool

    def publish(self, record: JobRecord) -> SinkResult:
        """Send ``record`` to this output."""
        ...

"""The one small interface every output implements (after codecarbon's ``BaseOutput``).

A sink's ``publish(record)`` returns notes: one line per thing that did not reach the output, worded
to be recorded on the job (``"report not written: ..."``); an empty list means done. A sink raises
only when the record could not be kept at all (the store is down): the caller records that on the
job's spool. :func:`slurm_energy.pipeline.publish` hands a record to a list of sinks, appends the
notes to ``record.errors`` and re-publishes to the sinks before that keep errors (the store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord


class Sink(Protocol):
    """An output for job records: ``name`` (for logs), ``keeps_errors`` (it persists
    ``record.errors``, so it is given the record again when a later sink fails), ``publish``."""

    name: str
    keeps_errors: bool

    def publish(self, record: JobRecord) -> list[str]:
        """Send ``record`` to this output; the notes of what failed (empty: done)."""
        ...

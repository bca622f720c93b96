"""The one small interface every output implements (after codecarbon's ``BaseOutput``), and
:func:`publish`, which hands a record to a list of them (:func:`slurm_energy.pipeline.publish`).

A sink's ``publish(record)`` returns notes: one line per thing that did not reach the output, worded
to be recorded on the job (``"report not written: ..."``); an empty list means done. A sink raises
only when the record could not be kept at all (the store is down): the caller records that on the
job's spool.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def publish(record: JobRecord, sinks: Sequence[Sink], *, kept_by: Sequence[Sink] = ()) -> dict[str, list[str]]:
    """Hand ``record`` to each sink in order; returns each sink's notes by name (empty: done).

    A sink's notes (what did not reach it) are appended to ``record.errors`` (each error once), and
    the record is published again to the sinks that keep errors and already hold it: those before it in
    ``sinks``, and ``kept_by`` (where it was published before, e.g. the store), so the stored
    record says which output is missing. A sink that raises (the store is unusable) stops the rest.
    """
    from slurm_energy.accounting.merge import combine_errors
    from slurm_energy.model import text_safe

    text_safe(record)  # a user's non-UTF-8 text must not stop a sink (JSON, SQL, HTML, mail)
    results: dict[str, list[str]] = {}
    done: list[Sink] = list(kept_by)
    for sink in sinks:
        notes = sink.publish(record)
        results[sink.name] = notes
        if notes:
            record.errors = combine_errors(record.errors, notes)
            text_safe(record)
            for earlier in done:
                if earlier.keeps_errors and not results.get(earlier.name):
                    earlier.publish(record)
        done.append(sink)
    return results

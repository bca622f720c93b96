"""The node meter's readings, one file per node, shared by every job on it.

One process per node (:mod:`slurm_energy.slurm.nodemeter`) appends a line per reading to
``<spool_dir>/node-meter-<node>.jsonl`` (root-only, 0600): ``{"t": epoch s, "source": "<node_meter
source>", "reading": <Reading as in a sample file>}``. A job's finalizer reads the lines of its own
span (:func:`read_span`); no job reads the meter itself, so the meter's requests a minute do not grow
with the jobs on the node. Lines older than ``keep_s`` are dropped by :func:`trim`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from slurm_energy.core import Reading

#: Lines kept in the file: a job longer than this gets "not metered" for its start.
KEEP_S = 8 * 86400.0


@dataclass(frozen=True)
class MeterRow:
    """One meter reading at ``t`` (epoch s) from ``source`` (``acpi_power_meter``, ``redfish``, ...)."""

    t: float
    source: str
    reading: Reading


def meter_path(spool_dir: str, node: str) -> str:
    return os.path.join(spool_dir, f"node-meter-{node}.jsonl")


def append(path: str, row: MeterRow) -> None:
    """Append ``row`` (one write, O_APPEND: a reader never sees half a line from this writer)."""
    line = json.dumps({"t": row.t, "source": row.source, "reading": row.reading.to_dict()},
                      separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _t(line: str) -> float | None:
    """A row's time from its first key (``{"t":<epoch s>,...``, as :func:`append` writes it), without
    parsing the rest: a job's span is a few rows of a file of days."""
    if not line.startswith('{"t":'):
        return None
    end = line.find(",", 5)
    try:
        return float(line[5:end])
    except ValueError:
        return None


def _rows(path: str, lo: float = float("-inf"), hi: float = float("inf")) -> list[MeterRow]:
    out: list[MeterRow] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                t = _t(line)
                if t is not None and not lo <= t <= hi:
                    continue
                try:
                    d = json.loads(line)
                    out.append(MeterRow(float(d["t"]), str(d.get("source") or ""), Reading.from_dict(d["reading"])))
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line (the writer killed mid-line) or a damaged one
    except OSError:
        return []
    return out


def read_span(path: str, t0: float, t1: float, margin_s: float) -> list[MeterRow]:
    """The rows from the last one at or before ``t0 - margin_s``... to the first at or after ``t1``:
    every reading needed to integrate the meter over [t0, t1] (one on each side where there is one,
    within ``margin_s``), in time order."""
    rows = sorted(_rows(path, t0 - margin_s, t1 + margin_s), key=lambda r: r.t)
    inside = [r for r in rows if t0 <= r.t <= t1]
    before = [r for r in rows if t0 - margin_s <= r.t < t0][-1:]
    after = [r for r in rows if t1 < r.t <= t1 + margin_s][:1]
    return before + inside + after


def trim(path: str, now: float, keep_s: float = KEEP_S) -> int:
    """Drop rows older than ``now - keep_s`` (rewritten atomically). Returns the rows dropped."""
    from slurm_energy.fileio import atomic_write

    rows = _rows(path)
    keep = [r for r in rows if r.t >= now - keep_s]
    if len(keep) == len(rows):
        return 0
    atomic_write(path, "".join(json.dumps({"t": r.t, "source": r.source, "reading": r.reading.to_dict()},
                                          separators=(",", ":")) + "\n" for r in keep), mode=0o600)
    return len(rows) - len(keep)

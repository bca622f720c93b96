"""The per-job, per-node sample file: JSON lines, appended and flushed every sample.

A killed sampler loses at most one interval: every line is written whole and flushed (and
fsync'ed) before the next sleep. A torn last line (the process died mid-write) is skipped on read.

Line shape (one object per line)::

    {"t": epoch_s, "kind": "sample" | "final" | "cgroup_gone" | "epilog",
     "job": {"cpu_time_s": float|null, "mem_bytes": int|null, "max_mem_bytes": int|null,
             "pids": [int], "source": "cgroup-v1"|"cgroup-v2"|"psutil"|""},
     "node": {"cpu_busy_s", "cpu_total_s", "ncpu", "mem_used_bytes", "mem_total_bytes"},
     "readings": [Reading.to_dict(), ...]}
"""

from __future__ import annotations

import json
import os
from typing import Iterator

from slurm_energy.core import Sample


class SampleWriter:
    """Append-only writer; each :meth:`write` is one flushed (and fsync'ed) JSON line."""

    def __init__(self, path: str, fsync: bool = True):
        self.path = path
        self.fsync = fsync
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        self._f = os.fdopen(fd, "a", encoding="utf-8")

    def write(self, row: dict) -> None:
        """Append ``row`` as one line and flush it to the file (OSError propagates)."""
        self._f.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def read_samples(path: str) -> Iterator[dict]:
    """Yield rows of a sample file in order; a torn/garbled line is skipped, a missing file is empty."""
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and "t" in row:
                yield row


def read_sample_file(path: str) -> list[Sample]:
    """The sample file as typed :class:`~slurm_energy.core.Sample` s, in file order; a torn,
    garbled or malformed line is skipped, a missing file is empty. Reads files of every version
    written so far (unknown keys ignored; a MIG fraction kept as a flag is read into the field)."""
    out: list[Sample] = []
    for row in read_samples(path):
        try:
            out.append(Sample.from_dict(row))
        except (KeyError, TypeError, ValueError):
            continue
    return out

"""The per-job, per-node sample file: appended and flushed every sample.

Written in the compact format (:mod:`slurm_energy.sampling.samplecodec`: a schema line naming the
columns and the devices' static facts once, then one line of numbers per sample; about 300 bytes
per sample for 2 RAPL packages + 8 GPUs where JSON lines took 2.7 KB). Files written before it, one
JSON object per line (``Sample.to_dict``'s shape: docs/CONTRACTS.md, "Sample file"), are still read,
also when both kinds of lines are in one file (a sampler of the old version, then a newer Epilog).

A killed sampler loses at most one interval: every line is written whole and flushed (and
fsync'ed) before the next sleep. A torn last line (the process died mid-write) is skipped on read;
a writer that finds the file not ending in a newline starts on a new line, so a torn line never
takes the next writer's lines with it.

:class:`SampleReader` reads a growing file incrementally (only the lines added since its last
read), for the sampler's interim summaries.
"""

from __future__ import annotations

import json
import os
from typing import Any

from slurm_energy.core import JobUsage, NodeUsage, Reading, Sample
from slurm_energy.sampling.samplecodec import PREFIX, Encoder
from slurm_energy.sampling.sampletable import SampleTable


class SampleWriter:
    """Append-only writer; each :meth:`write` is one ``os.write`` of whole line(s) (a schema line
    first when the row's devices, methods or flags changed), fsync'ed when ``fsync`` is set. No
    Python buffer: what was written is in the kernel's page cache (a killed sampler loses nothing)."""

    def __init__(self, path: str, fsync: bool = True):
        self.path = path
        self.fsync = fsync
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._enc = Encoder()
        self._start_on_new_line()

    def _start_on_new_line(self) -> None:
        """A torn last line (a writer killed mid-line) is ended here, so it spoils only itself."""
        try:
            size = os.fstat(self._fd).st_size
            if not size:
                return
            rfd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                last = os.pread(rfd, 1, size - 1)
            finally:
                os.close(rfd)
        except OSError:
            return
        if last != b"\n":
            self._put("\n", False)

    def write(self, row: dict[str, Any]) -> None:
        """Append ``row`` (:meth:`slurm_energy.core.Sample.to_dict`'s shape), through
        :meth:`write_sample`. Raises OSError (file not writable), KeyError/TypeError/ValueError (a
        row without a numeric ``t``)."""
        s = Sample.from_dict(row)
        node = s.node if any(getattr(s.node, k) is not None for k in s.node.__slots__) else None
        self.write_sample(s.t, s.kind, s.job, node, s.readings)

    def write_sample(self, t: float, kind: str, job: JobUsage | None, node: NodeUsage | None,
                     readings: list[Reading], sync: bool = True) -> None:
        """Append one sample from its objects (:meth:`~slurm_energy.sampling.samplecodec.Encoder.sample_lines`),
        fsync'ed when ``sync`` and the writer's ``fsync`` are both set. Raises OSError (file not writable)."""
        self._put(self._enc.sample_lines(t, kind, job, node, readings), sync and self.fsync)

    def _put(self, text: str, sync: bool) -> None:
        data = text.encode()
        n = os.write(self._fd, data)
        while n < len(data):  # a regular file takes it whole; a short write (a full disk) goes on or raises
            data = data[n:]
            n = os.write(self._fd, data)
        if sync:
            os.fsync(self._fd)

    def flush(self) -> None:
        """fsync the file when ``fsync`` is set (every write is already in the kernel)."""
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class SampleReader:
    """Reads a sample file as it grows: each :meth:`read_table` returns the rows of the complete
    lines added since the previous read (a line not yet ended by its newline is left for the next
    one). Cost: the new lines only."""

    def __init__(self, path: str):
        self.path = path
        from slurm_energy.sampling.sampledecode import Decoder  # here: the Prolog writes, never reads

        self.offset = 0
        self._dec = Decoder()

    def read_table(self) -> SampleTable:
        """New rows as a :class:`SampleTable`, in file order; a garbled line is skipped, a missing
        file is empty."""
        table = SampleTable()
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return table
        end = data.rfind(b"\n") + 1
        self.offset += end
        block: list[str] = []
        sid = ""
        for line in data[:end].decode("utf-8", errors="replace").split("\n"):
            if block and not line.startswith(sid):
                self._dec.block(table, block)
                block = []
            if not line:
                continue
            if line.startswith(PREFIX):
                self._dec.schema(line)
            elif line[0] == "{":  # a JSON line (files from before the compact format)
                _json_row(table, line)
            else:
                if not block:
                    sid = line.partition(",")[0] + ","
                block.append(line)
        if block:
            self._dec.block(table, block)
        return table


def _json_row(table: SampleTable, line: str) -> None:
    try:
        row = json.loads(line)
    except ValueError:
        return
    if isinstance(row, dict) and "t" in row:
        try:
            table.append_row(row)
        except (KeyError, TypeError, ValueError):
            return


def read_sample_file(path: str) -> list[Sample]:
    """The sample file as typed :class:`~slurm_energy.core.Sample` s, in file order; a torn,
    garbled or malformed line is skipped, a missing file is empty. Reads files of every version
    written so far (unknown keys ignored; a MIG fraction kept as a flag is read into the field)."""
    return SampleReader(path).read_table().samples()


def read_sample_table(path: str) -> SampleTable:
    """The sample file as a :class:`SampleTable` (what the node summary reads; no object per reading)."""
    return SampleReader(path).read_table()

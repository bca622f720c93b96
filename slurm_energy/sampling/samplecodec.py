"""The compact sample-file format (v2): a schema line naming the columns once, then one short
line of numbers per sample (see :mod:`slurm_energy.sampling.samplefile` for the file's contract).

Schema line, written by a writer before its first row and again whenever a row's static part
changes (a device's method, flags or range; the job's cgroup source; a new device)::

    #S<sid> {"job": {"source": "cgroup-v2"} | null, "node": {"ncpu": 64, ...}, "ncols": [...],
             "dev": [{"device_class": ..., "device_id": ..., "method": ..., <static fields>,
                      "c": ["energy_uj", "power_w", ...]}, ...]}

Row line: ``<sid>,<t>,<kind>,<job cells>,<node cells>,<each device's cells>`` -- ``sid`` names the
schema (``<writer tag>.<n>``; the tag is unique to one writer in one process, so rows of writers
appending to one file never mix their columns); ``kind`` is empty for ``sample``. Cells:

* ``t`` (epoch s, kept to the microsecond), the counters (``energy_uj``, the job's and the node's
  CPU seconds, memory bytes) are integers: the difference from the same column's previous value
  in this writer's previous row, or the value itself where there is none (the writer's first row,
  or the previous value was None or not an integer). CPU seconds are integers of ms (node, rounded
  to 3 decimals by the sampler) or us (job); a value that is not exactly such an integer is written
  as ``~<float>`` (kept as it is, never rounded);
* other numbers (``power_w``, ``util``, ``mean_power_w``) as Python writes floats;
* ``proc_util``: ``pid:util;pid:util`` (``{}`` for none);
* ``pids``: space-separated, or ``=`` when the same as in the writer's previous row;
* an empty cell is None (not read at that instant): never 0.

A writer repeats its schema line at least every :data:`KEYFRAME_ROWS` rows, and every schema line
starts its differences afresh (the next row has every value whole). A reader keeps the same
per-writer state. A row whose cell count does not match its schema, or that does not end with a
newline, is skipped; a row whose cells do not parse (a damaged file) is skipped with the writer's
rows after it up to its next schema line, so no value is ever read off a damaged line.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from slurm_energy.core import JobUsage, NodeUsage, Reading
from slurm_energy.sampling.sampletable import DYNAMIC, proc_util_text  # DYNAMIC: a reading's row fields

PREFIX = "#S"
INT_DELTA = frozenset(("energy_uj", "mem_bytes"))
NODE_DYNAMIC = ("cpu_busy_s", "cpu_total_s", "mem_used_bytes")
#: A schema line (and whole values) at least this often: a damaged line costs at most this many rows
#: of its writer (their differences cannot be applied without it), about 2 bytes per sample.
KEYFRAME_ROWS = 720
#: float columns written as integer deltas at this scale (exact round trip checked per value)
SCALED = {"job.cpu_time_s": 1_000_000, "node.cpu_busy_s": 1000, "node.cpu_total_s": 1000}

_writer_ids = itertools.count()


def _b36(n: int) -> str:
    s = ""
    while True:
        n, r = divmod(n, 36)
        s = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + s
        if not n:
            return s


class Encoder:
    """Turns samples (their objects: :meth:`sample_lines`) into lines."""

    def __init__(self) -> None:
        self.tag = f"{_b36(os.getpid())}{_b36(next(_writer_ids))}"
        self._n = 0
        self._schema: tuple[Any, ...] | None = None
        self._sid = ""
        self._prev: dict[str, Any] = {}  # column key -> previous integer value (None: none)
        self._pids: Any = None
        self._rows = 0  # rows since the last schema line
        #: sample_lines' device columns: (field, 0 energy / 1 integer delta / 2 plain, state key,
        #: quantum) each, and the index of the reading each comes from
        self._plan: list[tuple[str, int, str, int | None]] = []
        self._plan_at: list[int] = []

    def _schema_line(self, static: Any, doc: dict[str, Any]) -> str:
        """Start a new schema (``static``: what later rows are compared with) and return its line."""
        self._sid = f"{self.tag}.{_b36(self._n)}"
        self._prev, self._pids, self._rows = {}, None, 1  # the next row: every value written whole
        self._schema, self._n = static, self._n + 1
        return f"{PREFIX}{self._sid} {json.dumps(doc, separators=(',', ':'))}\n"

    def sample_lines(self, t: float, kind: str, job: JobUsage | None, node: NodeUsage | None,
                     readings: list[Reading]) -> str:
        """The line(s) of one sample: a schema line first when its static part changed (compared
        as one tuple per reading, no dict per reading), then its row, the columns from a plan
        made with the schema line.

        Args: ``t`` epoch s; ``kind`` the row's kind (``sample``, ``start``, ...); ``job`` a
        :class:`~slurm_energy.core.JobUsage` or None; ``node`` a
        :class:`~slurm_energy.core.NodeUsage` or None (not read: ``{}``);
        ``readings`` :class:`~slurm_energy.core.Reading` s."""
        static = (None if job is None else (job.source or ""),
                  None if node is None else (node.ncpu, node.mem_total_bytes),
                  [_reading_key(r) for r in readings])
        out = ""
        self._rows += 1
        if static != self._schema or self._rows > KEYFRAME_ROWS:
            devs = [_dev_schema(r.to_dict()) for r in readings]
            doc = {"job": None if job is None else {"source": job.source or ""},
                   "node": {} if node is None else {"ncpu": node.ncpu, "mem_total_bytes": node.mem_total_bytes},
                   "ncols": [] if node is None else list(NODE_DYNAMIC), "dev": devs}
            out = self._schema_line(static, doc)
            plan = _plan(devs)
            self._plan_at = [c[0] for c in plan]
            self._plan = [c[1:] for c in plan]
        vals = [getattr(readings[i], c[0]) for i, c in zip(self._plan_at, self._plan)]
        return out + self._row(t, kind, job, node, vals)

    def _row(self, t: float, kind: str, job: JobUsage | None, node: NodeUsage | None, values: list[Any]) -> str:
        """One row line of the current schema: ``values`` are the device cells' values in plan order."""
        _int = self._int
        cells = [self._sid, _int("t", round(float(t) * 1_000_000)), _kind(kind)]
        if job is not None:
            cells += [self._scaled("job.cpu_time_s", job.cpu_time_s), _int("job.mem", job.mem_bytes),
                      _int("job.max", job.max_mem_bytes), self._pid_cell(job.pids[:256])]
        if node is not None:  # CPU seconds to the ms (read_node_stats rounds them so)
            cells += [self._scaled("node.cpu_busy_s", node.cpu_busy_s),
                      self._scaled("node.cpu_total_s", node.cpu_total_s),
                      _int("node.mem", node.mem_used_bytes)]
        for (attr, op, key, q), v in zip(self._plan, values):  # energy in quanta of q (a schema's counter)
            cells.append(_plain(attr, v) if op == 2 else _int(key, v // q if op == 0 and q else v))
        return ",".join(cells) + "\n"

    def _int(self, key: str, v: Any) -> str:
        if not isinstance(v, int) or isinstance(v, bool):
            self._prev[key] = None
            return "" if v is None else f"~{float(v)!r}"
        p = self._prev.get(key)
        self._prev[key] = v
        return str(v if p is None else v - p)

    def _scaled(self, key: str, v: Any) -> str:
        if v is None:
            self._prev[key] = None
            return ""
        scale = SCALED[key]
        iv = round(float(v) * scale)
        if iv / scale != v:  # not exactly a multiple of 1/scale: written as it is
            self._prev[key] = None
            return f"~{float(v)!r}"
        return self._int(key, iv)

    def _pid_cell(self, pids: list[int]) -> str:
        if pids == self._pids:
            return "="
        self._pids = list(pids)
        return " ".join(str(p) for p in pids)


def _dev_schema(r: dict[str, Any]) -> dict[str, Any]:
    d = {k: v for k, v in r.items() if k not in DYNAMIC}
    d["c"] = [k for k in DYNAMIC if r.get(k) is not None]
    q, e = r.get("energy_resolution_uj"), r.get("energy_uj")
    if isinstance(q, int) and q > 1 and isinstance(e, int) and e % q == 0:
        d["q"] = q  # the counter counts in quanta of q uJ (NVML: mJ): its cells are in quanta
    return d


def _reading_key(r: Any) -> tuple[Any, ...]:
    """A :class:`~slurm_energy.core.Reading`'s static part as one tuple: equal for two readings
    exactly when :func:`_dev_schema` of their ``to_dict()`` s is (the fields outside
    :data:`DYNAMIC`, which dynamic ones are present, the energy quantum)."""
    e, q = r.energy_uj, r.energy_resolution_uj
    quantum = q if isinstance(q, int) and q > 1 and isinstance(e, int) and e % q == 0 else None
    return (r.device_class, r.device_id, r.method, r.max_energy_range_uj, r.max_power_w, q, r.power_accuracy_w,
            tuple(r.flags) if r.flags else (), r.mig_fraction, quantum, e is not None, r.power_w is not None,
            r.mean_power_w is not None, r.util is not None, r.mem_bytes is not None, r.proc_util is not None)


def _plan(devs: list[dict[str, Any]]) -> list[tuple[int, str, int, str, int | None]]:
    """The row's device cells for a schema's ``dev`` list: (reading index, field, 0 energy / 1
    integer delta / 2 plain, state key, quantum) per cell, in the row's order."""
    plan: list[tuple[int, str, int, str, int | None]] = []
    for i, d in enumerate(devs):
        key = str(d.get("device_id"))
        for c in d["c"]:
            if c == "energy_uj":
                plan.append((i, c, 0, energy_key(key, d), d.get("q")))
            elif c in INT_DELTA:
                plan.append((i, c, 1, key + "." + c, None))
            else:
                plan.append((i, c, 2, "", None))
    return plan


def energy_key(key: str, d: dict[str, Any]) -> str:
    """The energy column's state key: per quantum, so a change of unit starts afresh."""
    return f"{key}.energy_uj/{d.get('q', 1)}"


def _kind(kind: Any) -> str:
    return "" if kind in (None, "sample") else str(kind)


def _plain(col: str, v: Any) -> str:
    if v is None:
        return ""
    if col == "proc_util":
        return proc_util_text(v)
    return repr(v) if isinstance(v, float) else str(v)

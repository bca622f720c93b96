"""A sample file as columns (:class:`SampleTable`): what the node summary reads, without one object
per reading (a 24 h job at 5 s on a node with 10 devices is 172,800 readings).

Rows are samples in file order; each device has the rows it was read in, the static part of each
reading (method, flags, counter range...: a dict shared by every reading of one schema line) and
one list per dynamic field (``energy_uj``, ``power_w``, ``mean_power_w``, ``util``, ``mem_bytes``,
``proc_util``; None where not read). ``proc_util`` is kept as its compact text (``pid:util;...``,
``{}`` for none; :func:`proc_util_dict` reads it).
:meth:`SampleTable.samples` and :meth:`SampleTable.device_series` give the typed
:class:`~slurm_energy.core.Sample` / :class:`~slurm_energy.core.Reading` views.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.core import JobUsage, NodeUsage, Reading, Sample

#: A reading's fields written in each row (the rest of a reading is static: the schema line's).
DYNAMIC = ("energy_uj", "power_w", "mean_power_w", "util", "mem_bytes", "proc_util")
NODE_FIELDS = ("cpu_busy_s", "cpu_total_s", "ncpu", "mem_used_bytes", "mem_total_bytes")
_READING_FIELDS = frozenset(Reading.__dataclass_fields__)


@dataclass
class DeviceColumns:
    """One device's readings: ``rows`` (indices into the table), ``static`` (per reading: the
    reading's fields other than :data:`DYNAMIC`) and ``vals`` (per dynamic field, per reading)."""

    device_id: str
    rows: list[int] = field(default_factory=list)
    static: list[dict[str, Any]] = field(default_factory=list)
    vals: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in DYNAMIC})

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class SampleTable:
    """Samples as columns (see the module docstring); ``job_present[i]`` False = no job usage in
    row i (a hook's own reading)."""

    t: list[float] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    job_present: list[bool] = field(default_factory=list)
    job_cpu: list[float | None] = field(default_factory=list)
    job_mem: list[int | None] = field(default_factory=list)
    job_max_mem: list[int | None] = field(default_factory=list)
    job_pids: list[list[int]] = field(default_factory=list)
    job_source: list[str] = field(default_factory=list)
    node: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in NODE_FIELDS})
    devices: dict[str, DeviceColumns] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.t)

    def device(self, dev_id: str) -> DeviceColumns:
        d = self.devices.get(dev_id)
        if d is None:
            d = self.devices[dev_id] = DeviceColumns(dev_id)
        return d

    def append_row(self, row: dict[str, Any]) -> None:
        """Append one row given as a dict (a JSON line, :meth:`Sample.to_dict`); raises
        KeyError/TypeError/ValueError for a row without a numeric ``t`` (nothing appended then)."""
        t = float(row["t"])
        job = row.get("job")
        node = row.get("node")
        node = node if isinstance(node, dict) else {}
        readings = [r for r in row.get("readings") or [] if isinstance(r, dict)]
        i = len(self.t)
        self.t.append(t)
        self.kind.append(str(row.get("kind") or "sample"))
        job = job if isinstance(job, dict) else None
        self.job_present.append(job is not None)
        job = job or {}
        self.job_cpu.append(job.get("cpu_time_s"))
        self.job_mem.append(job.get("mem_bytes"))
        self.job_max_mem.append(job.get("max_mem_bytes"))
        self.job_pids.append(list(job.get("pids") or []))
        self.job_source.append(job.get("source") or "")
        for k in NODE_FIELDS:
            self.node[k].append(node.get(k))
        for r in readings:
            d = self.device(str(r.get("device_id")))
            d.rows.append(i)
            d.static.append({k: v for k, v in r.items() if k not in DYNAMIC and k in _READING_FIELDS})
            for k in DYNAMIC:
                v = r.get(k)
                d.vals[k].append(proc_util_text(v) if k == "proc_util" and v is not None else v)

    def extend(self, other: SampleTable, start: int = 0, stop: int | None = None) -> None:
        """Append ``other``'s rows ``start`` to ``stop`` (default: its end; its devices' static
        dicts shared, not copied)."""
        stop = len(other.t) if stop is None else min(stop, len(other.t))
        base = len(self.t) - start
        for name in ("t", "kind", "job_present", "job_cpu", "job_mem", "job_max_mem", "job_pids", "job_source"):
            getattr(self, name).extend(getattr(other, name)[start:stop])
        for k, col in self.node.items():
            col.extend(other.node[k][start:stop])
        from bisect import bisect_left  # here: the Prolog writes a row with this module, never extends one

        for dev_id, od in other.devices.items():
            j, e = bisect_left(od.rows, start), bisect_left(od.rows, stop)  # rows are ascending
            if j == e:
                continue
            d = self.device(dev_id)
            d.rows.extend(i + base for i in od.rows[j:e])
            d.static.extend(od.static[j:e])
            for k, col in d.vals.items():
                col.extend(od.vals[k][j:e])

    def head(self, n: int) -> SampleTable:
        """A table of the first ``n`` rows."""
        out = SampleTable()
        out.extend(self, 0, n)
        return out

    def last_rows(self, n: int = 1) -> SampleTable:
        """A table of the last ``n`` rows."""
        out = SampleTable()
        out.extend(self, max(0, len(self.t) - n))
        return out

    def is_sorted(self) -> bool:
        t = self.t
        return all(a <= b for a, b in itertools.pairwise(t))

    def sorted(self) -> SampleTable:
        """The table with rows in time order (stable): itself when already sorted."""
        if self.is_sorted():
            return self
        out = SampleTable()
        for s in sorted(self.samples(), key=lambda r: r.t):
            out.append_row(s.to_dict())
        return out

    def samples(self, readings: bool = True) -> list[Sample]:
        """Typed samples; ``readings=False``: without readings (the node's and job's columns only)."""
        out = []
        for i in range(len(self.t)):
            job = (JobUsage(self.job_cpu[i], self.job_mem[i], self.job_max_mem[i], self.job_pids[i], self.job_source[i])
                   if self.job_present[i] else None)
            node = NodeUsage(*(self.node[k][i] for k in NODE_FIELDS))
            out.append(Sample(self.t[i], self.kind[i], job, node, []))
        if readings:
            for d in self.devices.values():
                for k, (_, rd) in zip(d.rows, self.device_series(d.device_id)):
                    out[k].readings.append(rd)
        return out

    def device_series(self, dev_id: str) -> list[tuple[float, Reading]]:
        """The device's readings as ``[(t, Reading)]`` in row order."""
        d = self.devices[dev_id]
        out = []
        for j, i in enumerate(d.rows):
            kw = dict(d.static[j])
            for k in DYNAMIC:
                v = d.vals[k][j]
                if v is not None:
                    kw[k] = proc_util_dict(v) if k == "proc_util" else v
            out.append((self.t[i], Reading.from_dict(kw)))
        return out


def proc_util_text(v: Any) -> str:
    """``{pid: util}`` as compact text ``pid:util;...`` (``{}`` when empty)."""
    if isinstance(v, str):
        return v
    return ";".join(f"{p}:{'' if u is None else repr(float(u))}" for p, u in v.items()) if v else "{}"


def proc_util_dict(text: str) -> dict[int, float | None]:
    """Inverse of :func:`proc_util_text`. Raises ValueError on text it did not write."""
    if text == "{}":
        return {}
    out = {}
    for item in text.split(";"):
        p, _, u = item.partition(":")
        out[int(p)] = float(u) if u else None
    return out


def table_from(rows: Any) -> SampleTable:
    """A :class:`SampleTable` from a table (itself), or from Samples or row dicts (malformed rows
    skipped, as the sample file's reader does)."""
    if isinstance(rows, SampleTable):
        return rows
    out = SampleTable()
    for r in rows:
        try:
            out.append_row(r.to_dict() if isinstance(r, Sample) else r)
        except (KeyError, TypeError, ValueError):
            continue
    return out

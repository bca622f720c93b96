"""Reading the compact sample-file format (:mod:`slurm_energy.sampling.samplecodec` writes it and
describes it): schema lines and blocks of row lines into a
:class:`~slurm_energy.sampling.sampletable.SampleTable`, column by column."""

from __future__ import annotations

import itertools
import json
from typing import Any

from slurm_energy.sampling.samplecodec import INT_DELTA, PREFIX, SCALED, energy_key
from slurm_energy.sampling.sampletable import SampleTable


class Decoder:
    """Decodes lines into a :class:`~slurm_energy.sampling.sampletable.SampleTable`, column by
    column for each run of rows of one schema; keeps each writer's state, so lines must be fed in
    file order (:meth:`feed` may be called again with the lines added since)."""

    def __init__(self) -> None:
        self._schemas: dict[str, dict[str, Any]] = {}
        self._prev: dict[str, dict[str, Any]] = {}  # writer tag -> column key -> previous int
        self._pids: dict[str, list[int]] = {}
        self._broken: set[str] = set()  # writers with a damaged line since their last schema line

    def schema(self, line: str) -> None:
        """Take a schema line (``#S<sid> {json}``); a bad one is ignored (its rows are skipped)."""
        sid, _, doc = line[len(PREFIX):].partition(" ")
        try:
            d = json.loads(doc)
            devs = d.get("dev") or []
            d["want"] = 3 + (4 if d.get("job") is not None else 0) + len(d.get("ncols") or []) + sum(len(x["c"]) for x in devs)
            d["static"] = [{k: v for k, v in x.items() if k not in ("c", "q")} for x in devs]
        except (ValueError, TypeError, KeyError, AttributeError):
            return
        tag = sid.partition(".")[0]
        self._prev[tag], self._pids[tag] = {}, []  # the writer's next row has every value whole
        self._broken.discard(tag)
        self._schemas[sid] = d

    def block(self, table: SampleTable, lines: list[str]) -> None:
        """Append data lines of one schema to ``table``: lines of another cell count are skipped;
        a run whose cells do not parse is decoded line by line (bad lines skipped)."""
        sid = lines[0].partition(",")[0]
        sc = self._schemas.get(sid)
        if sc is None:
            return
        want = sc["want"]
        flat = ",".join(lines).split(",")
        if len(flat) != want * len(lines):  # some line has another cell count: keep the others
            lines = [ln for ln in lines if ln.count(",") == want - 1]
            if not lines:
                return
            flat = ",".join(lines).split(",")
        tag = sid.partition(".")[0]
        if tag in self._broken:
            return
        prev = self._prev.setdefault(tag, {})
        saved, pids = dict(prev), self._pids.get(tag, [])
        try:
            self._columns(table, sc, tag, prev, [flat[j::want] for j in range(want)])
        except (ValueError, TypeError):
            prev.clear()
            prev.update(saved)
            self._pids[tag] = pids
            for ln in lines:  # a bad cell somewhere: the lines before it are kept
                try:
                    self._columns(table, sc, tag, prev, [[c] for c in ln.split(",")])
                except (ValueError, TypeError):
                    # the writer's later lines hold differences from this one: skipped until its
                    # next schema line (never read off by the damaged line's values)
                    self._broken.add(tag)
                    return

    def _columns(self, table: SampleTable, sc: dict[str, Any], tag: str, prev: dict[str, Any],
                 cols: list[list[str]]) -> None:
        m = len(cols[0])
        base = len(table.t)
        t = [v / 1_000_000 for v in _ints(prev, "t", cols[1])]
        kinds = [k or "sample" for k in cols[2]]
        job = sc.get("job")
        i = 3
        new: dict[str, list[Any]] = {}
        if job is not None:
            new["cpu"] = _scaled(prev, "job.cpu_time_s", cols[i])
            new["mem"] = _ints(prev, "job.mem", cols[i + 1])
            new["max"] = _ints(prev, "job.max", cols[i + 2])
            new["pids"] = self._pid_col(tag, cols[i + 3])
            i += 4
        node = {}
        for k in sc.get("ncols") or []:
            node[k] = _ints(prev, "node.mem", cols[i]) if k == "mem_used_bytes" else _scaled(prev, "node." + k, cols[i])
            i += 1
        devs = []
        for d, st in zip(sc["dev"], sc["static"]):
            key = str(d.get("device_id"))
            vals = {}
            for c in d["c"]:
                if c == "energy_uj":
                    q = d.get("q", 1)
                    v = _ints(prev, energy_key(key, d), cols[i])
                    vals[c] = v if q == 1 else [x * q if isinstance(x, int) else x for x in v]
                else:
                    vals[c] = _ints(prev, key + "." + c, cols[i]) if c in INT_DELTA else _plain_col(c, cols[i])
                i += 1
            devs.append((key, st, vals))
        # all parsed: append (nothing is appended for a block that raised above)
        table.t.extend(t)
        table.kind.extend(kinds)
        table.job_present.extend([job is not None] * m)
        for name, attr in (("cpu", table.job_cpu), ("mem", table.job_mem), ("max", table.job_max_mem)):
            attr.extend(new.get(name) or [None] * m)
        table.job_pids.extend(new.get("pids") or [[] for _ in range(m)])
        table.job_source.extend([(job or {}).get("source") or ""] * m)
        static_node = sc.get("node") or {}
        for k, col in table.node.items():
            col.extend(node[k] if k in node else [static_node.get(k)] * m)
        for key, st, vals in devs:
            dc = table.device(key)
            dc.rows.extend(range(base, base + m))
            dc.static.extend([st] * m)
            for k, col in dc.vals.items():
                col.extend(vals[k] if k in vals else [None] * m)

    def _pid_col(self, tag: str, cells: list[str]) -> list[list[int]]:
        out = []
        cur = self._pids.get(tag, [])
        for c in cells:
            if c != "=":
                cur = [int(p) for p in c.split()]
            out.append(cur)
        self._pids[tag] = cur
        return out


def _ints(prev: dict[str, Any], key: str, cells: list[str]) -> list[Any]:
    """A column of integer cells: deltas from the previous value (the value itself after a None)."""
    p = prev.get(key)
    if "" not in cells and "~" not in ",".join(cells):  # no None, no literal: one C-level pass
        # the first cell is the value itself when there is no previous one: accumulating from 0 gives it
        vals = list(itertools.accumulate(map(int, cells), initial=p or 0))[1:]
        prev[key] = vals[-1]
        return vals
    out: list[Any] = []
    for c in cells:
        if not c:
            p = None
            out.append(None)
        elif c[0] == "~":
            p = None
            out.append(_num(c[1:]))
        else:
            p = int(c) if p is None else p + int(c)
            out.append(p)
    prev[key] = p
    return out


def _num(s: str) -> Any:
    try:
        return int(s)
    except ValueError:
        return float(s)


def _scaled(prev: dict[str, Any], key: str, cells: list[str]) -> list[float | None]:
    scale = SCALED[key]
    return [v / scale if isinstance(v, int) else v for v in _ints(prev, key, cells)]


def _plain_col(col: str, cells: list[str]) -> list[Any]:
    if col == "proc_util":
        return [c or None for c in cells]  # kept as text (sampletable.proc_util_dict reads it)
    if "" not in cells:
        return list(map(float, cells))
    return [float(c) if c else None for c in cells]

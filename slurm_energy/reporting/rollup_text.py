"""The month's rollup as CSV or JSON text, from the rows of :func:`slurm_energy.store.rollup.rollup_rows`,
without pandas or pydantic (``slurm-energy rollup --format csv|json`` then starts as fast as the
table). The text is what pandas' ``DataFrame.to_csv(index=False)`` of
:func:`slurm_energy.reporting.rollup_table.rows_frame` gave (tests compare them): a header of the
column names, Python's ``repr`` of floats, an empty cell for None (nothing measured).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

#: the columns after the group name (as :data:`slurm_energy.store.rollup.COLUMNS`)
COLUMNS = ("jobs", "unmeasured_jobs", "it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh",
           "gpu_idle_kwh")
NOTE = ("measured_it_kwh: energy counters or sampled power; estimated_it_kwh: TDP model; unmeasured jobs are "
        "counted in unmeasured_jobs, never summed as 0; gpu_idle_kwh: GPU energy while allocated but idle "
        "(utilisation 0, power at idle draw), measured in an idle state (part of it_kwh)")


def csv_text(rows: list[dict[str, Any]], by: str) -> str:
    """CSV of the rollup rows (``{by, jobs, unmeasured_jobs, it_kwh, ...}``; kWh, kgCO2e): the
    header, then one line per group; None is an empty cell."""
    import csv
    import io

    from slurm_energy.reporting.csvsafe import safe_cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow((by, *COLUMNS))
    for r in rows:
        w.writerow([safe_cell(r[by]) if isinstance(r[by], str) else r[by], *(r[k] for k in COLUMNS)])  # a name: never a formula
    return buf.getvalue()


def json_text(rows: list[dict[str, Any]], by: str, month: str, timezone: str,
              top_gpu_idle: Optional[list[dict[str, Any]]] = None) -> str:
    """JSON of the rollup: month, time zone, ``by``, the rows (counts as integers, energies as
    floats or null), the month's top jobs by GPU-idle energy (``top_gpu_idle``:
    :func:`slurm_energy.store.rollup.top_gpu_idle`'s rows) and the note on measured / estimated / unmeasured."""
    import json

    def num(v: Any) -> Optional[float]:
        return None if v is None else float(v)

    out = [{by: r[by], **{k: (r[k] if k in ("jobs", "unmeasured_jobs") else num(r[k])) for k in COLUMNS}}
           for r in rows]
    return json.dumps({"month": month, "timezone": timezone, "by": by, "rows": out,
                       "top_gpu_idle_jobs": list(top_gpu_idle or []), "note": NOTE}, indent=2) + "\n"


def write_text(text: str, out: Optional[str]) -> str:
    """``text`` to ``out`` (atomically: temp file + rename) or, for None, to stdout. Returns the
    path written ("" for stdout). Raises OSError."""
    if not out:
        sys.stdout.write(text)
        return ""
    tmp = f"{out}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out)
    return out

"""The month's rollup as CSV, JSON or an HTML report an admin can hand on.

Input: the rows of :func:`slurm_energy.store.rollup.month_rollup` (one dict per user, account or
partition; its sums are the numbers shown) and the month's final records (for the top jobs, the
method coverage and the carbon facts used: listed, not re-summed). Every energy number says which
part was measured (energy counter or integrated sampled power) and which estimated (TDP model);
unmeasured jobs are counted, never summed as 0.

HTML: ``templates/monthly.html.j2`` with two matplotlib bar charts (IT kWh per group, measured and
estimated stacked; kgCO2e per group) inlined as SVG; written atomically (temp file + rename).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from slurm_energy.jobid import display_id
from slurm_energy.model import JobRecord, Method
from slurm_energy.units import J_PER_KWH, sum_known

TOP_JOBS = 10
MAX_BARS = 30  # groups drawn; the rest are in the table


def bar_charts_svg(rows: list[dict[str, Any]], by: str) -> str:
    """Two horizontal bar charts as one inline SVG: IT kWh per group (measured | estimated stacked) and
    kgCO2e per group. ``rows`` as :func:`render_html`'s; groups without a number get no bar (never 0)."""
    from matplotlib.figure import Figure  # no pyplot: no global state

    from slurm_energy.reporting.plot import svg_text

    rows = sorted(rows, key=lambda r: r["it_kwh"] or 0.0, reverse=True)[:MAX_BARS]
    names = [str(r[by]) for r in rows][::-1]
    meas = [r["measured_it_kwh"] or 0.0 for r in rows][::-1]
    est = [r["estimated_it_kwh"] or 0.0 for r in rows][::-1]
    co2 = [r["co2e_kg"] or 0.0 for r in rows][::-1]
    h = max(2.5, 0.35 * len(names) + 1.2)
    fig = Figure(figsize=(11, h))
    a1, a2 = fig.subplots(1, 2)
    a1.barh(names, meas, color="#1f77b4", label="measured (counter / sampled power)")
    a1.barh(names, est, left=meas, color="#ff7f0e", hatch="//", label="estimated (TDP model)")
    a1.set_xlabel("IT energy, kWh")
    a1.legend(loc="lower right", fontsize=8)
    a2.barh(names, co2, color="#2ca02c")
    a2.set_xlabel("kgCO2e")
    a2.set_yticklabels([])
    fig.suptitle(f"per {by}")
    fig.tight_layout()
    return svg_text(fig)


def top_jobs(records: list[JobRecord], n: int = TOP_JOBS) -> list[dict[str, Any]]:
    """The ``n`` jobs with the most IT energy (unmeasured jobs last, never as 0)."""
    def key(r: JobRecord) -> float:
        return r.it_kwh if r.it_kwh is not None else -1.0

    out = []
    for r in sorted(records, key=key, reverse=True)[:n]:
        est = sum(j for c, j in r.energy_it_j.items() if j is not None and r.methods.get(c) == Method.TDP_ESTIMATE)
        out.append({"job_id": display_id(r),
                    "user": r.user, "account": r.account, "partition": r.partition, "it_kwh": r.it_kwh,
                    "estimated_kwh": est / J_PER_KWH if r.it_kwh is not None else None, "co2e_kg": r.co2e_kg,
                    "methods": r.method_summary, "status": r.status_text, "elapsed_h": r.elapsed_s / 3600})
    return out


def method_coverage(records: list[JobRecord]) -> list[dict[str, Any]]:
    """Per device class, how many jobs had it measured by each method (rows: class, method, jobs)."""
    c: Counter[tuple[str, str]] = Counter((cls, Method(m).value) for r in records for cls, m in r.methods.items())
    return [{"device_class": k[0], "method": k[1], "jobs": v} for k, v in sorted(c.items())]


def carbon_used(records: list[JobRecord]) -> list[dict[str, Any]]:
    """The distinct (PUE, CI, sources) applied to the month's jobs, with how many jobs each."""
    c: Counter[tuple[float, str, float, str, bool]] = Counter(
        (r.carbon.pue, r.carbon.pue_source, r.carbon.ci_g_per_kwh, r.carbon.ci_source,
         r.carbon.hourly) for r in records)
    return [{"pue": k[0], "pue_source": k[1], "ci_g_per_kwh": k[2], "ci_source": k[3], "hourly": k[4], "jobs": v}
            for k, v in c.most_common()]


def render_html(rows: list[dict[str, Any]], records: list[JobRecord], by: str, month: str, timezone: str = "UTC") -> str:
    """The HTML report (see module doc) as text. ``rows``: :func:`slurm_energy.store.rollup.month_rollup`'s
    (``by``, jobs, unmeasured_jobs as ints; kWh and kgCO2e as floats, None where nothing was measured);
    ``timezone``: the IANA zone the month is in."""
    from slurm_energy.reporting.report import template_env

    env = template_env()  # the job report's environment over the shipped templates
    env.filters["n"] = lambda v, fmt="{:.4g}": "n/a" if v is None else fmt.format(v)
    total = {k: sum_known([r[k] for r in rows])
             for k in ("it_kwh", "facility_kwh", "co2e_kg", "measured_it_kwh", "estimated_it_kwh", "gpu_idle_kwh",
                       "co2e_gross_kg", "embodied_kg")}
    total["jobs"] = sum(r["jobs"] for r in rows)
    total["attempts"] = sum(r["attempts"] for r in rows)
    total["unmeasured_jobs"] = sum(r["unmeasured_jobs"] for r in rows)
    html: str = env.get_template("monthly.html.j2").render(
        by=by, month=month, timezone=timezone, rows=rows, total=total, chart=bar_charts_svg(rows, by) if rows else "",
        top=top_jobs(records), coverage=method_coverage(records), carbon=carbon_used(records))
    return html

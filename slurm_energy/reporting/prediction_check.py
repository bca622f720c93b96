"""Predicted vs measured for a job that declared its FLOPs: the rows the report (HTML, CSV) and
``jobenergy -l`` / ``--json`` show. Formatting only; the numbers come from
:func:`slurm_energy.accounting.calibration.check_job`.
"""

from __future__ import annotations

from typing import Any

from slurm_energy.model import JobRecord

#: Header of the CSV block and of ``jobenergy -l``'s table.
HEADER = ["JobID", "Quantity", "Predicted", "Measured", "Unit", "Basis"]


def check(record: JobRecord) -> dict[str, Any] | None:
    """:func:`~slurm_energy.accounting.calibration.check_job` for ``record``; None if the job
    declared no FLOPs. A failing look-up never breaks a report: it becomes the ``note``."""
    from slurm_energy.accounting.calibration import check_job, declared_flops

    if declared_flops(record) is None:
        return None
    try:
        return check_job(record)
    except Exception as e:
        return {"flops": declared_flops(record), "note": f"comparison failed: {e}"}


def _g(v: float | None, digits: int = 4) -> str:
    return "" if v is None else f"{v:.{digits}g}"


def rows(c: dict[str, Any], jobid: str) -> list[list[str]]:
    """Rows ``[jobid, quantity, predicted, measured, unit, basis]``; one ``note`` row when the job
    could not be compared (no measured GPU energy, unknown GPU model)."""
    out = [[jobid, "declared work", _g(c.get("flops")), "", "FLOPs", "tags: flops, or 6 x model_params x tokens"]]
    if c.get("gpu_kwh_measured") is None:
        return out + [[jobid, "comparison", "", "", "", c.get("note") or "not available"]]
    n = f"{c['n_gpus']:g} x {c['gpu_model']}"
    return out + [
        [jobid, "FLOP/s fraction", "", _g(c["flops_frac_measured"], 3), "achieved / rated",
         f"declared FLOPs / ({n} x rated FLOP/s x {c['elapsed_s']:.0f} s)"],
        [jobid, "power fraction", _g(c["power_frac_default"], 3), _g(c["power_frac_measured"], 3), "drawn / rated",
         "predicted: " + c["power_frac_default_source"]],
        [jobid, "GPU energy", _g(c["gpu_kwh_predicted"]), _g(c["gpu_kwh_measured"]), "kWh",
         f"predicted = {n} x rated W x power fraction x job time; error {c['gpu_kwh_error_pct']:+.1f} %"],
        [jobid, "node overhead", "", _g(c.get("node_w_per_gpu_measured")), "W per GPU",
         "measured CPU + RAM energy / (GPUs x job time)" if c.get("node_w_per_gpu_measured") is not None
         else "CPU/RAM energy not in the record"],
    ]


def long_rows(c: dict[str, Any], jobid: str) -> list[list[str]]:
    """The same comparison as rows of ``jobenergy -l``'s one table (its 14 columns): Node ``-``,
    Class ``prediction``, DeviceID the quantity, Energy_kWh filled on the two ``GPU energy`` rows
    (``predicted``, ``measured``), the values and basis in Covers."""
    out: list[list[str]] = []
    for _, quantity, pred, meas, unit, basis in rows(c, jobid):
        if quantity == "GPU energy":
            out.append([jobid, "-", "prediction", "GPU energy predicted", "", "", "prediction", pred, "", "", "", "",
                        "", basis])
            out.append([jobid, "-", "prediction", "GPU energy measured", "", "", "measured", meas, "", "", "", "",
                        "", "the job's measured GPU energy"])
            continue
        vals = ", ".join(x for x in (f"predicted {pred}" if pred else "", f"measured {meas}" if meas else "") if x)
        covers = "; ".join(x for x in (f"{vals} {unit}".strip(), basis) if x)
        out.append([jobid, "-", "prediction", quantity, "", "", "", "", "", "", "", "", "", covers])
    return out

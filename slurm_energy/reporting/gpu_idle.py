"""GPUs allocated but idle, as the report, ``jobenergy -l`` / ``--seff`` / ``--json`` show them.
Formatting only: the numbers are the record's (:mod:`slurm_energy.accounting.idle_gpu`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slurm_energy.accounting.idle_gpu import describe_method
from slurm_energy.model import JobRecord
from slurm_energy.units import J_PER_KWH


def gpus(record: JobRecord) -> list[tuple[str, Any]]:
    """(node, DeviceEnergy) of each GPU that was judged (utilisation reported)."""
    return [(n.node, d) for n in record.nodes for d in n.devices if d.device_class == "gpu" and d.idle_s is not None]


def allocated_gpu_s(record: JobRecord) -> float:
    """GPU-seconds the judged GPUs were allocated (each GPU's span on its node), s."""
    return sum(float(d.duration_s) for _, d in gpus(record))


def summary_line(record: JobRecord) -> str | None:
    """``GPU allocated but idle: 30 s of 60 GPU-s (50.0 %), 0.0005 kWh -- measured energy in an
    idle state (power_integration)``; None for a job without a judged GPU."""
    if record.gpu_idle_s is None:
        return None
    alloc = allocated_gpu_s(record)
    share = f" ({100 * record.gpu_idle_s / alloc:.1f} %)" if alloc > 0 else ""
    e = "energy not measured" if record.gpu_idle_energy_j is None else f"{record.gpu_idle_energy_j / J_PER_KWH:.4g} kWh"
    return (f"GPU allocated but idle: {record.gpu_idle_s:.0f} s of {alloc:.0f} GPU-s{share}, {e}"
            f" -- {describe_method(record.gpu_idle_method)}")


def json_block(record: JobRecord) -> dict[str, Any] | None:
    """``--json``'s ``gpu_idle``: totals and per GPU, with the method and its label; None without a judged GPU."""
    if record.gpu_idle_s is None:
        return None
    j = record.gpu_idle_energy_j
    return {"idle_s": record.gpu_idle_s, "allocated_gpu_s": allocated_gpu_s(record), "energy_j": j,
            "kwh": None if j is None else j / J_PER_KWH, "method": record.gpu_idle_method,
            "label": describe_method(record.gpu_idle_method),
            "gpus": [{"node": node, "device_id": d.device_id, "model": d.model, "idle_s": d.idle_s,
                      "energy_j": d.idle_energy_j, "method": d.method.value, "idle_bound_w": d.idle_bound_w}
                     for node, d in gpus(record)]}


def long_rows(record: JobRecord, jobid: str, fmt_num: Callable[[float | None], str]) -> list[list[str]]:
    """``jobenergy -l`` rows (the columns before ReqMem/MaxRSS), one per judged GPU: Class
    ``gpu_idle``, Energy_kWh the job's energy while idle, Coverage the idle fraction of the GPU's
    time, Covers seconds, bound and the method's label."""
    out = []
    for node, d in gpus(record):
        frac = f"{d.idle_s / d.duration_s:.3f}" if d.duration_s > 0 else ""
        bound = "" if d.idle_bound_w is None else f", power <= {d.idle_bound_w:.0f} W"
        kwh = None if d.idle_energy_j is None else d.idle_energy_j / J_PER_KWH
        out.append([jobid, node, "gpu_idle", d.device_id, d.model, str(d.count), d.method.value, fmt_num(kwh), "",
                    frac, "", "", "", f"idle {d.idle_s:.0f} s of {d.duration_s:.0f} s (utilisation 0{bound}): "
                    + describe_method(d.method.value)])
    return out


def plot_spans(record: JobRecord) -> tuple[list[tuple[float, float]], float | None]:
    """For the power plot: idle stretches (any judged GPU; overlapping ones joined), minutes since
    the job's start, and the idle-draw bound (W; the line) on the scale of the GPU line it is drawn
    beside, or None: summed over all the job's GPUs where the plot's GPU line is the job's sum (one
    node, or a job of several nodes with a ``job_trace``), else (an older multi-node record, drawn
    node by node) the largest one node's GPUs sum to."""
    t0 = record.start_time
    spans = union_spans(sorted(((a - t0) / 60, (b - t0) / 60) for _, d in gpus(record) for a, b in d.idle_spans))
    per_node: dict[str, float] = {}
    for node, d in gpus(record):
        if d.idle_bound_w is not None:
            per_node[node] = per_node.get(node, 0.0) + d.idle_bound_w
    if not per_node:
        return spans, None
    drawn_by_node = record.job_trace is None and len(record.nodes) > 1
    return spans, (max(per_node.values()) if drawn_by_node else sum(per_node.values()))


def union_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted ``(a, b)`` spans with overlapping or touching ones joined: one band per stretch in
    which any GPU was idle (1,024 nodes' GPUs idle together draw one band, not 8,192)."""
    out: list[tuple[float, float]] = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def rule_text(record: JobRecord) -> str:
    """What idle meant for this job's GPUs: utilisation 0 and power at most each GPU's bound, with the sources."""
    bounds = sorted({f"{d.idle_bound_w:.0f} W" for _, d in gpus(record) if d.idle_bound_w is not None})
    b = ", ".join(bounds) if bounds else "no power bound known (utilisation alone)"
    return ("idle = utilisation at 0 (Job Defense Shield's 0 % GPU-hours) and power at most the card's idle draw "
            f"({b}; default 0.25 x rated power: idle with a CUDA context, arXiv:2605.23918); site.yaml "
            "attribution.gpu_idle sets them")

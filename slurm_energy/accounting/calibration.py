"""Prediction calibrated on the site's own measured jobs.

From stored :class:`~slurm_energy.model.JobRecord` s whose training script declared its work
(``tags["flops"]``, or ``tags["model_params"]`` and ``tags["tokens"]`` -> ``6 N D``), each job
gives, per GPU model:

* the achieved **FLOP/s fraction** ``f = F / (t x n x R)`` (F FLOPs, t the job's elapsed s, n
  GPUs, R rated dense FLOP/s per GPU from the bundled table, BF16 unless ``tags["precision"]``);
* the **power fraction** ``p = E_gpu / sum_d (n_d x P_d x t_d)`` (measured GPU energy, J, over
  rated power x time of each measured GPU entry; only ``counter`` / ``power_integration``
  entries, never a ``tdp_estimate``, which would only return the assumed fraction);
* the **node overhead per GPU** ``o = (E_cpu + E_ram) / (n x t)`` (W), the measured path's CPU and
  RAM energy, when the record has it.

:func:`fit` groups them by GPU model with their spread (median, p10, p90: linear interpolation,
numpy's default percentile); :func:`predict_range` re-runs a prediction under each job's
fractions, so the range printed is the one the site's jobs showed. Pure: no store or file access
(the rated FLOP/s look-up is passed in; :func:`table_rated_flops` reads the bundled table).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from slurm_energy.accounting.prediction import training_flops
from slurm_energy.model import JobRecord, Method, Status
from slurm_energy.units import J_PER_KWH, co2e_kg

MEASURED = (Method.COUNTER, Method.POWER_INTEGRATION)

#: (gpu model name, precision) -> rated dense FLOP/s per GPU, or None if unknown.
RatedFlops = Callable[[str, str], float | None]


def table_rated_flops(model: str, precision: str = "bf16") -> float | None:
    """Rated dense FLOP/s of an NVML GPU name from the bundled table (Epoch AI), or None."""
    from slurm_energy.devices.hwtables import lookup_gpu

    row = lookup_gpu(model)
    return None if row is None else getattr(row, f"{precision}_flops", None)


@dataclass(frozen=True)
class Spread:
    """Median and p10-p90 of a quantity over ``n`` jobs."""

    median: float
    p10: float
    p90: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        """The spread of ``values`` (not empty): numpy's percentiles, linear between order statistics."""
        median, p10, p90 = np.percentile(values, [50, 10, 90]).tolist()
        return cls(median, p10, p90, len(values))


@dataclass(frozen=True)
class JobFit:
    """What one tagged, measured job says about its GPUs (see the module docstring)."""

    job_id: str
    gpu_model: str
    n_gpus: float
    elapsed_s: float
    flops: float
    rated_flops_per_s: float  # R per GPU
    rated_power_w: float  # P per GPU (count-weighted mean of the measured entries)
    gpu_energy_j: float
    flops_frac: float
    power_frac: float
    node_w_per_gpu: float | None  # None: CPU/RAM energy not in the record


def declared_flops(record: JobRecord) -> float | None:
    """FLOPs the job declared: ``tags["flops"]``, else ``6 x model_params x tokens``; None if neither
    is a finite number > 0."""
    t = record.tags or {}
    try:
        f = float(t["flops"]) if "flops" in t else training_flops(float(t["model_params"]), float(t["tokens"]))
    except (KeyError, TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f > 0 else None


def _gpu_entries(record: JobRecord) -> list[Any]:  # DeviceEnergy with energy, rated power and time
    return [d for ns in record.nodes for d in ns.devices
            if d.device_class == "gpu" and Method(d.method) in MEASURED and d.energy_j is not None
            and d.rated_power_w and d.duration_s > 0]


def job_fit(record: JobRecord, rated_flops: RatedFlops = table_rated_flops) -> tuple[JobFit | None, str]:
    """``(JobFit, "")`` for a tagged job with measured GPU energy, else ``(None, why not)``."""
    flops = declared_flops(record)
    if flops is None:
        return None, "no flops tag (or model_params and tokens)"
    if record.status == Status.RUNNING:
        return None, "job still running (interim record)"
    gpus = _gpu_entries(record)
    if not gpus:
        return None, "no measured GPU energy (counter or power_integration)"
    models = {d.model for d in gpus}
    if len(models) != 1 or not next(iter(models)):
        return None, f"GPU model unknown or mixed ({', '.join(sorted(models)) or 'none'})"
    model = next(iter(models))
    precision = str((record.tags or {}).get("precision", "bf16")).lower()
    rate = rated_flops(model, precision)
    elapsed = record.elapsed_s
    if not rate or elapsed <= 0:
        return None, f"no rated {precision} FLOP/s for {model} in the table" if not rate else "elapsed time is 0"
    n = float(sum(d.count for d in gpus))
    energy = float(sum(d.energy_j for d in gpus))
    rated_j = sum(d.count * d.rated_power_w * d.duration_s for d in gpus)
    f_frac = flops / (elapsed * n * rate)
    if f_frac > 1:
        return None, f"declared FLOPs imply {f_frac:.2f} of rated FLOP/s (> 1): tag or precision wrong"
    p_frac = energy / rated_j
    if p_frac > 1:
        return None, f"measured GPU power is {p_frac:.2f} x rated (> 1): rated_power_w in the record is wrong"
    other = [d.energy_j for ns in record.nodes for d in ns.devices
             if d.device_class in ("cpu", "ram") and d.energy_j is not None]
    node_w = sum(other) / (n * elapsed) if other else None
    return JobFit(
        job_id=record.job_id, gpu_model=model, n_gpus=n, elapsed_s=elapsed, flops=flops,
        rated_flops_per_s=rate, rated_power_w=sum(d.count * d.rated_power_w for d in gpus) / n,
        gpu_energy_j=energy, flops_frac=f_frac, power_frac=p_frac, node_w_per_gpu=node_w,
    ), ""


@dataclass(frozen=True)
class Calibration:
    """One GPU model's fit over the site's tagged jobs."""

    gpu_model: str
    jobs: tuple[JobFit, ...]
    flops_frac: Spread
    power_frac: Spread
    node_w_per_gpu: Spread | None  # None: no job had CPU/RAM energy

    @property
    def n_jobs(self) -> int:
        return len(self.jobs)

    def describe(self) -> str:
        """e.g. ``site calibration: 12 jobs on NVIDIA A100-SXM4-80GB``."""
        return f"site calibration: {self.n_jobs} job{'s' if self.n_jobs != 1 else ''} on {self.gpu_model}"


def fit(records: Iterable[JobRecord], rated_flops: RatedFlops = table_rated_flops) -> dict[str, Calibration]:
    """Calibrations keyed by normalised GPU model (:func:`~slurm_energy.devices.hwtables.normalize_gpu_model`)."""
    from slurm_energy.devices.hwtables import normalize_gpu_model

    groups: dict[str, list[JobFit]] = {}
    for r in records:
        jf, _ = job_fit(r, rated_flops)
        if jf is not None:
            groups.setdefault(normalize_gpu_model(jf.gpu_model), []).append(jf)
    out = {}
    for key, fits in groups.items():
        nodes = [j.node_w_per_gpu for j in fits if j.node_w_per_gpu is not None]
        out[key] = Calibration(fits[0].gpu_model, tuple(fits), Spread.of([j.flops_frac for j in fits]),
                               Spread.of([j.power_frac for j in fits]), Spread.of(nodes) if nodes else None)
    return out


def for_gpu(calibrations: dict[str, Calibration], gpu_name: str) -> Calibration | None:
    """The calibration for a GPU name as the user typed it or NVML reports it, or None.

    Matches by normalised name, else by the bundled table's row, else the one calibration whose
    normalised model has every word of the name (``A100`` finds ``NVIDIA A100-SXM4-80GB`` jobs when
    no other A100 variant has jobs; ambiguous -> None).
    """
    from slurm_energy.devices.hwtables import lookup_gpu, normalize_gpu_model

    key = normalize_gpu_model(gpu_name)
    if key in calibrations:
        return calibrations[key]
    row = lookup_gpu(gpu_name)
    if row is not None:
        for cal in calibrations.values():
            other = lookup_gpu(cal.gpu_model)
            if other is not None and other.key == row.key:
                return cal
    words = set(key.split())
    hits = [cal for k, cal in calibrations.items() if words and words <= set(k.split())]
    return hits[0] if len(hits) == 1 else None


def predict_range(cal: Calibration, flops: float, n_gpus: float, rated_flops_per_s: float, rated_power_w: float,
                  pue: float, ci_g_per_kwh: float, alpha: float = 1.0, *, flops_frac: float | None = None,
                  power_frac: float | None = None, node_w_per_gpu: float | None = None) -> dict[str, Spread]:
    """Time (s), facility kWh and kgCO2e spread if this job ran like each of the site's jobs.

    For job j: ``t_j = F / (n R f_j)``, ``E_j = n t_j (P p_j + o_j) x PUE / 3.6e6`` kWh,
    ``CO2e_j = E_j x CI x alpha / 1000`` kg. A fraction given by the user (``flops_frac``,
    ``power_frac``, ``node_w_per_gpu``) replaces every job's; a job without node overhead uses the
    calibration's median (0 only if no job measured it, which the caller labels).
    """
    o_med = cal.node_w_per_gpu.median if cal.node_w_per_gpu else 0.0
    times, kwh, kg = [], [], []
    for j in cal.jobs:
        f = flops_frac if flops_frac is not None else j.flops_frac
        p = power_frac if power_frac is not None else j.power_frac
        o = node_w_per_gpu if node_w_per_gpu is not None else (j.node_w_per_gpu if j.node_w_per_gpu is not None else o_med)
        t = flops / (n_gpus * rated_flops_per_s * f)
        e = n_gpus * t * (rated_power_w * p + o) * pue / J_PER_KWH
        times.append(t)
        kwh.append(e)
        kg.append(co2e_kg(e, ci_g_per_kwh, alpha))
    return {"time_s": Spread.of(times), "facility_kwh": Spread.of(kwh), "co2e_kg": Spread.of(kg)}


def check_job(record: JobRecord, rated_flops: RatedFlops = table_rated_flops) -> dict[str, Any] | None:
    """Predicted vs measured for one job that declared its FLOPs; None if it did not.

    The prediction is what ``slurm-energy predict`` gives for the job's declared FLOPs, GPUs and
    achieved FLOP/s fraction (so the predicted time is the job's own) with the documented default
    power fraction (:data:`slurm_energy.accounting.power_defaults.GPU_TRAINING`):
    ``E_pred = n x P x p_default x t`` against the measured GPU energy. Keys (units in the names):
    ``flops``, ``gpu_model``, ``n_gpus``, ``elapsed_s``, ``flops_frac_measured``,
    ``power_frac_measured``, ``power_frac_default``, ``power_frac_default_source``,
    ``gpu_kwh_measured``, ``gpu_kwh_predicted``, ``gpu_kwh_error_pct`` ((pred - meas) / meas x 100),
    ``node_w_per_gpu_measured`` (None if unmeasured), ``note`` (why the numbers are missing, or "").
    """
    from slurm_energy.accounting.power_defaults import GPU_TRAINING

    flops = declared_flops(record)
    if flops is None:
        return None
    jf, why = job_fit(record, rated_flops)
    out: dict[str, Any] = {"flops": flops, "power_frac_default": GPU_TRAINING.power_frac,
                 "power_frac_default_source": GPU_TRAINING.source, "note": why}
    if jf is None:
        return out
    pred_j = jf.n_gpus * jf.rated_power_w * GPU_TRAINING.power_frac * jf.elapsed_s
    out.update(
        gpu_model=jf.gpu_model, n_gpus=jf.n_gpus, elapsed_s=jf.elapsed_s, flops_frac_measured=jf.flops_frac,
        power_frac_measured=jf.power_frac, gpu_kwh_measured=jf.gpu_energy_j / J_PER_KWH,
        gpu_kwh_predicted=pred_j / J_PER_KWH, gpu_kwh_error_pct=(pred_j - jf.gpu_energy_j) / jf.gpu_energy_j * 100.0,
        node_w_per_gpu_measured=jf.node_w_per_gpu,
    )
    return out

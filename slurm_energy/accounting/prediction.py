"""Prediction mode of the method: energy and carbon of a job *before* it runs.

Pure functions, no I/O:

1. Work: ``F`` FLOPs, either given, or for training a dense transformer ``F ~= 6 N D``
   (N parameters, D training tokens; Kaplan et al. 2020, "Scaling Laws for Neural Language
   Models", arXiv:2001.08361, section 2.1: C ~= 6 N FLOPs per token, 2N forward + 4N backward).
   Inference (forward pass only) is ``2 N D`` (same source).
2. Time: ``t = F / sum_i n_i R_i f_i`` over compute devices: R_i rated FLOP/s per device, f_i the
   *FLOP/s fraction* (achieved / rated FLOP/s, "model FLOPs utilisation"). Or, when a published
   run gives GPU-hours H instead, ``t = 3600 H / n_gpu``.
3. Energy: ``E_IT = sum_i n_i P_i p_i t`` over every device class (GPU, node overhead, CPU cores,
   RAM), P_i rated power per device (W), p_i the *power fraction* (drawn / rated power). The two
   fractions are kept apart: a large-model training run reaching f = 0.2-0.5 of rated FLOP/s still
   draws most of its GPUs' rated power (see :mod:`slurm_energy.accounting.power_defaults`), so
   scaling the power by f under-predicts energy several times. ``E_facility = E_IT x PUE``.
4. Carbon: ``CO2e = E_facility x CI x alpha`` (CI in gCO2e/kWh).

The result is a model (rated power x power fraction x predicted time, like the ``tdp_estimate``
method), never a measurement; :class:`Prediction` says so in ``method``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.errors import PredictionError
from slurm_energy.units import J_PER_KWH, co2e_kg

#: Training FLOPs per parameter per token (Kaplan et al. 2020, arXiv:2001.08361, sec. 2.1).
TRAINING_FLOPS_PER_PARAM_TOKEN = 6.0
#: Inference (forward only) FLOPs per parameter per token (same source).
INFERENCE_FLOPS_PER_PARAM_TOKEN = 2.0

PREDICTION_METHOD = "prediction: rated power x power fraction x predicted time (a model, not a measurement)"


def require_positive(name: str, value: Any, fix: str) -> float:
    """``float(value)`` if finite and > 0, else :class:`PredictionError` naming ``name``, the value and ``fix``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise PredictionError(f"{name}={value!r} is not a number; {fix}") from None
    if not math.isfinite(v) or v <= 0:
        raise PredictionError(f"{name}={value!r} must be a finite number > 0; {fix}")
    return v


def training_flops(params: float, tokens: float) -> float:
    """Training FLOPs of a dense transformer: ``6 x params x tokens`` (Kaplan et al. 2020).

    Args:
        params: parameter count N (e.g. ``7e9``). tokens: training tokens D (e.g. ``1e9``).

    Returns:
        FLOPs (floating-point operations, not per second).

    Raises:
        PredictionError: ``params`` or ``tokens`` not a finite number > 0.
    """
    n = require_positive("params", params, "pass the model's parameter count, e.g. 7e9")
    d = require_positive("tokens", tokens, "pass the number of training tokens, e.g. 1e9")
    return TRAINING_FLOPS_PER_PARAM_TOKEN * n * d


def inference_flops(params: float, tokens: float) -> float:
    """Inference FLOPs (forward pass only): ``2 x params x tokens`` (Kaplan et al. 2020). FLOPs.

    Raises:
        PredictionError: ``params`` or ``tokens`` not a finite number > 0.
    """
    n = require_positive("params", params, "pass the model's parameter count, e.g. 7e9")
    d = require_positive("tokens", tokens, "pass the number of tokens processed, e.g. 1e9")
    return INFERENCE_FLOPS_PER_PARAM_TOKEN * n * d


def require_fraction(name: str, value: Any, fix: str) -> float:
    """``float(value)`` if in (0, 1], else :class:`PredictionError` naming ``name``, the value and ``fix``."""
    v = require_positive(name, value, fix)
    if v > 1:
        raise PredictionError(f"{name}={value!r} is above 1; {fix}")
    return v


@dataclass(frozen=True)
class DeviceSpec:
    """One device class in a prediction: n_i devices of rated power P_i drawing p_i x P_i.

    ``flops_per_s`` (rated FLOP/s per device) with ``flops_frac`` (achieved / rated FLOP/s) makes
    it a compute device that sets the run time; devices without it (node overhead, CPU cores
    feeding the GPUs, RAM) only draw power for that time. ``power_frac`` (drawn / rated power)
    sets the energy. ``source`` says where P_i and R_i came from; ``power_frac_source`` and
    ``flops_frac_source`` where the two fractions came from (option, site calibration, default).
    """

    device_class: str  # "gpu" | "node" | "cpu" | "ram"
    count: float  # n_i: devices, cores, GB of RAM, or GPUs for a per-GPU node overhead
    rated_power_w: float  # P_i per device (per core, per GB), W
    power_frac: float  # p_i in (0, 1]: drawn / rated power
    flops_per_s: float | None = None  # R_i rated FLOP/s per device
    flops_frac: float | None = None  # f_i in (0, 1]: achieved / rated FLOP/s
    model: str = ""
    source: str = ""
    power_frac_source: str = ""
    flops_frac_source: str = ""

    def validate(self) -> DeviceSpec:
        """Return self, or raise :class:`PredictionError` naming the bad field."""
        p = f"{self.device_class or 'device'}."
        require_positive(p + "count", self.count, "pass how many devices (cores, GB) the job uses, e.g. 8")
        require_positive(p + "rated_power_w", self.rated_power_w, "pass the rated power per device in W (TDP), e.g. 700")
        require_fraction(p + "power_frac", self.power_frac,
                         "pass drawn / rated power in (0, 1], e.g. 0.76 (--power-frac)")
        if self.flops_per_s is not None:
            require_positive(p + "flops_per_s", self.flops_per_s, "pass the rated FLOP/s per device, e.g. 9.895e14")
        if self.flops_frac is not None:
            require_fraction(p + "flops_frac", self.flops_frac,
                             "pass achieved / rated FLOP/s in (0, 1], e.g. 0.4 for 40 % (--util)")
        return self

    @property
    def drawn_w(self) -> float:
        """Power drawn per device, ``P_i x p_i`` (W)."""
        return self.rated_power_w * self.power_frac


@dataclass(frozen=True)
class Prediction:
    """A predicted job: time (s), energy per class and totals (kWh), carbon (kgCO2e), with inputs."""

    flops: float | None  # None when the time came from GPU-hours
    time_s: float
    energy_kwh: dict[str, float]  # device class -> IT kWh
    it_kwh: float
    pue: float
    facility_kwh: float
    ci_g_per_kwh: float
    alpha: float
    co2e_kg: float
    devices: tuple[DeviceSpec, ...] = field(default_factory=tuple)
    time_basis: str = "FLOPs / (n x rated FLOP/s x FLOP/s fraction)"
    method: str = PREDICTION_METHOD


def predict_time_s(flops: float, devices: Sequence[DeviceSpec]) -> float:
    """Run time ``t = F / sum_i n_i R_i f_i`` over devices with ``flops_per_s``; seconds.

    Raises:
        PredictionError: ``flops`` not > 0, a device invalid, or no device has ``flops_per_s``
            with a ``flops_frac``.
    """
    f = require_positive("flops", flops, "pass the job's total FLOPs, or params and tokens")
    rate = sum(d.validate().count * d.flops_per_s * d.flops_frac for d in devices
               if d.flops_per_s is not None and d.flops_frac is not None)
    if rate <= 0:
        raise PredictionError(
            "devices=no device has a rated FLOP/s and a FLOP/s fraction; give the GPU model (table "
            "look-up) or --gpu-flops, and --util"
        )
    return f / rate


def time_from_gpu_hours(gpu_hours: float, n_gpus: float) -> float:
    """Wall time of a run given its GPU-hours: ``t = 3600 x H / n`` seconds.

    Raises:
        PredictionError: ``gpu_hours`` or ``n_gpus`` not > 0.
    """
    h = require_positive("gpu_hours", gpu_hours, "pass the run's GPU-hours, e.g. 82432")
    n = require_positive("n_gpus", n_gpus, "pass the number of GPUs, e.g. 2048")
    return 3600.0 * h / n


def predict_energy_kwh(devices: Sequence[DeviceSpec], time_s: float) -> dict[str, float]:
    """IT energy per device class, ``n_i x P_i x p_i x t / 3.6e6`` kWh, summed per class.

    Args:
        devices: device specs (validated here). time_s: run time, s.

    Raises:
        PredictionError: a device or ``time_s`` invalid.
    """
    t = require_positive("time_s", time_s, "pass the predicted run time in seconds")
    out: dict[str, float] = {}
    for d in devices:
        d.validate()
        out[d.device_class] = out.get(d.device_class, 0.0) + d.count * d.drawn_w * t / J_PER_KWH
    return out


def _check_site(pue: Any, ci_g_per_kwh: Any, alpha: Any) -> float:
    pue_v = require_positive("pue", pue, "pass the data centre's PUE, e.g. 1.58")
    if pue_v < 1:
        raise PredictionError(f"pue={pue!r} is below 1 (facility energy cannot be less than IT energy); pass e.g. 1.58")
    for name, v in (("ci_g_per_kwh", ci_g_per_kwh), ("alpha", alpha)):
        try:
            ok = math.isfinite(float(v)) and float(v) >= 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise PredictionError(f"{name}={v!r} must be a finite number >= 0; pass e.g. 475 gCO2e/kWh / alpha 1.0")
    return pue_v


def predict(
    flops: float | None,
    devices: Sequence[DeviceSpec],
    pue: float,
    ci_g_per_kwh: float,
    alpha: float = 1.0,
    *,
    time_s: float | None = None,
) -> Prediction:
    """The whole prediction: time, IT / facility kWh and kgCO2e.

    ``t = F / sum n_i R_i f_i`` unless ``time_s`` is given (e.g. from :func:`time_from_gpu_hours`);
    ``E_facility = PUE x sum_i n_i P_i p_i t`` (kWh); ``CO2e = E_facility x CI x alpha / 1000``
    (kg, CI in gCO2e/kWh).

    Raises:
        PredictionError: any input invalid (``pue`` < 1, ``ci_g_per_kwh`` < 0, ``alpha`` < 0, or
            the device/FLOPs errors of :func:`predict_time_s`).
    """
    pue_v = _check_site(pue, ci_g_per_kwh, alpha)
    if time_s is None:
        if flops is None:
            raise PredictionError("flops: give the run's FLOPs (or its time as GPU-hours)")
        t, basis = predict_time_s(flops, devices), "FLOPs / (n x rated FLOP/s x FLOP/s fraction)"
    else:
        t, basis = require_positive("time_s", time_s, "pass the run time in seconds"), "given (GPU-hours / n)"
    per_class = predict_energy_kwh(devices, t)
    it = sum(per_class.values())
    facility = it * pue_v
    co2e = co2e_kg(facility, float(ci_g_per_kwh), float(alpha))
    return Prediction(
        flops=None if flops is None else float(flops), time_s=t, energy_kwh=per_class, it_kwh=it, pue=pue_v,
        facility_kwh=facility, ci_g_per_kwh=float(ci_g_per_kwh), alpha=float(alpha), co2e_kg=co2e,
        devices=tuple(devices), time_basis=basis,
    )


#: Published maximum system power of NVIDIA's 8-GPU reference nodes and their GPUs' TDP:
#: (name matched in the GPU model, node W, GPUs, GPU TDP W, source). The node's power besides its
#: GPUs (host CPUs, memory, NVSwitch, NICs, fans) is node W - GPUs x TDP.
NODE_SPECS = (
    ("H200", 10_200.0, 8, 700.0, "NVIDIA DGX H200 datasheet: ~10.2 kW max, 8x H200 700 W"),
    ("H100", 10_200.0, 8, 700.0, "NVIDIA DGX H100 datasheet: ~10.2 kW max, 8x H100 SXM 700 W"),
    ("A100", 6_500.0, 8, 400.0, "NVIDIA DGX A100 datasheet: 6.5 kW max, 8x A100 SXM 400 W"),
    ("V100", 3_500.0, 8, 300.0, "NVIDIA DGX-1 (V100) datasheet: 3,500 W max, 8x V100 SXM2 300 W"),
)
#: A GPU model none of NODE_SPECS names: the DGX H100's ratio of non-GPU power to GPU TDP
#: ((10.2 kW - 5.6 kW) / 5.6 kW = 0.82), applied to the GPU's own TDP.
FALLBACK_SPEC = NODE_SPECS[1]


def default_node_w_per_gpu(gpu_model: str, gpu_tdp_w: float, power_frac: float) -> tuple[float, str]:
    """The default node overhead per GPU, W, and its source: the reference node's power besides its
    GPUs (:data:`NODE_SPECS`: max system power - GPUs x TDP, per GPU), drawn at the GPUs' power
    fraction ``power_frac`` (a node under training draws below its rated maximum, as its GPUs do).

    Check against a measured run: DGX-1 (V100): (3,500 - 8 x 300) / 8 = 137.5 W x 0.76 = 104.5 W
    per GPU; with the GPU's 300 x 0.76 = 228 W: 332.5 W per V100, where Patterson et al. 2021
    (arXiv:2104.10350, Table 4) measured 330 W per V100 for GPT-3 *including the host*.
    A model the table does not name uses :data:`FALLBACK_SPEC`'s ratio to TDP.

    Raises ValueError: ``gpu_tdp_w`` <= 0 or ``power_frac`` outside (0, 1].
    """
    if not gpu_tdp_w or gpu_tdp_w <= 0:
        raise ValueError(f"gpu TDP: {gpu_tdp_w!r} W; pass --gpu-watts")
    if not 0 < power_frac <= 1:
        raise ValueError(f"power fraction: {power_frac!r} is outside (0, 1]")
    up = (gpu_model or "").upper()
    spec = next((s for s in NODE_SPECS if s[0] in up), None)
    _name, node_w, n, tdp, src = spec or FALLBACK_SPEC
    rest = (node_w - n * tdp) / n
    if spec is None:
        rest = rest / tdp * gpu_tdp_w
        src = f"{src}, as a ratio {(node_w - n * tdp) / (n * tdp):.2f} of this GPU's {gpu_tdp_w:g} W TDP (model not in the table)"
    w = rest * power_frac
    return w, (f"default: {rest:.4g} W per GPU besides the GPUs ({src}: (node - GPUs) / {n}) x power fraction "
               f"{power_frac:.3g} = {w:.4g} W; checked on GPT-3's measured 330 W per V100 incl. host "
               "(Patterson et al. 2021, arXiv:2104.10350); --node-watts overrides, --no-node-overhead leaves it out")

"""``slurm-energy predict``: the method's prediction mode from the command line, and
``slurm-energy calibration``: what the prediction learned from the site's measured jobs.

Example::

    slurm-energy predict --params 7e9 --tokens 1e9 --gpu "NVIDIA H100 80GB HBM3" --n-gpus 8 --util 0.4

Two fractions, kept apart: ``--util`` is the FLOP/s fraction (achieved / rated FLOP/s; sets the
time), ``--power-frac`` the power fraction (drawn / rated power; sets the energy). Each comes from
the option, else from the site's own measured jobs that declared their FLOPs
(:mod:`slurm_energy.accounting.calibration`, read from the store), else (power only) from the
documented default (:mod:`slurm_energy.accounting.power_defaults`); the output says which.
``--gpu-hours`` gives the time directly (published runs often report GPU-hours). GPU rated FLOP/s
and power come from the bundled table (:mod:`slurm_energy.devices.hwtables`, Epoch AI / Green
Algorithms) unless ``--gpu-flops`` / ``--gpu-watts`` are given (they win).

``calibration`` prints, per GPU model, how many jobs declared their FLOPs and were measured, the
FLOP/s fraction, power fraction and node overhead per GPU (median, p10-p90) that ``predict`` uses;
with ``-v`` one line per tagged job, or the reason it was not used (no measured GPU energy, unknown
model, implausible tag). Both read the store (:meth:`slurm_energy.store.Store.tagged`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from slurm_energy.accounting.prediction import (
    DeviceSpec,
    Prediction,
    PredictionError,
    inference_flops,
    require_fraction,
    require_positive,
    time_from_gpu_hours,
    training_flops,
)
from slurm_energy.cli.site import LenientSiteConfig, store_url
from slurm_energy.store.urls import STORE_HELP
from slurm_energy.units import RAM_W_PER_GB, RAM_W_PER_GB_SOURCE

if TYPE_CHECKING:
    from slurm_energy.accounting.calibration import Calibration, Spread
    from slurm_energy.cli.main import Subparsers
    from slurm_energy.model import JobRecord


def register(subparsers: Subparsers) -> None:
    """Add ``predict`` and ``calibration`` to the ``slurm-energy`` sub-command parsers."""
    p = subparsers.add_parser(
        "predict",
        help="predict time, kWh and kgCO2e of a job from its FLOPs (or model size) and hardware",
        description="t = FLOPs / (n R f) (f: FLOP/s fraction, --util); E = PUE x (n P p + node overhead) x t "
                    "(p: power fraction, --power-frac); CO2e = E x CI x alpha. Training FLOPs = 6 x params x "
                    "tokens (Kaplan et al. 2020). Fractions not given come from the site's measured jobs "
                    "(store), else (power) a documented default.",
    )
    w = p.add_argument_group("work (give --flops, or --params and --tokens, or --gpu-hours)")
    w.add_argument("--flops", type=float, help="total FLOPs of the job")
    w.add_argument("--params", type=float, help="model parameters N, e.g. 7e9")
    w.add_argument("--tokens", type=float, help="tokens D, e.g. 1e9")
    w.add_argument("--inference", action="store_true", help="forward pass only: 2 N D FLOPs instead of 6 N D")
    w.add_argument("--gpu-hours", type=float, help="GPU-hours of the run (as published runs report them): "
                   "time = GPU-hours / --n-gpus; no FLOPs or --util needed")
    g = p.add_argument_group("GPUs")
    g.add_argument("--gpu", default="", help='GPU model for the table look-up, e.g. "NVIDIA H100 80GB HBM3", "A100"')
    g.add_argument("--n-gpus", type=int, default=1, help="number of GPUs (default 1)")
    g.add_argument("--util", type=float, help="FLOP/s fraction in (0, 1]: achieved / rated FLOP/s (sets the time; "
                   "default: the site's measured jobs on this GPU)")
    g.add_argument("--power-frac", type=float, help="power fraction in (0, 1]: drawn / rated GPU power (sets the "
                   "energy; default: the site's measured jobs, else 0.76 measured under training)")
    g.add_argument("--precision", choices=("bf16", "tf32", "fp32"), default="bf16", help="rated FLOP/s column (default bf16)")
    g.add_argument("--gpu-flops", type=float, help="rated FLOP/s per GPU (overrides the table)")
    g.add_argument("--gpu-watts", type=float, help="rated power per GPU, W (overrides the table)")
    n = p.add_argument_group("node overhead: CPU, RAM, network, fans (optional)")
    n.add_argument("--node-watts", type=float, help="power drawn per node besides its GPUs, W, charged per GPU "
                   "as W / --gpus-per-node (default: the site's measured jobs, else not included)")
    n.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node for --node-watts (default 8)")
    n.add_argument("--no-node-overhead", action="store_true",
                   help="leave the node overhead out (default: the site's measured jobs, else the reference node's "
                        "published power besides its GPUs, e.g. DGX A100 6.5 kW for 8 GPUs, at the power fraction)")
    n.add_argument("--cpu-cores", type=int, help="CPU cores the job holds (method's TDP model)")
    n.add_argument("--cpu-watts-per-core", type=float, help="TDP per core, W")
    n.add_argument("--cpu-util", type=float, default=1.0, help="CPU power fraction in (0, 1] (default 1)")
    n.add_argument("--ram-gb", type=float, help="memory the job holds, GB")
    n.add_argument("--ram-watts-per-gb", type=float, default=RAM_W_PER_GB,
                   help=f"W per GB (default {RAM_W_PER_GB}, Green Algorithms 2021)")
    s = p.add_argument_group("site")
    s.add_argument("--pue", type=float, help="PUE (default: the site config's for --partition, else 1.58, Uptime "
                   "Institute 2023)")
    s.add_argument("--ci", type=float, help="carbon intensity, gCO2e/kWh (default: --country, else the site config's "
                   "for --partition, else 475 world IEA 2019)")
    s.add_argument("--country", help="ISO country code for the bundled carbon-intensity table, e.g. FR")
    s.add_argument("--alpha", type=float, help="offset factor alpha (default: the site config's, else 1.0)")
    s.add_argument("--partition", default="", help="Slurm partition the job will run in: picks the site config's "
                   "datacenter (PUE, carbon intensity)")
    s.add_argument("--store", help="for the site calibration: " + STORE_HELP)
    s.add_argument("--no-calibration", action="store_true", help="ignore the site's measured jobs")
    p.add_argument("--after", help="start windows: suggest starts at or after this UTC time (ISO 8601, default now), "
                   "over the hourly intensity or forecast imported for the site's zone (slurm-energy ci-import)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_predict)

    p = subparsers.add_parser(
        "calibration", help="show the prediction's calibration from the site's measured jobs that declared FLOPs",
        description="Per GPU model: jobs, FLOP/s fraction (achieved / rated), power fraction (drawn / rated) and "
                    "node overhead per GPU, median and p10-p90, as `slurm-energy predict` uses them.",
    )
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("-v", "--verbose", action="store_true", help="one line per tagged job, or why it was not used")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_calibration)


def work_flops(args: argparse.Namespace) -> tuple[float | None, str]:
    """FLOPs from ``--flops`` or ``--params``/``--tokens``, with how they were obtained; ``(None, ...)``
    when ``--gpu-hours`` gives the time and no work was given.

    Raises:
        PredictionError: neither or both given, or a value invalid.
    """
    if args.flops is not None:
        if args.params is not None or args.tokens is not None:
            raise PredictionError("--flops given together with --params/--tokens; pass one or the other")
        return _positive("--flops", args.flops, "the job's total FLOPs, e.g. --flops 4.2e19"), "given (--flops)"
    if args.params is None and args.tokens is None and args.gpu_hours is not None:
        return None, "not needed (--gpu-hours gives the time)"
    if args.params is None or args.tokens is None:
        raise PredictionError("--params/--tokens: both are needed (or give --flops, or --gpu-hours); "
                              "e.g. --params 7e9 --tokens 1e9")
    params = _positive("--params", args.params, "the model's parameter count, e.g. --params 7e9")
    tokens = _positive("--tokens", args.tokens, "the number of tokens, e.g. --tokens 1e9")
    if args.inference:
        return inference_flops(params, tokens), "2 x params x tokens (inference, Kaplan et al. 2020)"
    return training_flops(params, tokens), "6 x params x tokens (training, Kaplan et al. 2020)"


def _positive(flag: str, value: float, what: str) -> float:
    """``value`` if finite and > 0; else PredictionError naming ``flag``, the value as a number
    (``--params -7e+09``) and what to pass."""
    import math

    if not math.isfinite(value) or value <= 0:
        raise PredictionError(f"{flag} {value:g}: must be a number > 0; pass {what}")
    return value


def gpu_rated(args: argparse.Namespace) -> tuple[float | None, float, str, str]:
    """``(rated FLOP/s or None, rated W, model, source)`` from the table and/or ``--gpu-flops``/``--gpu-watts``.

    Raises:
        PredictionError: the model is unknown (and no explicit values), or the table lacks the
            requested precision's FLOP/s while FLOPs must be turned into a time.
    """
    flops, watts, model, sources = args.gpu_flops, args.gpu_watts, args.gpu, []
    need_flops = args.gpu_hours is None
    if (flops is None and need_flops) or watts is None:
        if not args.gpu:
            missing = [n for n, v in (("--gpu-flops", flops if need_flops else 0), ("--gpu-watts", watts)) if v is None]
            raise PredictionError(
                "no GPU given (--gpu): the prediction needs the GPU's rated "
                + ("FLOP/s and power" if len(missing) == 2 else "power" if missing == ["--gpu-watts"] else "FLOP/s")
                + "; give --gpu with its model (e.g. --gpu A100, or the NVML name: nvidia-smi --query-gpu=name "
                "--format=csv), or " + " and ".join(missing))
        from slurm_energy.devices.hwtables import lookup_gpu

        row = lookup_gpu(args.gpu)
        if row is None:
            raise PredictionError(
                f"--gpu={args.gpu!r} is not in the bundled GPU table; use the NVML name "
                "(nvidia-smi --query-gpu=name --format=csv), or give --gpu-flops and --gpu-watts"
            )
        model = row.model
        if flops is None:
            flops = getattr(row, f"{args.precision}_flops")
            if flops is None and need_flops:
                raise PredictionError(
                    f"--precision={args.precision!r}: the table has no {args.precision} FLOP/s for {row.model}; "
                    "try another --precision or give --gpu-flops"
                )
        if watts is None:
            if row.rated_w is None:
                raise PredictionError(f"--gpu={args.gpu!r}: the table has no rated power for {row.model}; give --gpu-watts")
            watts = row.rated_w
        used = [w for w, explicit in (("dense " + args.precision + " FLOP/s", args.gpu_flops), ("power", args.gpu_watts))
                if explicit is None]
        sources.append(f"table ({' and '.join(used)}): {row.source}" + (f" {row.year}" if row.year else ""))
    if args.gpu_flops is not None:
        sources.append("FLOP/s: --gpu-flops")
    if args.gpu_watts is not None:
        sources.append("power: --gpu-watts")
    return flops, watts, model, "; ".join(sources)


def site_facts(args: argparse.Namespace, site: LenientSiteConfig) -> dict[str, Any]:
    """PUE, CI, alpha with their sources: explicit flags, else ``--country`` (CI), else the site
    config for ``--partition`` (:func:`slurm_energy.config.carbon.resolve_carbon`, offline: no
    geolocation), else the documented defaults (PUE 1.58, 475 gCO2e/kWh, alpha 1), labelled.

    Raises:
        PredictionError: ``--country`` not in the bundled table.
    """
    from slurm_energy.config.carbon import resolve_carbon
    from slurm_energy.model import CarbonFacts

    cfg, _ = site.get()
    d = CarbonFacts()
    if cfg is not None:
        try:
            d = resolve_carbon(cfg, args.partition or "", offline=True)
        except Exception:
            d = CarbonFacts()
    out: dict[str, Any] = {"pue": d.pue, "pue_source": d.pue_source, "ci": d.ci_g_per_kwh, "ci_source": d.ci_source,
           "alpha": d.alpha, "alpha_source": d.alpha_source}
    for k in ("alpha", "pue"):
        if getattr(args, k) is not None:
            out[k], out[f"{k}_source"] = getattr(args, k), f"--{k}"
    if args.ci is not None:
        out["ci"], out["ci_source"] = args.ci, "--ci"
    elif args.country:
        from slurm_energy.carbon.tables import lookup_country

        row = lookup_country(args.country)
        if row is None:
            raise PredictionError(f"--country={args.country!r} is not in the bundled table; use an ISO code (FR, DEU) or --ci")
        out["ci"], out["ci_source"] = row.g_per_kwh, row.describe() + (f", {row.basis}" if row.basis else "")
    return out


def load_calibration(args: argparse.Namespace, gpu_model: str,
                     site: LenientSiteConfig) -> tuple[Calibration | None, str]:
    """``(Calibration or None, note)`` for ``gpu_model`` from the store's newest
    :data:`CALIBRATION_RECORDS` tagged, finished records; the note
    says why there is none (never an error: a prediction without the store falls back to the
    options and documented defaults)."""
    if args.no_calibration:
        return None, "site calibration: off (--no-calibration)"
    from slurm_energy.accounting.calibration import fit, for_gpu

    try:
        url = store_url(args.store, site.store_url).url
    except (LookupError, ValueError) as e:
        return None, f"site calibration: none ({e})"
    try:
        records = tagged_records(url)
    except Exception as e:
        return None, f"site calibration: none (store not readable: {e})"
    cal = for_gpu(fit(records), gpu_model) if gpu_model else None
    if cal is None:
        return None, f"site calibration: no measured job on {gpu_model or 'this GPU'} declared its FLOPs"
    return cal, cal.describe()


def _spread_text(sp: Spread) -> str:
    return f"{sp.median:.3g} (p10-p90 {sp.p10:.3g}-{sp.p90:.3g} over {sp.n} jobs)"


def fractions(args: argparse.Namespace, cal: Calibration | None, cal_note: str) -> dict[str, Any]:
    """FLOP/s fraction, power fraction and node overhead per GPU with where each came from.

    Raises:
        PredictionError: a fraction given out of (0, 1], or no FLOP/s fraction at all where the
            time must come from FLOPs.
    """
    from slurm_energy.accounting.power_defaults import GPU_TRAINING

    out: dict[str, Any] = {"calibration": cal_note}
    if args.util is not None:
        out["flops_frac"], out["flops_frac_source"] = require_fraction(
            "--util", args.util, "pass achieved / rated FLOP/s, e.g. 0.4 for 40 %"), "--util"
    elif cal is not None:
        out["flops_frac"], out["flops_frac_source"] = cal.flops_frac.median, f"{cal_note}: {_spread_text(cal.flops_frac)}"
    elif args.gpu_hours is None:
        raise PredictionError(f"--util is needed: {cal_note}; pass the FLOP/s fraction you expect "
                              "(achieved / rated FLOP/s, e.g. 0.4), or --gpu-hours")
    else:
        out["flops_frac"], out["flops_frac_source"] = None, "not needed (--gpu-hours)"
    if args.power_frac is not None:
        out["power_frac"], out["power_frac_source"] = require_fraction(
            "--power-frac", args.power_frac, "pass drawn / rated GPU power, e.g. 0.76"), "--power-frac"
    elif cal is not None:
        out["power_frac"], out["power_frac_source"] = cal.power_frac.median, f"{cal_note}: {_spread_text(cal.power_frac)}"
    else:
        out["power_frac"], out["power_frac_source"] = GPU_TRAINING.power_frac, f"{GPU_TRAINING.source} ({cal_note})"
    if args.node_watts is not None:
        w = require_positive("--node-watts", args.node_watts, "pass the node's power besides its GPUs in W, e.g. 1200")
        per = require_positive("--gpus-per-node", args.gpus_per_node, "pass GPUs per node, e.g. 8")
        out["node_w_per_gpu"], out["node_source"] = w / per, f"--node-watts {w:g} W / {per:g} GPUs per node"
    elif cal is not None and cal.node_w_per_gpu is not None:
        out["node_w_per_gpu"], out["node_source"] = cal.node_w_per_gpu.median, f"{cal_note}: CPU+RAM measured, " \
            f"W per GPU {_spread_text(cal.node_w_per_gpu)}"
    elif getattr(args, "no_node_overhead", False):
        out["node_w_per_gpu"], out["node_source"] = None, "not included (--no-node-overhead)"
    elif getattr(args, "cpu_cores", None) is not None or getattr(args, "ram_gb", None) is not None:
        out["node_w_per_gpu"], out["node_source"] = None, "not included (--cpu-cores/--ram-gb given instead)"
    else:
        out["node_w_per_gpu"], out["node_source"] = None, "default"  # filled by build() from the GPU's table entry
    return out


def build(args: argparse.Namespace, site_config: LenientSiteConfig) -> tuple[Prediction, dict[str, Any]]:
    """Parse ``args`` into a :class:`Prediction` and notes (FLOPs basis, fractions and their sources,
    site facts, the site's range). Reads the bundled tables and, unless ``--no-calibration``, the store."""
    from slurm_energy.accounting.calibration import predict_range
    from slurm_energy.accounting.prediction import predict

    flops, flops_basis = work_flops(args)
    rate, watts, model, source = gpu_rated(args)
    cal, cal_note = load_calibration(args, args.gpu or model, site_config)
    fr = fractions(args, cal, cal_note)
    if fr["node_w_per_gpu"] is None and fr["node_source"] == "default":
        from slurm_energy.accounting.prediction import default_node_w_per_gpu

        fr["node_w_per_gpu"], fr["node_source"] = default_node_w_per_gpu(model or args.gpu or "", watts, fr["power_frac"])
    n = require_positive("--n-gpus", args.n_gpus, "pass the number of GPUs, e.g. 8")
    devices = [DeviceSpec("gpu", count=n, rated_power_w=watts, power_frac=fr["power_frac"],
                          flops_per_s=rate if flops is not None else None, flops_frac=fr["flops_frac"],
                          model=model, source=source, power_frac_source=fr["power_frac_source"],
                          flops_frac_source=fr["flops_frac_source"]).validate()]
    if fr["node_w_per_gpu"] is not None:
        devices.append(DeviceSpec("node", count=n, rated_power_w=fr["node_w_per_gpu"], power_frac=1.0,
                                  model="node overhead (CPU, RAM, network, fans) per GPU", source=fr["node_source"],
                                  power_frac_source="drawn power").validate())
    if args.cpu_cores is not None:
        if args.cpu_watts_per_core is None:
            raise PredictionError("--cpu-watts-per-core is needed with --cpu-cores (TDP / cores, e.g. 150 W / 20 = 7.5)")
        devices.append(DeviceSpec("cpu", count=args.cpu_cores, rated_power_w=args.cpu_watts_per_core,
                                  power_frac=args.cpu_util, source="--cpu-watts-per-core",
                                  power_frac_source="--cpu-util").validate())
    if args.ram_gb is not None:
        devices.append(DeviceSpec("ram", count=args.ram_gb, rated_power_w=args.ram_watts_per_gb, power_frac=1.0,
                                  source="--ram-watts-per-gb" if args.ram_watts_per_gb != RAM_W_PER_GB
                                  else RAM_W_PER_GB_SOURCE, power_frac_source="drawn power").validate())
    site = site_facts(args, site_config)
    t = time_from_gpu_hours(args.gpu_hours, n) if args.gpu_hours is not None else None
    pred = predict(flops, devices, pue=site["pue"], ci_g_per_kwh=site["ci"], alpha=site["alpha"], time_s=t)
    notes: dict[str, Any] = {"flops_basis": flops_basis, **fr, **site, "site_range": None}
    if cal is not None and flops is not None and rate:
        notes["site_range"] = {k: asdict(v) for k, v in predict_range(
            cal, flops, n, rate, watts, site["pue"], site["ci"], site["alpha"], flops_frac=args.util,
            power_frac=args.power_frac, node_w_per_gpu=fr["node_w_per_gpu"] if args.node_watts is not None else None,
        ).items()}
    return pred, notes


_UNITS = {"gpu": ("GPU", "GPU"), "node": ("node overhead", "GPU"), "cpu": ("CPU cores", "core"), "ram": ("GB RAM", "GB")}


def _h(s: float) -> str:
    """A predicted time as sacct prints Elapsed (``[D-]HH:MM:SS``, :func:`format_duration`)."""
    from slurm_energy.reporting.scale import format_duration

    return format_duration(s)


def format_text(pred: Prediction, notes: dict[str, Any]) -> str:
    """Human-readable lines: FLOPs, devices, both fractions and their sources, time, kWh per class,
    facility kWh, kgCO2e, the site's range, sources."""
    lines = [f"FLOPs:            {'n/a' if pred.flops is None else f'{pred.flops:.4g}'} ({notes['flops_basis']})"]
    for d in pred.devices:
        rate = f", {d.flops_per_s / 1e12:.4g} TFLOP/s" if d.flops_per_s else ""
        what, per = _UNITS.get(d.device_class, (d.device_class, "device"))
        lines.append(f"{d.device_class.upper() + ':':<18}{d.count:g} x {d.model or what}, {d.rated_power_w:.4g} W/{per}{rate}"
                     + (f"  [{d.source}]" if d.source else ""))
    ff = notes.get("flops_frac")
    lines.append(f"FLOP/s fraction:  {'n/a' if ff is None else f'{ff:.3g}'} (achieved / rated FLOP/s, sets the time: "
                 f"{notes['flops_frac_source']})")
    lines.append(f"power fraction:   {notes['power_frac']:.3g} (drawn / rated GPU power, sets the energy: "
                 f"{notes['power_frac_source']})")
    lines.append("node overhead:    " + ("" if notes.get("node_w_per_gpu") is None else
                                       f"{notes['node_w_per_gpu']:.4g} W per GPU: ") + notes["node_source"])
    lines.append(f"time:             {pred.time_s:.4g} s ({_h(pred.time_s)}; {pred.time_basis})")
    for cls, kwh in pred.energy_kwh.items():
        lines.append(f"IT energy {cls}:{' ' * max(1, 7 - len(cls))}{kwh:.4g} kWh")
    lines.append(f"IT energy:        {pred.it_kwh:.4g} kWh")
    lines.append(f"facility energy:  {pred.facility_kwh:.4g} kWh (PUE {pred.pue:g}: {notes['pue_source']})")
    lines.append(f"carbon:           {pred.co2e_kg:.4g} kgCO2e (CI {pred.ci_g_per_kwh:g} gCO2e/kWh: "
                 f"{notes['ci_source']}; alpha {pred.alpha:g})")
    rng = notes.get("site_range")
    if rng:
        t, e, c = rng["time_s"], rng["facility_kwh"], rng["co2e_kg"]
        lines.append(f"site range:       p10-p90 over the {t['n']} measured jobs: time {_h(t['p10'])}-{_h(t['p90'])}, "
                     f"facility {e['p10']:.4g}-{e['p90']:.4g} kWh, {c['p10']:.4g}-{c['p90']:.4g} kgCO2e")
    else:
        lines.append(f"site range:       none ({notes['calibration']})")
    lines.append(f"method:           {pred.method}")
    for i, w in enumerate(notes.get("start_windows") or []):
        lines.append(f"{'start windows:' if i == 0 else '':<18}{w['start']}: {w['kgco2e']:.4g} kgCO2e (location-based)")
    if notes.get("start_windows_note"):
        lines.append(f"{'start windows:' if not notes.get('start_windows') else '':<18}{notes['start_windows_note']}")
    return "\n".join(lines) + "\n"


def start_windows(args: argparse.Namespace, pred: Prediction,
                  site: LenientSiteConfig) -> tuple[list[dict[str, Any]], str]:
    """The 3 hour-aligned starts in the next 7 days (from ``--after``, default now) with the least
    CO2e of the predicted run (its facility kWh evenly over its time), over the hourly intensity (or
    forecast) imported for the site's zone: ``([{start, kgco2e}], how)``; ``([], why none)``."""
    import time as _time
    from datetime import datetime, timezone

    from slurm_energy.accounting.whatif import WINDOW_DAYS, best_windows, flat_profile

    cfg, _ = site.get()
    if cfg is None or pred.time_s <= 0:
        return [], ""
    try:
        from slurm_energy.config.carbon import hourly_intensity_for, resolve_carbon

        ci = hourly_intensity_for(cfg, resolve_carbon(cfg, args.partition or "", offline=True))
    except Exception as e:
        return [], f"none (the hourly intensity cannot be read: {e})"
    if not ci:
        return [], ""
    if args.after:
        try:
            after = datetime.fromisoformat(args.after.replace("Z", "+00:00")).replace(tzinfo=None).replace(
                tzinfo=timezone.utc).timestamp()
        except ValueError:
            raise PredictionError(f"--after={args.after!r}: write an ISO 8601 UTC time, e.g. 2026-12-01T08:00Z") from None
    else:
        after = _time.time()
    hours = pred.time_s / 3600.0
    top = best_windows(flat_profile(hours, pred.facility_kwh / hours), ci, after, horizon_days=WINDOW_DAYS)
    if not top:
        return [], f"none (no imported hourly intensity covers a {hours:.3g} h run in the {WINDOW_DAYS:g} days from then)"
    fmt = "%Y-%m-%dT%H:%MZ"
    return ([{"start": datetime.fromtimestamp(t, timezone.utc).strftime(fmt), "kgco2e": kg} for t, kg in top],
            "the predicted facility kWh spread evenly over the predicted time, x each hour's imported CI")


def cmd_predict(args: argparse.Namespace) -> int:
    """Run the prediction; print text or JSON. Exit 2 with a message naming the bad input."""
    try:
        site = LenientSiteConfig("predict")
        pred, notes = build(args, site)
        notes["start_windows"], notes["start_windows_note"] = start_windows(args, pred, site)
    except PredictionError as e:
        print(f"slurm-energy predict: {e}", file=sys.stderr)
        return 2
    if args.json:
        out = asdict(pred)
        out["devices"] = [asdict(d) for d in pred.devices]
        out.update(notes)
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(format_text(pred, notes))
    return 0


#: Newest tagged, finished records read (the prediction reads the same).
CALIBRATION_RECORDS = 20000


def tagged_records(url: str) -> list[JobRecord]:
    """The store's newest :data:`CALIBRATION_RECORDS` tagged, finished records.

    Raises:
        ValueError, RuntimeError (StoreError, StoreDbError), OSError: as
        :func:`slurm_energy.store.open_store` (bad URL, no store yet, no permission).
    """
    from slurm_energy.store import open_store

    store = open_store(url, readonly=True)
    try:
        return store.tagged(limit=CALIBRATION_RECORDS)
    finally:
        store.close()


def _sp(sp: Spread | None) -> str:
    return "n/a" if sp is None else f"{sp.median:.3g} ({sp.p10:.3g}-{sp.p90:.3g})"


def cmd_calibration(args: argparse.Namespace) -> int:
    """Print the calibration; exit 1 if the store cannot be read."""
    from slurm_energy.accounting.calibration import fit, job_fit

    try:
        records = tagged_records(store_url(args.store, LenientSiteConfig("calibration").store_url).url)
    except Exception as e:
        print(f"slurm-energy calibration: store not readable: {e}", file=sys.stderr)
        return 1
    cals = fit(records)
    fits = [(r, *job_fit(r)) for r in records]
    if args.json:
        out = {"gpus": {c.gpu_model: {"jobs": c.n_jobs, "flops_frac": asdict(c.flops_frac),
                                      "power_frac": asdict(c.power_frac),
                                      "node_w_per_gpu": None if c.node_w_per_gpu is None else asdict(c.node_w_per_gpu)}
                        for c in cals.values()},
               "jobs": [{"job_id": r.job_id, "used": jf is not None, "why_not": why,
                         **({} if jf is None else asdict(jf))} for r, jf, why in fits]}
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
        return 0
    print(f"{len(records)} tagged jobs; {sum(c.n_jobs for c in cals.values())} used. Median (p10-p90):")
    print(f"{'GPU model':<32} {'jobs':>4}  {'FLOP/s fraction':<20} {'power fraction':<20} node W/GPU")
    for c in cals.values():
        print(f"{c.gpu_model:<32} {c.n_jobs:>4}  {_sp(c.flops_frac):<20} {_sp(c.power_frac):<20} {_sp(c.node_w_per_gpu)}")
    if args.verbose:
        for r, jf, why in fits:
            what = (f"{jf.gpu_model} x{jf.n_gpus:g}: f {jf.flops_frac:.3g}, p {jf.power_frac:.3g}" if jf is not None
                    else f"not used: {why}")
            print(f"  job {r.job_id}: {what}")
    return 0

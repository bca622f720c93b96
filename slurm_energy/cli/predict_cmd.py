"""``slurm-energy predict``: the method's prediction mode from the command line.

Example::

    slurm-energy predict --params 7e9 --tokens 1e9 --gpu "NVIDIA H100 80GB HBM3" --n-gpus 8 --util 0.4

GPU rated FLOP/s and power come from the bundled table (:mod:`slurm_energy.devices.hwtables`,
Epoch AI / Green Algorithms) unless ``--gpu-flops`` / ``--gpu-watts`` are given (they win).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from slurm_energy.accounting.prediction import (
    DeviceSpec,
    Prediction,
    PredictionError,
    inference_flops,
    require_positive,
    training_flops,
)

#: RAM power per GB, W/GB (Green Algorithms: Lannelongue, Grealey & Inouye, Adv. Sci. 2021).
RAM_W_PER_GB = 0.3725


def register(subparsers) -> None:
    """Add ``predict`` to the ``slurm-energy`` sub-command parsers."""
    p = subparsers.add_parser(
        "predict",
        help="predict time, kWh and kgCO2e of a job from its FLOPs (or model size) and hardware",
        description="E = PUE x sum_i n_i P_i u_i t with t = FLOPs / sum_i n_i R_i u_i; "
                    "CO2e = E x CI x alpha. Training FLOPs = 6 x params x tokens (Kaplan et al. 2020).",
    )
    w = p.add_argument_group("work (give --flops, or --params and --tokens)")
    w.add_argument("--flops", type=float, help="total FLOPs of the job")
    w.add_argument("--params", type=float, help="model parameters N, e.g. 7e9")
    w.add_argument("--tokens", type=float, help="tokens D, e.g. 1e9")
    w.add_argument("--inference", action="store_true", help="forward pass only: 2 N D FLOPs instead of 6 N D")
    g = p.add_argument_group("GPUs")
    g.add_argument("--gpu", default="", help='GPU model for the table look-up, e.g. "NVIDIA H100 80GB HBM3", "A100"')
    g.add_argument("--n-gpus", type=int, default=1, help="number of GPUs (default 1)")
    g.add_argument("--util", type=float, required=True, help="GPU utilisation u in (0, 1]: fraction of rated FLOP/s achieved")
    g.add_argument("--precision", choices=("bf16", "tf32", "fp32"), default="bf16", help="rated FLOP/s column (default bf16)")
    g.add_argument("--gpu-flops", type=float, help="rated FLOP/s per GPU (overrides the table)")
    g.add_argument("--gpu-watts", type=float, help="rated power per GPU, W (overrides the table)")
    c = p.add_argument_group("CPU and RAM (optional)")
    c.add_argument("--cpu-cores", type=int, help="CPU cores the job holds")
    c.add_argument("--cpu-watts-per-core", type=float, help="TDP per core, W")
    c.add_argument("--cpu-util", type=float, default=1.0, help="CPU utilisation in (0, 1] (default 1)")
    c.add_argument("--ram-gb", type=float, help="memory the job holds, GB")
    c.add_argument("--ram-watts-per-gb", type=float, default=RAM_W_PER_GB,
                   help=f"W per GB (default {RAM_W_PER_GB}, Green Algorithms 2021)")
    s = p.add_argument_group("site")
    s.add_argument("--pue", type=float, help="PUE (default: 1.58, Uptime Institute 2023)")
    s.add_argument("--ci", type=float, help="carbon intensity, gCO2e/kWh (default: --country, else 475 world IEA 2019)")
    s.add_argument("--country", help="ISO country code for the bundled carbon-intensity table, e.g. FR")
    s.add_argument("--alpha", type=float, default=1.0, help="offset factor alpha (default 1.0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_predict)


def work_flops(args) -> tuple[float, str]:
    """FLOPs from ``--flops`` or ``--params``/``--tokens``, with how they were obtained.

    Raises:
        PredictionError: neither or both given, or a value invalid.
    """
    if args.flops is not None:
        if args.params is not None or args.tokens is not None:
            raise PredictionError("--flops given together with --params/--tokens; pass one or the other")
        return require_positive("--flops", args.flops, "pass the job's total FLOPs, e.g. 4.2e19"), "given (--flops)"
    if args.params is None or args.tokens is None:
        raise PredictionError("--params/--tokens: both are needed (or give --flops); e.g. --params 7e9 --tokens 1e9")
    if args.inference:
        return inference_flops(args.params, args.tokens), "2 x params x tokens (inference, Kaplan et al. 2020)"
    return training_flops(args.params, args.tokens), "6 x params x tokens (training, Kaplan et al. 2020)"


def gpu_spec(args) -> DeviceSpec:
    """The GPU :class:`DeviceSpec` from the table look-up and/or ``--gpu-flops``/``--gpu-watts``.

    Raises:
        PredictionError: the model is unknown (and no explicit values), or the table lacks the
            requested precision's FLOP/s.
    """
    flops, watts, model, sources = args.gpu_flops, args.gpu_watts, args.gpu, []
    if flops is None or watts is None:
        if not args.gpu:
            raise PredictionError("--gpu is empty; name the GPU model (e.g. \"A100\") or give --gpu-flops and --gpu-watts")
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
            if flops is None:
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
    return DeviceSpec("gpu", count=args.n_gpus, rated_power_w=watts, util=args.util, flops_per_s=flops,
                      model=model, source="; ".join(sources)).validate()


def site_facts(args) -> dict:
    """PUE, CI, alpha with their sources: explicit flags, else ``--country`` table, else defaults.

    Raises:
        PredictionError: ``--country`` not in the bundled table.
    """
    from slurm_energy.model import CarbonFacts

    d = CarbonFacts()
    out = {"pue": d.pue, "pue_source": d.pue_source, "ci": d.ci_g_per_kwh, "ci_source": d.ci_source,
           "alpha": args.alpha, "alpha_source": "--alpha" if args.alpha != 1.0 else d.alpha_source}
    if args.pue is not None:
        out["pue"], out["pue_source"] = args.pue, "--pue"
    if args.ci is not None:
        out["ci"], out["ci_source"] = args.ci, "--ci"
    elif args.country:
        from slurm_energy.carbon.tables import lookup_country

        row = lookup_country(args.country)
        if row is None:
            raise PredictionError(f"--country={args.country!r} is not in the bundled table; use an ISO code (FR, DEU) or --ci")
        out["ci"], out["ci_source"] = row.g_per_kwh, row.describe() + (f", {row.basis}" if row.basis else "")
    return out


def build(args) -> tuple[Prediction, dict]:
    """Parse ``args`` into a :class:`Prediction` and notes (FLOPs basis, sources). Pure but for table reads."""
    from slurm_energy.accounting.prediction import predict

    flops, flops_basis = work_flops(args)
    devices = [gpu_spec(args)]
    if args.cpu_cores is not None:
        if args.cpu_watts_per_core is None:
            raise PredictionError("--cpu-watts-per-core is needed with --cpu-cores (TDP / cores, e.g. 150 W / 20 = 7.5)")
        devices.append(DeviceSpec("cpu", count=args.cpu_cores, rated_power_w=args.cpu_watts_per_core,
                                  util=args.cpu_util, source="--cpu-watts-per-core").validate())
    if args.ram_gb is not None:
        devices.append(DeviceSpec("ram", count=args.ram_gb, rated_power_w=args.ram_watts_per_gb, util=1.0,
                                  source="--ram-watts-per-gb" if args.ram_watts_per_gb != RAM_W_PER_GB
                                  else "Green Algorithms 0.3725 W/GB").validate())
    site = site_facts(args)
    pred = predict(flops, devices, pue=site["pue"], ci_g_per_kwh=site["ci"], alpha=site["alpha"])
    return pred, {"flops_basis": flops_basis, **site}


_UNITS = {"gpu": ("GPU", "GPU"), "cpu": ("CPU cores", "core"), "ram": ("GB RAM", "GB")}


def format_text(pred: Prediction, notes: dict) -> str:
    """Human-readable lines: FLOPs, devices, time, kWh per class, facility kWh, kgCO2e, sources."""
    lines = [f"FLOPs:            {pred.flops:.4g} ({notes['flops_basis']})"]
    for d in pred.devices:
        rate = f", {d.flops_per_s / 1e12:.4g} TFLOP/s" if d.flops_per_s else ""
        what, per = _UNITS.get(d.device_class, (d.device_class, "device"))
        lines.append(f"{d.device_class.upper() + ':':<18}{d.count:g} x {d.model or what}, {d.rated_power_w:g} W/{per}{rate}, "
                     f"util {d.util:g}" + (f"  [{d.source}]" if d.source else ""))
    lines.append(f"time:             {pred.time_s:.4g} s ({pred.time_s / 3600:.4g} h)")
    for cls, kwh in pred.energy_kwh.items():
        lines.append(f"IT energy {cls}:    {kwh:.4g} kWh")
    lines.append(f"IT energy:        {pred.it_kwh:.4g} kWh")
    lines.append(f"facility energy:  {pred.facility_kwh:.4g} kWh (PUE {pred.pue:g}: {notes['pue_source']})")
    lines.append(f"carbon:           {pred.co2e_kg:.4g} kgCO2e (CI {pred.ci_g_per_kwh:g} gCO2e/kWh: "
                 f"{notes['ci_source']}; alpha {pred.alpha:g})")
    lines.append(f"method:           {pred.method}")
    return "\n".join(lines) + "\n"


def cmd_predict(args) -> int:
    """Run the prediction; print text or JSON. Exit 2 with a message naming the bad input."""
    try:
        pred, notes = build(args)
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

"""``slurm-energy check-config [FILE]`` and ``slurm-energy ci-import FILE --zone Z``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slurm_energy import units

if TYPE_CHECKING:
    from slurm_energy.cli.main import Subparsers
    from slurm_energy.config.schema import SiteConfig


def register(subparsers: Subparsers) -> None:
    """Add ``check-config`` and ``ci-import`` to the ``slurm-energy`` sub-command parsers."""
    p = subparsers.add_parser("check-config", help="validate site.yaml and print the resolved values per partition")
    p.add_argument("file", nargs="?", default=None,
                   help="site config (default: $SLURM_ENERGY_CONFIG, else /etc/slurm-energy/site.yaml)")
    p.add_argument("--partition", action="append", default=[],
                   help="also resolve this partition (repeatable); configured partitions are always shown")
    p.add_argument("--offline", action="store_true", help="no network access (no geolocation request)")
    p.set_defaults(func=cmd_check_config)

    q = subparsers.add_parser("ci-import", help="validate an hourly carbon-intensity CSV and store it for a zone")
    q.add_argument("file", help="CSV: timestamp (ISO 8601 with offset, on the hour), gco2e_per_kwh")
    q.add_argument("--zone", required=True, help="grid zone: the location.region or location.country it applies to")
    q.add_argument("--config", default=None, help="site config (for paths.hourly_ci_dir)")
    q.add_argument("--allow-zero", action="store_true",
                   help="accept hours of 0 gCO2e/kWh (a supply the site counts as emitting nothing); "
                        "without it 0 is refused as a mistake, like any value below 1 gCO2e/kWh")
    q.add_argument("--kind", choices=("average", "marginal"), default="average",
                   help="the grid's average intensity (default; what jobs' CO2e uses unless attribution.intensity "
                        "says marginal) or its marginal one (e.g. WattTime MOER), stored beside it")
    q.add_argument("--source", default="", help="where the series came from, shown with every figure it gives "
                   "(default: the file's name), e.g. 'Electricity Maps FR 2026-11'")
    q.set_defaults(func=cmd_ci_import)

    r = subparsers.add_parser("price-import", help="validate an hourly electricity-price CSV (time-of-use tariff) "
                              "and store it for a zone")
    r.add_argument("file", help="CSV: timestamp (ISO 8601 with offset, on the hour), price_per_kwh (tariff.currency)")
    r.add_argument("--zone", required=True, help="the name site.yaml's tariff.zone gives")
    r.add_argument("--config", default=None, help="site config (for paths.hourly_price_dir)")
    r.set_defaults(func=cmd_price_import)


def _resolved_lines(cfg: SiteConfig, partitions: list[str], offline: bool) -> list[str]:
    from slurm_energy.config.carbon import hourly_zones_for, resolve_carbon

    out = [f"config: {cfg.source_path or '(none found: documented defaults)'}",
           f"cluster_name: {cfg.cluster_name!r}  timezone: {cfg.timezone}",
           f"sampling.interval_s: {cfg.sampling.interval_s:g} s  attribution.policy: {cfg.attribution.policy}",
           f"paths: spool={cfg.paths.spool_dir} results={cfg.paths.results_dir} store={cfg.paths.store_url} "
           f"hourly_ci={cfg.paths.hourly_ci_dir}",
           f"hardware: cpu_w_per_core={cfg.hardware.cpu_w_per_core:g} W ram_w_per_gb={cfg.hardware.ram_w_per_gb:g} W/GB "
           f"gpu_fallback_w={cfg.hardware.gpu_fallback_w}",
           f"geolocation: {'enabled' if cfg.geolocation.enabled else 'disabled'}"
           f"{' (offline)' if offline or cfg.offline else ''}"]
    if cfg.defaults_used:
        out.append(f"defaults used for: {', '.join(cfg.defaults_used)}")
    names = list(dict.fromkeys([p for dc in cfg.datacenters.values() for p in dc.partitions] + partitions))
    rows = [(p, resolve_carbon(cfg, p, offline=True if offline else None)) for p in names]
    rows.append(("(any other)", resolve_carbon(cfg, offline=True if offline else None)))
    for name, f in rows:
        hourly = hourly_zones_for(cfg, f)
        out.append(f"partition {name}: datacenter={f.datacenter or '-'}")
        out.append(f"  PUE {f.pue:g}  [{f.pue_source}]")
        out.append(f"  carbon intensity {f.ci_g_per_kwh:g} gCO2e/kWh basis={f.ci_basis or '?'} "
                   f"year={f.ci_year or '?'}  [{f.ci_source}]")
        out.append(f"  alpha {f.alpha:g}  [{f.alpha_source}]")
        if hourly:
            out.append(f"  hourly intensity zones looked up: {', '.join(hourly)}")
        if f.defaults_used:
            out.append(f"  DEFAULTS: {', '.join(f.defaults_used)}")
    return out


def no_config_lines() -> list[str]:
    """What is in force when no site config exists: the documented defaults, each with its source."""
    from slurm_energy import config as c

    return [f"NO SITE CONFIG FOUND: no FILE given, ${c.schema.ENV_VAR} unset and {c.schema.DEFAULT_PATH} absent.",
            *defaults_lines()]


def defaults_lines() -> list[str]:
    """The documented defaults in force (PUE, carbon intensity, per-device powers, sampling, paths),
    each with its source, and how to set the site's own."""
    from slurm_energy import config as c
    from slurm_energy.carbon.tables import WORLD_AVERAGE_G_PER_KWH, WORLD_AVERAGE_SOURCE
    from slurm_energy.config.load import documented_example

    d = c.SiteConfig()
    return [
        "Documented defaults are in force:",
        f"  PUE {c.schema.DEFAULT_PUE:g}: {units.DEFAULT_PUE_TEXT}",
        f"  carbon intensity {WORLD_AVERAGE_G_PER_KWH:g} gCO2e/kWh, world average ({WORLD_AVERAGE_SOURCE}); "
        f"alpha 1.0 (no offset)",
        f"  CPU {c.schema.DEFAULT_CPU_W_PER_CORE:g} W/core for unknown models; RAM {c.schema.DEFAULT_RAM_W_PER_GB:g} W/GB "
        f"(Green Algorithms); sampling every {d.sampling.interval_s:g} s",
        f"  paths: spool {d.paths.spool_dir}, store {d.paths.store_url}, logs {d.paths.log_dir}",
        f"To set your site's PUE, country and paths: copy {documented_example()} to {c.schema.DEFAULT_PATH} "
        f"(or set ${c.schema.ENV_VAR}) and edit it.",
    ]


def sets_nothing(cfg: SiteConfig) -> bool:
    """True when a site config file was read but sets no key (empty, or only comments): every
    setting is a documented default, which an admin who wrote the file did not mean."""
    from slurm_energy.config.schema import TOP_FACTS

    return bool(cfg.source_path) and all(k in cfg.defaults_used for k in TOP_FACTS)


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate site.yaml, check that its paths are usable, print the resolved facts.

    Exit 1 with the error text (field, value, fix) on an invalid config or an unusable path;
    exit 0 otherwise. Without any config file it says so and lists the documented defaults.
    """
    from slurm_energy.cli.config_check import catch_all_notes, check_carbon, check_hardware, check_paths, check_sampling
    from slurm_energy.config import ConfigError, load_site_config

    try:
        cfg = load_site_config(args.file)
    except ConfigError as e:
        print(f"invalid site config:\n{e}", file=sys.stderr)
        return 1
    print("\n".join(_resolved_lines(cfg, args.partition, args.offline)))
    if sets_nothing(cfg):  # an admin who wrote the file meant to set something
        warning = f"warning: {cfg.source_path} sets nothing (empty, or only comments)."
        print(warning, file=sys.stderr)
        print("\n".join([warning, *defaults_lines()]))
    notes: list[str] = catch_all_notes(cfg)
    errors = check_paths(cfg, notes)
    for n in notes:
        print(f"note: {n}")
    warnings: list[str] = check_hardware(cfg) + check_sampling(cfg)
    ci_errors = check_carbon(cfg, warnings)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if errors:
        print("unusable paths (jobs would be lost):\n" + "\n".join(errors), file=sys.stderr)
    if ci_errors:
        print("unusable carbon intensity:\n" + "\n".join(ci_errors), file=sys.stderr)
    if errors or ci_errors:
        return 1
    if not cfg.source_path:
        print("\n".join(no_config_lines()))
        print("OK: documented defaults in force (no site config found)")
        return 0
    if sets_nothing(cfg):
        print(f"OK: documented defaults in force ({cfg.source_path} sets nothing)")
        return 0
    print("OK")
    return 0


def cmd_ci_import(args: argparse.Namespace) -> int:
    """Validate FILE and merge it into ``<paths.hourly_ci_dir>/<zone>.csv``; exit 1 on bad data."""
    from slurm_energy.carbon.hourly import import_hourly_csv

    def run(cfg: SiteConfig, warnings: list[str]) -> tuple[int, int, str]:
        return import_hourly_csv(args.file, args.zone, cfg.paths.hourly_ci_dir, allow_zero=args.allow_zero,
                                 warnings=warnings, kind=args.kind, source=args.source)

    return _import_hours(args, "ci-import", "hourly_ci_dir", run, f"hours of {args.kind} intensity")


def cmd_price_import(args: argparse.Namespace) -> int:
    """Validate FILE and merge it into ``<paths.hourly_price_dir>/<zone>.csv``; exit 1 on bad data."""
    from slurm_energy.carbon.prices import import_price_csv

    return _import_hours(args, "price-import", "hourly_price_dir",
                         lambda cfg, _w: import_price_csv(args.file, args.zone, cfg.paths.hourly_price_dir),
                         "hourly prices")


def _import_hours(args: argparse.Namespace, cmd: str, dir_field: str,
                  run: Callable[[Any, list[str]], tuple[int, int, str]], what: str) -> int:
    """The one shape of ``ci-import`` and ``price-import``: load the site config, ``run(cfg,
    warnings)`` the import, print its warnings and what it stored; exit 1 with the reason on bad
    data, a bad config or a store directory that cannot be written."""
    from slurm_energy.config import ConfigError, load_site_config
    from slurm_energy.errors import HourlyDataError

    warnings: list[str] = []
    cfg = None
    try:
        cfg = load_site_config(args.config)
        n_new, n_all, path = run(cfg, warnings)
    except (ConfigError, HourlyDataError) as e:
        print(f"{cmd} failed:\n{e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = getattr(cfg.paths, dir_field) if cfg is not None else args.config
        print(f"{cmd} failed: cannot {'write under' if cfg is not None else 'read'} {where}: {e.strerror}",
              file=sys.stderr)
        return 1
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"imported {n_new} {what} for zone {args.zone}; {n_all} hours stored in {path}")
    return 0

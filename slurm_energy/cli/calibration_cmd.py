"""``slurm-energy calibration``: what the prediction learned from the site's measured jobs.

Per GPU model: how many jobs declared their FLOPs and were measured, the FLOP/s fraction, power
fraction and node overhead per GPU (median, p10-p90) that ``slurm-energy predict`` uses; with
``-v`` one line per tagged job, or the reason it was not used (no measured GPU energy, unknown
model, implausible tag). Reads the store (:meth:`slurm_energy.store.Store.tagged`).
"""

from __future__ import annotations

from slurm_energy.store.urls import STORE_HELP

import json
import sys
from dataclasses import asdict

#: Newest tagged, finished records read (the prediction reads the same).
CALIBRATION_RECORDS = 20000


def register(subparsers) -> None:
    """Add ``calibration`` to the ``slurm-energy`` sub-command parsers."""
    p = subparsers.add_parser(
        "calibration", help="show the prediction's calibration from the site's measured jobs that declared FLOPs",
        description="Per GPU model: jobs, FLOP/s fraction (achieved / rated), power fraction (drawn / rated) and "
                    "node overhead per GPU, median and p10-p90, as `slurm-energy predict` uses them.",
    )
    p.add_argument("--store", help=STORE_HELP)
    p.add_argument("-v", "--verbose", action="store_true", help="one line per tagged job, or why it was not used")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_calibration)


def tagged_records(url: str) -> list:
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


def store_url(args) -> str:
    """``--store``, else ``$SLURM_ENERGY_STORE``, else the site config's ``paths.store_url``
    (:func:`slurm_energy.store.urls.resolve_store_url`; the site config is read only when needed).
    Raises ValueError: ``--store ''``."""
    from slurm_energy.store.urls import resolve_store_url

    def from_config() -> str:
        from slurm_energy import config as C

        cfg, _ = C.load_site_config_for_hooks(save=False)
        return cfg.paths.store_url

    return resolve_store_url(args.store, from_config).url


def _sp(sp) -> str:
    return "n/a" if sp is None else f"{sp.median:.3g} ({sp.p10:.3g}-{sp.p90:.3g})"


def cmd_calibration(args) -> int:
    """Print the calibration; exit 1 if the store cannot be read."""
    from slurm_energy.accounting.calibration import fit, job_fit

    try:
        records = tagged_records(store_url(args))
    except Exception as e:  # noqa: BLE001 - one clear line, whatever the store's problem
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

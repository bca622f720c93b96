"""`slurm-energy` command: one sub-command per module, each module exposing ``register(subparsers)``.

Sub-command modules (add one line to ``_COMMAND_MODULES`` to add a command):

* :mod:`slurm_energy.cli.run_cmds`     -- run, sampler, prolog, epilog, finalize, install, report
* :mod:`slurm_energy.cli.config_cmds`  -- check-config, ci-import
* :mod:`slurm_energy.cli.store_cmds`   -- collect, rollup
* :mod:`slurm_energy.cli.predict_cmd`  -- predict
* :mod:`slurm_energy.cli.calibration_cmd` -- calibration
* :mod:`slurm_energy.cli.mail_cmd`     -- mail (MailProg wrapper)
"""

from __future__ import annotations

import argparse
import importlib
import sys

_COMMAND_MODULES = [
    "slurm_energy.cli.run_cmds",
    "slurm_energy.cli.config_cmds",
    "slurm_energy.cli.store_cmds",
    "slurm_energy.cli.predict_cmd",
    "slurm_energy.cli.calibration_cmd",
    "slurm_energy.cli.mail_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every registered sub-command."""
    p = argparse.ArgumentParser(prog="slurm-energy", description="Energy and carbon accounting for Slurm jobs.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; each sub-command sets ``func(args) -> int`` (exit status)."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""`slurm-energy` command: one sub-command per module, each module exposing ``register(subparsers)``.

Sub-command modules (add one line to ``_COMMAND_MODULES`` to add a command):

* :mod:`slurm_energy.cli.run_cmds`     -- run, attach, hook
* :mod:`slurm_energy.cli.install_cmd`  -- install
* :mod:`slurm_energy.cli.config_cmds`  -- check-config, ci-import
* :mod:`slurm_energy.cli.store_cmds`   -- collect, rollup
* :mod:`slurm_energy.cli.predict_cmd`  -- predict, calibration
* :mod:`slurm_energy.cli.mail_cmd`     -- mail (MailProg wrapper)
* :mod:`slurm_energy.cli.reconcile_cmd` -- reconcile (node meter vs jobs + idle)
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import TypeAlias

from slurm_energy.cli.pipe import quiet_on_broken_pipe

#: What each command module's ``register(subparsers)`` is given: ``add_subparsers()``'s action.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

_COMMAND_MODULES = [
    "slurm_energy.cli.run_cmds",
    "slurm_energy.cli.install_cmd",
    "slurm_energy.cli.config_cmds",
    "slurm_energy.cli.store_cmds",
    "slurm_energy.cli.predict_cmd",
    "slurm_energy.cli.mail_cmd",
    "slurm_energy.cli.reconcile_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with every registered sub-command."""
    p = argparse.ArgumentParser(prog="slurm-energy", description="Energy and carbon accounting for Slurm jobs.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return p


#: A negative number as typed, also in scientific notation (``-7e9``), which argparse would take for
#: an option ("expected one argument") and so never let the command name the bad value.
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    """Option strings (of the parser and its sub-commands) that take exactly one value."""
    out: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _value_options(sub)
        elif action.option_strings and action.nargs is None:
            out.update(action.option_strings)
    return out


def attach_negative_values(argv: list[str], value_options: set[str]) -> list[str]:
    """``["--params", "-7e9"]`` -> ``["--params=-7e9"]`` for options that take a value, so the
    command's own check names the field (``--params=-7e9 must be > 0``); other tokens unchanged."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in value_options and i + 1 < len(argv) and _NEGATIVE_NUMBER.match(argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point; each sub-command sets ``func(args) -> int`` (exit status)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(attach_negative_values(argv, _value_options(parser)))
    return quiet_on_broken_pipe(lambda: int(args.func(args) or 0))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``slurm-energy mail``: the MailProg wrapper's arguments; the work is :mod:`slurm_energy.slurm.mailprog`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_energy.cli.main import Subparsers
def register(sub: Subparsers) -> None:
    """Add ``mail`` to the ``slurm-energy`` sub-parsers."""
    p = sub.add_parser("mail", help="MailProg wrapper: add the job's energy to Slurm's mail, then call the "
                       "real mail program (outputs.mail.program)")
    p.add_argument("mail_args", nargs="*", help="what slurmctld passes: -s SUBJECT USER")
    p.set_defaults(func=cmd_mail)


def cmd_mail(args: argparse.Namespace) -> int:
    """Entry for ``slurm-energy mail``; always returns 0 (:func:`slurm_energy.slurm.mailprog.mail`)."""
    from slurm_energy.slurm.mailprog import mail

    return mail(args.mail_args)

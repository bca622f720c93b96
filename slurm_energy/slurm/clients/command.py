"""Running a Slurm client (sacct, scontrol): the one place that starts one.

Absolute paths (the finalizer inherits the hooks' empty PATH), ``LANG=C`` and only the caller's
``SLURM_CONF`` in the client's environment, text out, a timeout. Never run on the Prolog/Epilog
path. What a client prints is read by the pure parsers beside this module.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import Any

from slurm_energy.slurmpaths import client_path

SACCT = client_path("sacct")
SCONTROL = client_path("scontrol")

#: ``subprocess.run`` or a test's stand-in with its signature
Run = Callable[..., "subprocess.CompletedProcess[str]"]
#: ``time.sleep`` or a test's stand-in
Sleep = Callable[[float], Any]


def slurm_client(argv: list[str], run: Run = subprocess.run, timeout_s: float = 10.0) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client (``argv[0]`` an absolute path: sacct, scontrol) as every caller here does:
    ``LANG=C`` and only the caller's ``SLURM_CONF`` in its environment, text out (a user's
    non-UTF-8 job name kept losslessly, surrogateescape), at most ``timeout_s`` s. Returns the
    ``subprocess.CompletedProcess``; raises OSError (FileNotFoundError: not installed) and
    subprocess.TimeoutExpired. ``run``: ``subprocess.run`` or a test's stand-in."""
    env = {"LANG": "C", **({"SLURM_CONF": os.environ["SLURM_CONF"]} if os.environ.get("SLURM_CONF") else {})}
    return run(argv, capture_output=True, text=True, errors="surrogateescape", timeout=timeout_s, env=env)

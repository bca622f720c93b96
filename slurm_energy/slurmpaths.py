"""Where Slurm's client commands are (sacct, scontrol, sacctmgr), for every process that runs one.

Looked for in order: Debian's and RHEL's packages (/usr/bin), a source build's default prefix
(/usr/local/bin), and the prefixes sites install SchedMD's builds under (/opt/slurm/bin,
/usr/local/slurm/bin). The finalizer runs with the hooks' empty PATH, so a PATH search would find
nothing; an absolute path is what every caller runs. Stdlib only, a few stat calls.
"""

from __future__ import annotations

import os

SLURM_BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/opt/slurm/bin", "/usr/local/slurm/bin")


def client_path(name: str, dirs: tuple[str, ...] = SLURM_BIN_DIRS) -> str:
    """The absolute path of Slurm's client ``name`` in the first of ``dirs`` that has it as an
    executable file; ``dirs[0]``'s when none has (running it then fails with FileNotFoundError,
    which each caller records: "not installed")."""
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return os.path.join(dirs[0], name)

"""Who a store reader (``jobenergy``, ``slurm-energy rollup``) acts for.

Run through sudo (``sudo jobenergy``, the way docs/STORE.md offers a root-only store to users), the
process is root but the person is the caller that sudo names in ``SUDO_UID``/``SUDO_USER``: a caller
who is not root and not in the site config's ``admins`` sees only their own jobs. The admins list
is then the system site config's (/etc/slurm-energy/site.yaml): a ``SLURM_ENERGY_CONFIG`` the caller
passed through sudo is ignored (said once on stderr), or anyone could name themselves admin in a
YAML file of their own. Without sudo nothing changes: root sees every job, users are governed by
the store's own permissions (``admins`` is a filter, not a security boundary).
"""

from __future__ import annotations

import os
import pwd
import sys
from typing import Optional

from slurm_energy.slurm import hookconfig as H


def sudo_caller() -> Optional[tuple[int, str]]:
    """``(uid, name)`` of the non-root user who ran this process through sudo (effective uid 0 and
    ``SUDO_UID``/``SUDO_USER`` naming another user than root), else None."""
    if os.geteuid() != 0:
        return None
    uid_text, name = os.environ.get("SUDO_UID", "").strip(), os.environ.get("SUDO_USER", "").strip()
    uid: Optional[int] = int(uid_text) if uid_text.isdigit() else None
    if uid is None and name:
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            uid = -1  # a name sudo gave but this host does not know: still not root
    if uid is None or uid == 0 or name == "root":
        return None
    if not name:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
    return uid, name


def ignore_callers_config(prog: str) -> None:
    """Under sudo (:func:`sudo_caller`), drop ``$SLURM_ENERGY_CONFIG`` from this process's
    environment so the system site config decides who is an admin; print one stderr line when it
    was set. Does nothing otherwise."""
    if sudo_caller() is None:
        return
    given = os.environ.pop(H.ENV_VAR, None)
    if given:
        print(f"{prog}: note: run through sudo: {H.ENV_VAR}={given} is ignored; the system site config "
              f"{H.DEFAULT_PATH} is used (its admins, store and time zone)", file=sys.stderr)


def reader_identity(admins: list) -> tuple[int, str, bool]:
    """``(uid, user name, privileged)`` of the person a reader acts for: the sudo caller when
    there is one (privileged only if named in ``admins``), else the real uid (privileged when root
    or named in ``admins``)."""
    caller = sudo_caller()
    if caller is not None:
        uid, me = caller
        return uid, me, me in admins
    uid = os.getuid()
    try:
        me = pwd.getpwuid(uid).pw_name
    except KeyError:
        me = str(uid)
    return uid, me, uid == 0 or me in admins

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

import contextlib
import os
import pwd
import sys
from collections.abc import Iterator

from slurm_energy.slurm import config_cache as H


def sudo_caller() -> tuple[int, str] | None:
    """``(uid, name)`` of the non-root user who ran this process through sudo (effective uid 0 and
    ``SUDO_UID``/``SUDO_USER`` naming another user than root), else None."""
    if os.geteuid() != 0:
        return None
    uid_text, name = os.environ.get("SUDO_UID", "").strip(), os.environ.get("SUDO_USER", "").strip()
    uid: int | None = int(uid_text) if uid_text.isdigit() else None
    if uid is None and name:
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            uid = -1  # a name sudo gave but this host does not know: still not root
    if uid is None or uid == 0 or name == "root":
        return None
    return uid, name or user_name(uid)


def user_name(uid: int) -> str:
    """The user name of ``uid``, or the number as text when this host does not know it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


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


def caller_named_store(store_arg: str | None) -> str | None:
    """Under sudo, why a store the caller names (``--store``, ``$SLURM_ENERGY_STORE``) is refused:
    root would open a path of the caller's choosing (a FIFO, a device, another store) with root's
    rights. None when not under sudo or when none is named. The system site config's
    ``paths.store_url`` is the store sudo offers; a store of their own they read without sudo."""
    if sudo_caller() is None:
        return None
    named = [w for w, v in (("--store", store_arg), ("$SLURM_ENERGY_STORE", os.environ.get("SLURM_ENERGY_STORE")))
             if v]
    if not named:
        return None
    return (f"run through sudo, {' and '.join(named)} is not taken: root would open a store you name; the "
            f"system site config's store ({H.DEFAULT_PATH}: paths.store_url) is the one sudo offers; read a store "
            "of your own without sudo")


@contextlib.contextmanager
def as_caller() -> Iterator[None]:
    """Under sudo, run the ``with`` body with the caller's effective uid, gid and groups (files it
    opens or creates are opened as the caller, owned by the caller: never a root open of a path the
    caller named, such as ``rollup --out``); root's again afterwards. Without sudo: unchanged."""
    caller = sudo_caller()
    if caller is None:
        yield
        return
    uid = caller[0]
    try:
        pw = pwd.getpwuid(uid)
        gid, groups = pw.pw_gid, os.getgrouplist(pw.pw_name, pw.pw_gid)
    except KeyError:
        gid_text = os.environ.get("SUDO_GID", "")
        gid = int(gid_text) if gid_text.isdigit() else 65534
        groups = [gid]
    saved = os.getgroups()
    os.setgroups(groups)
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(saved)


def reader_identity(admins: list[str]) -> tuple[int, str, bool]:
    """``(uid, user name, privileged)`` of the person a reader acts for: the sudo caller when
    there is one (privileged only if named in ``admins``), else the real uid (privileged when root
    or named in ``admins``)."""
    caller = sudo_caller()
    if caller is not None:
        uid, me = caller
        return uid, me, me in admins
    uid = os.getuid()
    me = user_name(uid)
    return uid, me, uid == 0 or me in admins

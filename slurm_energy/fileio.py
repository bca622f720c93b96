"""Atomic file writes (stdlib only: the Prolog/Epilog import it).

One writer for every small file slurm-energy must never leave half-written: spool files (job
context, pid, markers), the store's retry queue, the site config's last good copy.
"""

from __future__ import annotations

import os


def atomic_write(path: str | os.PathLike[str], text: str | bytes, *, mode: int = 0o600, fsync: bool = False,
                 exclusive: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file ``<path>.tmp<pid>`` in the
    same directory (opened O_NOFOLLOW: a planted symlink is refused, not followed), then
    ``os.replace``. ``mode``: the file's permission bits (default 0600, root-only spool files).
    ``fsync``: flush to disk before the rename (records that must survive a node crash).
    ``exclusive``: for a directory others may write (a Prometheus textfile dir): the temporary
    file is a fresh unguessable name ``<path>.<pid>.<random>.tmp`` created ``O_EXCL``, never an
    existing file. ``text`` may be bytes (written as they are).

    Raises OSError (ENOSPC, EROFS, ELOOP for a symlink at the temporary name...), leaving no
    temporary file behind; one left by a killed writer is overwritten by the next writer with that
    PID (``slurm_energy.slurm.attempt.remove_stale_tmp`` removes old ones in spools)."""
    if exclusive:
        import secrets

        tmp, flags = f"{os.fspath(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp", os.O_EXCL | os.O_CLOEXEC
    else:
        tmp, flags = f"{os.fspath(path)}.tmp{os.getpid()}", os.O_TRUNC
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | flags, mode)
        os.fchmod(fd, mode)  # exact, whatever the umask
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def shipped_file(package: str, checkout_dir: str, name: str) -> str:
    """The path of ``name`` shipped as package data of ``package`` (``slurm_energy.hooks``,
    ``slurm_energy.site_config``, ``slurm_energy.systemd``: pyproject's package-dir maps top-level
    folders there), or, run from a source checkout where that mapping does not apply, of
    ``checkout_dir/name`` at the checkout's top (``hooks``, ``site_config``, ``packaging/systemd``)."""
    from importlib import resources

    try:
        return str(resources.files(package).joinpath(name))
    except ModuleNotFoundError:
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), checkout_dir, name)

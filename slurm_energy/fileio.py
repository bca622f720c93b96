"""Atomic file writes (stdlib only: the Prolog/Epilog import it).

One writer for every small file slurm-energy must never leave half-written: spool files (job
context, pid, markers), the store's retry queue, the site config's last good copy.
"""

from __future__ import annotations

import os


def atomic_write(path: "str | os.PathLike[str]", text: str, *, mode: int = 0o600, fsync: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file ``<path>.tmp<pid>`` in the
    same directory (opened O_NOFOLLOW: a planted symlink is refused, not followed), then
    ``os.replace``. ``mode``: the file's permission bits (default 0600, root-only spool files).
    ``fsync``: flush to disk before the rename (records that must survive a node crash).

    Raises OSError (ENOSPC, EROFS, ELOOP for a symlink at the temporary name...), leaving no
    temporary file behind; one left by a killed writer is overwritten by the next writer with that
    PID (``slurm_energy.slurm.spool.remove_stale_tmp`` removes old ones in spools)."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        os.fchmod(fd, mode)  # exact, whatever the umask
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
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

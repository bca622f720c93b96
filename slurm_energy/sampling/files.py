"""Where the readers' files come from: kept descriptors (:class:`KeptFiles`), or a recording or a
replay of them (the Prolog's reading, :mod:`slurm_energy.slurm.prolograw`), passed in explicitly.

A procfs, sysfs or cgroupfs attribute read at offset 0 is produced afresh at each read, so a file
read every sample is opened once and read with one ``pread`` (no open + read + close per sample).
Stdlib only (os, errno): the Prolog's path imports this module.
"""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (on the Prolog's path)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol

    class FileSource(Protocol):
        """What a reader reads its per-sample files through."""

        def read(self, path: str, size: int = 1 << 16) -> bytes:
            """The file's content now (at most ``size`` bytes). Raises OSError."""


class KeptFiles:
    """Files read again and again through descriptors kept open (one ``pread`` at offset 0 a read).

    ``limit``: at most that many descriptors kept; other files are opened, read and closed each
    time. ``watch_unlinked``: a regular file (``st_size > 0`` at open: a fake tree in tests) is
    checked for removal at each read (``st_nlink == 0`` raises ENOENT): a removed cgroupfs file
    answers ENODEV by itself, a plain file would go on answering. A failed read drops the
    descriptor (opened again at the next read) and raises."""

    def __init__(self, limit: int = 1 << 20, watch_unlinked: bool = False):
        self.limit, self.watch_unlinked = limit, watch_unlinked
        self._fds: dict[str, int] = {}
        self._plain: set[int] = set()

    def fd(self, path: str) -> int:
        """The kept descriptor on ``path``, opened if needed. Raises OSError."""
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            if self.watch_unlinked and os.fstat(fd).st_size > 0:
                self._plain.add(fd)
        return fd

    def read(self, path: str, size: int = 1 << 16) -> bytes:
        """``path``'s content now, at most ``size`` bytes. Raises OSError (the descriptor dropped)."""
        try:
            fd = self._fds.get(path)
            if fd is None:
                if len(self._fds) >= self.limit:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                    try:
                        return os.read(fd, size)
                    finally:
                        os.close(fd)
                fd = self.fd(path)
            data = os.pread(fd, size, 0)
            if fd in self._plain and os.fstat(fd).st_nlink == 0:
                raise OSError(errno.ENOENT, "removed", path)
            return data
        except OSError:
            self.drop(path)
            raise

    def drop(self, path: str) -> None:
        """Close ``path``'s descriptor, if kept."""
        fd = self._fds.pop(path, None)
        if fd is not None:
            self._plain.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def retain(self, paths: Iterable[str]) -> None:
        """Close every kept descriptor whose path is not in ``paths``."""
        keep = set(paths)
        for p in [p for p in self._fds if p not in keep]:
            self.drop(p)

    def close(self) -> None:
        """Close every kept descriptor (a later read opens them again)."""
        for p in list(self._fds):
            self.drop(p)


class RecordingFiles:
    """Reads ``inner`` (default: plain reads) and keeps the paths read, in :attr:`paths`: the files a
    Prolog must read for its row (:func:`slurm_energy.slurm.prolograw.save_recipe`)."""

    def __init__(self, inner: FileSource | None = None):
        self.inner = inner or KeptFiles(limit=0)
        self.paths: list[str] = []

    def read(self, path: str, size: int = 1 << 16) -> bytes:
        """As :meth:`KeptFiles.read`; ``path`` recorded first."""
        self.paths.append(path)
        return self.inner.read(path, size)


class ReplayFiles:
    """File contents read earlier (``files``: {path: contents as latin-1 text}) read again. A path
    not in ``files`` (a file the Prolog did not read) raises ENOENT and is kept in :attr:`missing`:
    the caller drops the row rather than mix two instants."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.missing: list[str] = []

    def read(self, path: str, size: int = 1 << 16) -> bytes:
        """The recorded contents of ``path``. Raises FileNotFoundError for a path not recorded."""
        text = self.files.get(path)
        if text is None:
            self.missing.append(path)
            raise FileNotFoundError(errno.ENOENT, "not read by the Prolog", path)
        return text.encode("latin-1")[:size]

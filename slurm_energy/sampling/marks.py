"""The job's phase/stage/tag marks file: written by the training script, read by root as data.

Inside a Slurm job the Prolog creates ``<MARKS_ROOT>/<job_id>/`` (0700, owned by the job's user; the
parent is root's, 0755, so the user cannot swap the directory itself) and the job's
``slurm_energy.track`` appends JSON lines to ``marks-<node>.jsonl`` in it (format:
:mod:`slurm_energy.accounting.phases`). The finalizer reads it with :func:`read_marks_file`: no
symlink followed (O_NOFOLLOW on the directory and the file), a regular file only (a FIFO or device
is refused without blocking: O_NONBLOCK), at most :data:`MAX_BYTES` read, parsed as data, then
removed. Outside Slurm the same file format lives beside the local sample file.
"""

from __future__ import annotations

import json
import os
import stat
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the Prolog imports this module)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Where the Prolog makes per-job marks directories (tmpfs: gone at reboot). Override for tests and
#: non-standard nodes with $SLURM_ENERGY_MARKS_DIR (read by the hooks and by ``track``). Its own root,
#: apart from the root-only fallback spool (``paths.spool_fallback_dir``, /run/slurm-energy, 0700):
#: users must traverse this one (0755), and the spool code makes its own dirs 0700. docs/PRIVACY.md:
#: a size-limited tmpfs of its own bounds what jobs can write there while they run.
MARKS_ROOT = "/run/slurm-energy-marks"
#: What the finalizer's clean-up and the Prolog's sweep remove whatever the user left: the job's
#: whole directory. The Prolog's sweep removes a directory of a job not running on this node any
#: more (no spool of it without its finalized marker) once it is older than this, s.
STALE_AFTER_S = 3600.0
#: Most bytes of a marks file that are read (the rest is ignored, flagged ``marks_truncated_bytes``).
MAX_BYTES = 1 << 20


def marks_root() -> str:
    """$SLURM_ENERGY_MARKS_DIR or :data:`MARKS_ROOT`."""
    return os.environ.get("SLURM_ENERGY_MARKS_DIR") or MARKS_ROOT


def job_marks_dir(job_id: str, root: str | None = None) -> str:
    """``<root>/<job_id>``; raises ValueError for a job id that is not a plain name."""
    if not job_id or "/" in job_id or job_id in (".", ".."):
        raise ValueError(f"job id {job_id!r} cannot name a marks directory (SLURM_JOB_ID is a number)")
    return os.path.join(root or marks_root(), job_id)


def marks_file_name(node: str) -> str:
    """``marks-<node>.jsonl`` (node names never contain '/')."""
    return f"marks-{node.replace('/', '_')}.jsonl"


def prepare_job_dir(job_id: str, uid: int, gid: int, root: str | None = None, node: str = "") -> str:
    """Prolog side (root): make ``<root>/<job_id>`` owned by the job's user, mode 0700; the root
    directory is made root-owned 0755. Cheap (a few syscalls, no tree walk): safe on the hook path.

    An existing path is left over from an earlier job with the same id (a restarted cluster reuses
    ids; a requeue) unless it is another node of this job on the same host: a real directory of
    this user is kept, minus this node's old marks file (unlinked: never followed); anything else
    (a file, a symlink, another user's directory) is renamed aside to ``.stale-<job_id>-<ns>`` for
    :func:`remove_marks` to delete after the job. Returns the directory. Raises OSError."""
    root = root or marks_root()
    os.makedirs(root, mode=0o755, exist_ok=True)
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or (os.geteuid() == 0 and st.st_uid != 0):
        raise OSError(f"{root}: marks root is not a root-owned directory; fix or set SLURM_ENERGY_MARKS_DIR")
    d = job_marks_dir(job_id, root)
    old: os.stat_result | None
    try:
        old = os.lstat(d)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISDIR(old.st_mode) and old.st_uid == uid:
        if node:
            try:
                os.unlink(os.path.join(d, marks_file_name(node)))
            except FileNotFoundError:
                pass
    else:
        if old is not None:
            os.rename(d, os.path.join(root, f".stale-{job_id}-{time.time_ns()}"))
        os.mkdir(d, 0o700)
    os.lchown(d, uid, gid)
    os.chmod(d, 0o700)  # a real directory (made or checked above; the root-owned parent stops a swap)
    return d


def read_marks_file(dir_path: str, name: str, max_bytes: int = MAX_BYTES) -> tuple[list[str], list[str]]:
    """Root side: the lines of ``dir_path/name`` as text, read as data only.

    Returns ``(lines, flags)``; a missing directory or file gives ``([], [])``. Flags:
    ``marks_not_regular`` (symlink, FIFO, device: not read), ``marks_truncated_bytes:<n>`` (more
    than ``max_bytes``; the last partial line dropped), ``marks_unreadable:<errno name>``.
    Never raises."""
    import errno

    def code(e: OSError) -> str:
        return errno.errorcode.get(e.errno or 0, str(e.errno))

    flags: list[str] = []
    try:
        dfd = os.open(dir_path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return [], []
    except OSError as e:
        return [], [f"marks_unreadable:{code(e)}"]
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except FileNotFoundError:
        return [], []
    except OSError as e:
        return [], ["marks_not_regular" if e.errno == errno.ELOOP else f"marks_unreadable:{code(e)}"]
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [], ["marks_not_regular"]
        data = os.read(fd, max_bytes + 1) if st.st_size else b""
        while st.st_size and len(data) <= max_bytes:  # short reads
            more = os.read(fd, max_bytes + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as e:
        return [], [f"marks_unreadable:{code(e)}"]
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        flags.append(f"marks_truncated_bytes:{max_bytes}")
        data = data[:max_bytes].rsplit(b"\n", 1)[0]
    return data.decode("utf-8", "surrogateescape").splitlines(), flags  # lossless: text_safe shows it


def remove_marks(job_id: str, node: str, root: str | None = None) -> None:
    """Finalizer side: remove this node's marks file; once no other node's marks file is left
    (several nodes of a test cluster share one host), the job's directory with whatever the user
    left in it (``shutil.rmtree`` works by file descriptors on Linux: a planted symlink is removed,
    never followed). Never raises."""
    import shutil

    try:
        d = job_marks_dir(job_id, root)
        if not os.path.isdir(d) or os.path.islink(d):
            return
        try:
            os.unlink(os.path.join(d, marks_file_name(node)))
        except FileNotFoundError:
            pass
        if not any(n.startswith("marks-") for n in os.listdir(d)):
            shutil.rmtree(d, ignore_errors=True)
        parent = os.path.dirname(d)
        for n in os.listdir(parent):  # what the Prolog set aside for this job id
            if n.startswith(f".stale-{job_id}-"):
                p = os.path.join(parent, n)
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    os.unlink(p)  # a symlink or file: the entry itself, never its target
    except (OSError, ValueError):
        pass


def bound_job_dir(job_id: str, root: str | None = None, max_bytes: int = MAX_BYTES) -> list[str]:
    """Sampler side (root), at each interim: what a job's user may keep in its marks directory
    while it runs is its ``marks-<node>.jsonl`` files, each at most ``max_bytes`` (the finalizer
    reads no more): anything else is removed, a longer marks file cut to ``max_bytes``. By
    descriptor, never following a link (O_NOFOLLOW; a link is unlinked, not followed). The marks
    root should still be a size-limited tmpfs of its own (docs/PRIVACY.md): between two interims a
    job can write as fast as the disk takes. Returns what was removed or cut. Never raises."""
    out: list[str] = []
    try:
        d = job_marks_dir(job_id, root)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (OSError, ValueError):
        return out
    try:
        for e in os.scandir(dfd):
            try:
                st = e.stat(follow_symlinks=False)
                if e.name.startswith("marks-") and e.name.endswith(".jsonl") and stat.S_ISREG(st.st_mode):
                    if st.st_size > max_bytes:
                        fd = os.open(e.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
                        try:
                            os.ftruncate(fd, max_bytes)
                        finally:
                            os.close(fd)
                        out.append(f"{e.name}>{max_bytes}")
                    continue
                if stat.S_ISDIR(st.st_mode):
                    import shutil

                    shutil.rmtree(e.name, dir_fd=dfd, ignore_errors=True)
                else:
                    os.unlink(e.name, dir_fd=dfd)
                out.append(e.name)
            except OSError:
                continue
    finally:
        os.close(dfd)
    return out


def sweep_marks(live: set[str] | Callable[[], set[str]], root: str | None = None,
                now: float | None = None, older_than_s: float = STALE_AFTER_S) -> list[str]:
    """Prolog side (root): remove the marks directories (and ``.stale-*`` entries) under ``root``
    of jobs not in ``live`` (the job ids with an unfinished spool on this node) whose directory
    was last changed ``older_than_s`` ago: what a finalizer killed before its clean-up left. One
    listdir; never follows a symlink (``rmtree`` by descriptors; a link itself is unlinked).
    ``live`` may be a function giving that set: called once, and only when an entry is old
    enough to go (the Prolog's usual case, no such entry, then lists no spool). Returns the names
    removed. Never raises."""
    root = root or marks_root()
    now = time.time() if now is None else now
    out: list[str] = []
    try:
        names = os.listdir(root)
    except OSError:
        return out
    known: set[str] | None = live if isinstance(live, set) else None
    for n in names:
        job = n.split("-")[1] if n.startswith(".stale-") and n.count("-") >= 2 else n
        p = os.path.join(root, n)
        try:
            st = os.lstat(p)
            if now - st.st_mtime < older_than_s:
                continue
            if known is None:
                known = live() if callable(live) else set(live)
            if job in known:
                continue
            if stat.S_ISDIR(st.st_mode):
                import shutil  # here only: its import costs every Prolog ~7 modules

                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
            out.append(n)
        except OSError:
            continue
    return out


class MarksWriter:
    """User side: appends one JSON line per mark to ``path`` (created 0600, O_NOFOLLOW), each
    written whole with one ``write`` and flushed, so a reader never sees half a mark. Stops
    writing (silently; the reader flags the truncation) past :data:`MAX_BYTES`."""

    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        self._size = os.fstat(self._fd).st_size

    def write(self, ev: str, t: float | None = None, **fields: Any) -> None:
        """Append ``{"t": t or now, "ev": ev, **fields}``. OSError propagates."""
        line = (json.dumps({"t": time.time() if t is None else t, "ev": ev, **fields},
                           separators=(",", ":")) + "\n").encode()
        if self._size + len(line) > MAX_BYTES:
            return
        os.write(self._fd, line)
        self._size += len(line)

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass

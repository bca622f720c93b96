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
#: Where a job's marks directory goes when it is removed: renamed (one syscall, whatever the user
#: left in it) into this root-only directory of the marks root, then emptied a bounded amount at a
#: time by the node finalizer's sweep (:func:`empty_trash`), never on the Prolog/Epilog path.
TRASH = ".trash"
#: What one sweep (:func:`sweep_marks`) does at most: entries of the marks root looked at, entries
#: removed from the trash, seconds.
SWEEP_MAX_ENTRIES = 20000
SWEEP_MAX_S = 1.0
#: What a job's finalizer removes from the trash at most (its own directory's few files, usually)
FINALIZER_MAX_ENTRIES = 1000
FINALIZER_MAX_S = 0.2
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


def discard(root: str, name: str) -> bool:
    """Move ``<root>/<name>`` (a user's directory, whatever is in it, or a file or link) into the
    root-only :data:`TRASH` of ``root``: one rename, whose cost no user decides. False if it is
    gone already. Raises OSError."""
    trash = os.path.join(root, TRASH)
    try:
        os.mkdir(trash, 0o700)
    except FileExistsError:
        st = os.lstat(trash)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(f"{trash}: not this user's directory; remove it") from None
    try:
        os.rename(os.path.join(root, name), os.path.join(trash, f"{name}.{time.time_ns()}"))
    except FileNotFoundError:
        return False
    return True


def empty_trash(root: str | None = None, max_entries: int = SWEEP_MAX_ENTRIES,
                deadline: float | None = None) -> tuple[int, bool]:
    """Remove what :func:`discard` moved into ``root``'s trash, at most ``max_entries`` entries and
    until ``deadline`` (``time.monotonic()``; None: :data:`SWEEP_MAX_S` from now), by descriptor:
    never following a link (a link itself is unlinked). Returns (entries removed, trash empty?);
    what is left is the next sweep's. Never raises."""
    import errno

    deadline = time.monotonic() + SWEEP_MAX_S if deadline is None else deadline
    removed = 0
    try:
        top = os.open(os.path.join(root or marks_root(), TRASH), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0, True
    stack: list[tuple[int, str | None]] = [(top, None)]  # (directory fd, its name in its parent)
    try:
        while stack:
            dfd, _ = stack[-1]
            descended = False
            with os.scandir(dfd) as it:
                for e in it:
                    if removed >= max_entries or time.monotonic() > deadline:
                        return removed, False
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append((os.open(e.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                                  dir_fd=dfd), e.name))
                            descended = True
                            break
                        os.unlink(e.name, dir_fd=dfd)
                        removed += 1
                    except OSError:
                        continue
            if descended:
                continue
            fd, name = stack.pop()
            os.close(fd)
            if name is not None and stack:
                try:
                    os.rmdir(name, dir_fd=stack[-1][0])
                    removed += 1
                except OSError as e:
                    if e.errno not in (errno.ENOENT, errno.ENOTEMPTY):
                        return removed, False
                    if e.errno == errno.ENOTEMPTY:  # an entry it could not remove: give up for now
                        return removed, False
        return removed, True
    finally:
        for fd, _ in stack:
            os.close(fd)


def remove_marks(job_id: str, node: str, root: str | None = None) -> None:
    """Finalizer side: remove this node's marks file; once no other node's marks file is left
    (several nodes of a test cluster share one host), move the job's directory, with whatever the
    user left in it, and what the Prolog set aside for this job id into the trash
    (:func:`discard`: one rename each), then empties the trash for at most
    :data:`FINALIZER_MAX_ENTRIES` entries / :data:`FINALIZER_MAX_S` (the node finalizer's sweep does
    the rest). Never raises."""
    try:
        root = root or marks_root()
        d = job_marks_dir(job_id, root)
        if not os.path.isdir(d) or os.path.islink(d):
            return
        try:
            os.unlink(os.path.join(d, marks_file_name(node)))
        except FileNotFoundError:
            pass
        with os.scandir(d) as it:  # at most until the first marks file: not a walk of the user's entries
            other = any(e.name.startswith("marks-") for e in it)
        if not other:
            discard(root, job_id)
        with os.scandir(root) as it:  # the root's names are root's (0755): its size is the node's jobs
            for e in it:
                if e.name.startswith(f".stale-{job_id}-"):
                    discard(root, e.name)
        empty_trash(root, FINALIZER_MAX_ENTRIES, time.monotonic() + FINALIZER_MAX_S)  # a usual job's: all of it
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


def sweep_marks(live: Callable[[], set[str]], root: str | None = None, max_entries: int = SWEEP_MAX_ENTRIES,
                max_s: float = SWEEP_MAX_S) -> list[str]:
    """The node finalizer's sweep (root), never a hook: move into the trash the marks directories
    (and ``.stale-*`` entries) under ``root`` of jobs not in ``live()`` -- the job ids with a spool
    attempt on this host that a node has not finalized (root's own records: no time or file a user
    can set decides), called after the root is listed, so a job whose Prolog is making its
    directory now is in it -- then empty the trash (:func:`empty_trash`). At most ``max_entries``
    entries of the root looked at and removed from the trash, and about ``max_s`` seconds; the
    rest is the next sweep's. Returns the names moved. Never raises."""
    root = root or marks_root()
    deadline = time.monotonic() + max_s
    out: list[str] = []
    names: list[str] = []
    try:
        with os.scandir(root) as it:
            for e in it:
                if len(names) >= max_entries:
                    break
                if e.name != TRASH:
                    names.append(e.name)
    except OSError:
        return out
    if names:
        try:
            known = live()
        except Exception:
            return out  # cannot tell which jobs run here: nothing is moved
        for n in names:
            job = n.split("-")[1] if n.startswith(".stale-") and n.count("-") >= 2 else n
            if job in known or time.monotonic() > deadline:
                continue
            try:
                if discard(root, n):
                    out.append(n)
            except OSError:
                continue
    empty_trash(root, max_entries, deadline)
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

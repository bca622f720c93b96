"""Write a file into a job user's directory *as that user*, without following planted symlinks.

The Epilog runs as root (SlurmdUser), but a job's working directory belongs to the job's user, who
may plant a symlink at the report's name (``energy-<jobid>.html -> /etc/shadow``). Writing there as
root would let any user overwrite any file on the node. So, when running as root,
:func:`write_files_as_user` forks a child that drops to the user's uid/gid (``setgroups`` ->
``setgid`` -> ``setuid``, in that order: once the uid is dropped the groups can no longer be
changed) and only then touches the directory. In the child, the write is:

1. ``open(directory, O_DIRECTORY | O_NOFOLLOW)`` -- the directory itself must not be a symlink;
2. a fresh temp file relative to that directory fd with ``O_CREAT | O_EXCL | O_NOFOLLOW``
   (``O_EXCL`` never opens an existing file or symlink);
3. ``write`` + ``fsync``;
4. ``rename(tmp, name)`` relative to the dir fd: rename(2) replaces a symlink at ``name`` by the
   new file, it never follows it; then ``fsync`` the directory so the entry is durable.

The parent waits with a timeout (a hung NFS home must not hang the Epilog) and reports each file
not written with the reason (a :class:`SafeWriteError` from the child's runner says why).

When not running as root the same steps run in-process, as the current user.
"""

from __future__ import annotations

import errno
import os
import pwd
import secrets
import select
import signal
import time
from collections.abc import Callable, Sequence

from slurm_energy.errors import SafeWriteError

__all__ = ["REPORT_TIMEOUT_S", "UNKNOWN_UMASK", "SafeWriteError", "write_files_as_user"]

#: The whole of one job's report files, written by one privilege-dropped child, s. The child runs
#: as the job's user, who can SIGSTOP it or hang it on a FUSE/NFS directory: past this it is
#: SIGKILLed (a stopped process dies of SIGKILL too) and the files not written are reported. The
#: finalizer writes reports after its slot is released, so a user's writer delays no other job.
REPORT_TIMEOUT_S = 5.0
#: How often (s) the parent looks whether its writer was stopped (state T/t in /proc/PID/stat): a
#: stopped writer is killed at once, so a user's SIGSTOP holds the finalizer this long, not
#: :data:`REPORT_TIMEOUT_S`.
STOP_POLL_S = 0.02
#: The umask for a user's files when theirs is unknown (the job's SLURM_UMASK not seen): private,
#: the owner can still read and chmod them. docs/PRIVACY.md.
UNKNOWN_UMASK = 0o077
#: What the record says when its report is written with :data:`UNKNOWN_UMASK` (docs/PRIVACY.md).
PRIVATE_REPORT_NOTE = ("report written private (mode 0600, owner only): the job's umask (sbatch's SLURM_UMASK, or "
                       "its processes' own) was never read -- a job that ends before the sampler's first look at its "
                       "processes leaves none, and no other source names it (the Prolog's environment and slurmctld's "
                       "job record do not); chmod the files to share them")


def _write_in_dir(directory: str, name: str, data: bytes, mode: int, owner: int | None = None) -> None:
    """Steps 1-4 of the module docstring, as the current user; ``owner``: the uid the directory
    must belong to (else nothing is written). Raises ``OSError``."""
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.islink(directory):
            raise OSError(e.errno, "the directory is a symlink; refusing to follow it (pass the real path)") from e
        raise
    try:
        if owner is not None and (got := os.fstat(dfd).st_uid) != owner:
            raise OSError(errno.EPERM, f"the directory belongs to uid {got}, not to the job's user (uid {owner}): "
                                       "root writes a report only into a directory of the job's user")
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
        try:
            os.fsync(dfd)
        except OSError:  # some filesystems refuse fsync on a directory; the data is already synced
            pass
    finally:
        os.close(dfd)


def _remove_in_dir(directory: str, name: str, owner: int | None = None) -> None:
    """Remove ``name`` (an earlier run's file of the same label) from ``directory``, as the current
    user, relative to the directory's fd (unlink(2) removes a symlink itself, never its target);
    absent is fine. ``owner``: as in :func:`_write_in_dir`. Raises ``OSError``."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if owner is not None and (got := os.fstat(dfd).st_uid) != owner:
            raise OSError(errno.EPERM, f"the directory belongs to uid {got}, not to the job's user (uid {owner})")
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            pass
    finally:
        os.close(dfd)


def _user_groups(uid: int, gid: int) -> list[int]:
    """The user's supplementary groups (``getgrouplist``), or just ``[gid]`` if the uid has no name."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return [gid]
    try:
        groups = os.getgrouplist(name, gid)
    except OSError:
        return [gid]
    return groups or [gid]


def _drop_privileges(uid: int, gid: int) -> None:
    """setgroups -> setgid -> setuid (this order), then check the drop stuck. Raises ``OSError``."""
    os.setgroups(_user_groups(uid, gid))
    os.setgid(gid)
    os.setuid(uid)
    if os.geteuid() != uid or os.getegid() != gid:
        raise OSError(f"privilege drop did not stick (euid={os.geteuid()}, egid={os.getegid()})")
    if uid != 0:
        try:
            os.setuid(0)
        except PermissionError:
            pass
        else:
            raise OSError("privilege drop is reversible: setuid(0) succeeded after dropping")


def _run_as_user(fn: Callable[[int], None], uid: int, gid: int, path: str, timeout_s: float, umask: int | None = None) -> bytes:
    """Run ``fn(w)`` in a forked child as ``uid``/``gid`` (``w``: a pipe it may report on);
    raise :class:`SafeWriteError` on failure. Returns what the child wrote to the pipe.

    The child reports an error as text through a pipe and exits 1; the parent waits at most
    ``timeout_s`` seconds, then kills the child (SIGKILL) and raises. ``umask``: set in the child.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the caller's stack
        code = 1
        try:
            os.close(r)
            _drop_privileges(uid, gid)
            if umask is not None:
                os.umask(umask)
            fn(w)
            code = 0
        except BaseException as e:
            try:
                msg = f"{type(e).__name__}: {e}" if not isinstance(e, OSError) else (
                    f"{e.strerror or e} (errno {e.errno}) as uid={uid} gid={gid}"
                )
                os.write(w, msg.encode("utf-8", "replace")[:4000])
            except BaseException:
                pass
        finally:
            os._exit(code)

    os.close(w)
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    try:
        while True:  # read the child's message until EOF (child exit) or the deadline
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)  # kills a SIGSTOPped child too
                os.waitpid(pid, 0)
                raise SafeWriteError(path, f"timed out after {timeout_s:g} s writing as uid={uid} (hung filesystem, "
                                           "or the writer was stopped); killed", b"".join(chunks))
            ready, _, _ = select.select([r], [], [], min(left, STOP_POLL_S))
            if not ready and _stopped(pid):  # the user stopped it: waiting on it would hold the queue
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise SafeWriteError(path, f"writer stopped (SIGSTOP or a tracer, as uid={uid}); killed at once, "
                                           "not waited on", b"".join(chunks))
            if ready:
                chunk = os.read(r, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return b"".join(chunks)
    msg = b"".join(chunks).decode("utf-8", "replace").strip()
    if not msg:
        msg = f"writer process ended with wait status {status}"
    raise SafeWriteError(path, msg)


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (``T``) or stopped by a tracer (``t``): proc(5)'s state, the field
    after the parenthesised command name (read from the last ')': the name is the user's)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = f.read(4096).rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return bool(st) and st[0] in (b"T", b"t")


def _check_files(files: list[tuple[str, bytes]], uid: int, gid: int, umask: int | None,
                 remove: Sequence[str] = ()) -> None:
    """Raise ValueError for a bad name (not a plain file name), data, id or umask (nothing written then)."""
    for name, data in [*files, *((n, b"") for n in remove)]:
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"name={name!r} is not a plain file name; pass a name without '/' (e.g. "
                             "'energy-123.html') and the directory separately")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(f"data of {name} is {type(data).__name__}, not bytes; encode text first "
                             "(e.g. text.encode('utf-8'))")
    for field, v in (("uid", uid), ("gid", gid)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{field}={v!r} is not a user/group id; pass the job's numeric {field} "
                             "(e.g. from SLURM_JOB_UID)")
    if umask is not None and not 0 <= umask <= 0o777:
        raise ValueError(f"umask={umask!r} is not a umask (0 to 0o777)")


def _write_each(directory: str, files: list[tuple[str, bytes]], report: Callable[[str, str], object],
                owner: int | None = None, remove: Sequence[str] = ()) -> None:
    """Write every file (mode 0666 before the umask) into a directory of ``owner``'s (None: any),
    then remove each of ``remove``; ``report(name, why)``, why '' when written (removed)."""
    for name, data in files:
        try:
            _write_in_dir(directory, name, bytes(data), 0o666, owner)
            report(name, "")
        except OSError as e:
            report(name, f"{e.strerror or e} (errno {e.errno}) as uid={os.geteuid()}")
    for name in remove:
        try:
            _remove_in_dir(directory, name, owner)
            report(name, "")
        except OSError as e:
            report(name, f"an earlier run's file, not removed: {e.strerror or e} (errno {e.errno}) as uid={os.geteuid()}")


def _outcome(directory: str, files: list[tuple[str, bytes]], done: dict[str, str],
             error: str, remove: Sequence[str] = ()) -> tuple[list[str], list[tuple[str, str]]]:
    """(paths written, [(path, why)] not written or not removed) from the child's reports ``done``
    {name: why}."""
    written: list[str] = []
    failed: list[tuple[str, str]] = []
    for name, _ in files:
        path = os.path.join(directory, name)
        if name in done and not done[name]:
            written.append(path)
        else:
            failed.append((path, done.get(name) or error or "not written"))
    for name in remove:
        if done.get(name, "-"):
            failed.append((os.path.join(directory, name), done.get(name) or
                           f"an earlier run's file, not removed: {error or 'the writer stopped first'}"))
    return written, failed


def write_files_as_user(directory: str, files: list[tuple[str, bytes]], uid: int, gid: int, *,
                        umask: int | None = None, timeout_s: float | None = None, remove: Sequence[str] = (),
                        ) -> tuple[list[str], list[tuple[str, str]]]:
    """Write several files into ``directory`` as ``uid``/``gid`` (each atomic, planted symlinks
    replaced, never followed: the module's steps 1-4), in **one** privilege-dropped child
    bounded by ``timeout_s`` for all of them (the job's user can stop or hang that child: it is
    killed then, and what it had not written is reported). Files are created ``0666 & ~umask``:
    ``umask`` the user's (None: :data:`UNKNOWN_UMASK` as root; the process's own otherwise).
    ``timeout_s``: None = :data:`REPORT_TIMEOUT_S`. As root, only into a directory ``uid`` owns
    (else nothing is written: the reason names the owner). ``remove``: names removed after the
    writes, by the same user (an earlier run's files of the same label that this one has not).

    Returns ``(paths written, [(path, reason)] not written or not removed)``. Raises ValueError for
    a bad name, ids or data (nothing written)."""
    import json

    _check_files(files, uid, gid, umask, remove)
    done: dict[str, str] = {}
    if os.geteuid() != 0:  # as the current user, in-process
        old = os.umask(umask) if umask is not None else None
        try:
            _write_each(directory, files, done.__setitem__, remove=remove)
        finally:
            if old is not None:
                os.umask(old)
        return _outcome(directory, files, done, "", remove)

    def child(w: int) -> None:
        _write_each(directory, files, lambda name, why: os.write(w, (json.dumps([name, why]) + "\n").encode()), uid,
                    remove)

    out, error = b"", ""
    try:
        out = _run_as_user(child, uid, gid, directory, REPORT_TIMEOUT_S if timeout_s is None else timeout_s,
                           UNKNOWN_UMASK if umask is None else umask)
    except SafeWriteError as e:
        out, error = e.partial, e.reason
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            name, why = json.loads(line)
        except ValueError:
            continue
        done[name] = why
    return _outcome(directory, files, done, error, remove)

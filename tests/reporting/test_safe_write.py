"""write_files_as_user: writes as the job's user, never follows a planted symlink, never writes as root.

pytest runs as root on the build machine; the tests use the existing unprivileged ``nobody`` user
(uid/gid 65534) as the job user. Tests that need root are skipped otherwise.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time

import pytest

from slurm_energy.reporting import safe_write
from slurm_energy.reporting.safe_write import SafeWriteError, write_files_as_user

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")


@pytest.fixture
def base():
    """A root-owned 0755 directory under /tmp that ``nobody`` can traverse (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix="se-safe-write-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def user_dir(base):
    """A directory owned by ``nobody`` (the job's working directory)."""
    d = os.path.join(base, "work")
    os.mkdir(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    return d


@needs_root
def test_planted_symlink_is_replaced_not_followed(base, user_dir):
    # A root-owned file elsewhere, and the user's symlink to it at the report's name.
    victim_dir = os.path.join(base, "rootonly")
    os.mkdir(victim_dir, 0o755)
    victim = os.path.join(victim_dir, "shadow")
    with open(victim, "wb") as f:
        f.write(b"root secret\n")
    os.chmod(victim, 0o666)  # even world-writable: the writer must still not follow the link
    os.symlink(victim, os.path.join(user_dir, "energy-42.html"))

    [path], failed = write_files_as_user(user_dir, [("energy-42.html", b"<html>report</html>")], NOBODY, NOBODY)
    assert failed == []

    assert path == os.path.join(user_dir, "energy-42.html")
    with open(victim, "rb") as f:
        assert f.read() == b"root secret\n"  # the root file is unchanged
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode)  # the symlink was replaced by a regular file
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)  # owned by the job's user, not root
    with open(path, "rb") as f:
        assert f.read() == b"<html>report</html>"
    # no temp file left behind
    assert sorted(os.listdir(user_dir)) == ["energy-42.html"]


@needs_root
def test_remove_takes_the_earlier_runs_file_and_a_planted_symlink_never_its_target(base, user_dir):
    """``remove``: an earlier run's ``energy-42.phases.csv`` goes, as the user; a symlink the user
    planted at ``energy-42.prediction.csv`` is removed itself, its root-owned target untouched; a
    name that is absent is no failure."""
    victim = os.path.join(base, "rootfile")
    with open(victim, "wb") as f:
        f.write(b"root data\n")
    with open(os.path.join(user_dir, "energy-42.phases.csv"), "wb") as f:
        f.write(b"old phases\n")
    os.chown(os.path.join(user_dir, "energy-42.phases.csv"), NOBODY, NOBODY)
    os.symlink(victim, os.path.join(user_dir, "energy-42.prediction.csv"))
    [path], failed = write_files_as_user(user_dir, [("energy-42.csv", b"a,b\n")], NOBODY, NOBODY,
                                         remove=["energy-42.phases.csv", "energy-42.prediction.csv", "energy-42.none"])
    assert failed == [] and path.endswith("energy-42.csv")
    assert sorted(os.listdir(user_dir)) == ["energy-42.csv"]
    with open(victim, "rb") as f:
        assert f.read() == b"root data\n"


@needs_root
def test_unwritable_directory_gives_clear_error_and_no_root_file(base):
    root_dir = os.path.join(base, "not-yours")
    os.mkdir(root_dir, 0o777)  # root-owned: as root, nothing is written for another user here at all
    os.chmod(root_dir, 0o777)

    written, [(path, reason)] = write_files_as_user(root_dir, [("energy-7.csv", b"a,b\n")], NOBODY, NOBODY)

    assert written == [] and path == os.path.join(root_dir, "energy-7.csv")
    assert "belongs to uid 0, not to the job's user (uid 65534)" in reason
    assert os.listdir(root_dir) == []  # nothing written, as root or otherwise
    own = os.path.join(base, "yours-read-only")
    os.mkdir(own, 0o555)  # nobody's, but not writable: the kernel's refusal, as nobody
    os.chown(own, NOBODY, NOBODY)
    written, [(_, reason)] = write_files_as_user(own, [("energy-7.csv", b"a,b\n")], NOBODY, NOBODY)
    assert written == [] and "Permission denied" in reason and "uid=65534" in reason and os.listdir(own) == []


@needs_root
def test_directory_that_is_a_symlink_is_refused(base, user_dir):
    link = os.path.join(base, "link-to-work")
    os.symlink(user_dir, link)
    _, [(_, reason)] = write_files_as_user(link, [("energy-1.html", b"x")], NOBODY, NOBODY)
    # Linux answers O_DIRECTORY|O_NOFOLLOW on a symlink with ENOTDIR (20); the reason says why
    assert "directory is a symlink; refusing to follow it" in reason
    assert os.listdir(user_dir) == []


@needs_root
def test_existing_regular_file_is_replaced_atomically(user_dir):
    write_files_as_user(user_dir, [("energy-5.csv", b"old")], NOBODY, NOBODY)
    write_files_as_user(user_dir, [("energy-5.csv", b"new contents")], NOBODY, NOBODY)
    with open(os.path.join(user_dir, "energy-5.csv"), "rb") as f:
        assert f.read() == b"new contents"
    assert os.listdir(user_dir) == ["energy-5.csv"]


@needs_root
def test_child_runs_with_user_ids_and_groups():
    seen = {}
    r, w = os.pipe()

    def probe(_report_fd):
        os.write(w, f"{os.getuid()} {os.geteuid()} {os.getgid()} {sorted(os.getgroups())}".encode())

    safe_write._run_as_user(probe, NOBODY, NOBODY, "/probe", timeout_s=10)
    os.close(w)
    seen = os.read(r, 1000).decode()
    os.close(r)
    # nobody's only group is nogroup (65534): root's group 0 must be gone
    assert seen == "65534 65534 65534 [65534]"
    assert os.geteuid() == 0  # the parent kept its identity


@needs_root
def test_hung_writer_times_out_with_clear_error():
    t0 = time.monotonic()
    with pytest.raises(SafeWriteError) as ei:
        safe_write._run_as_user(lambda _fd: time.sleep(30), NOBODY, NOBODY, "/x/energy-1.html", timeout_s=0.5)
    assert time.monotonic() - t0 < 10
    assert ei.value.path == "/x/energy-1.html"
    assert "timed out after 0.5 s" in ei.value.reason


def test_non_root_writes_directly_as_current_user(base, monkeypatch):
    # Pretend not to be root: the in-process path is taken (no fork), file owned by the caller.
    monkeypatch.setattr(safe_write.os, "geteuid", lambda: 1000)
    [path], _ = write_files_as_user(base, [("energy-9.html", b"hello")], 1000, 1000)
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()
    with open(path, "rb") as f:
        assert f.read() == b"hello"


def test_non_root_error_names_path(base, monkeypatch):
    monkeypatch.setattr(safe_write.os, "geteuid", lambda: 1000)
    missing = os.path.join(base, "does-not-exist")
    _, [(path, reason)] = write_files_as_user(missing, [("energy-9.html", b"hello")], 1000, 1000)
    assert path == os.path.join(missing, "energy-9.html")
    assert "No such file or directory" in reason


@pytest.mark.parametrize("bad", ["", ".", "..", "../x.html", "a/b.html"])
def test_bad_name_is_rejected_naming_the_field(base, bad):
    with pytest.raises(ValueError, match=r"name=.*plain file name"):
        write_files_as_user(base, [(bad, b"x")], NOBODY, NOBODY)


@pytest.mark.parametrize("field,uid,gid", [("uid", -1, 1), ("gid", 1, None), ("uid", "1000", 1)])
def test_bad_ids_are_rejected_naming_the_field(base, field, uid, gid):
    with pytest.raises(ValueError, match=rf"{field}="):
        write_files_as_user(base, [("energy-1.html", b"x")], uid, gid)


def test_text_instead_of_bytes_is_rejected(base):
    with pytest.raises(ValueError, match="encode text first"):
        write_files_as_user(base, [("energy-1.html", "text")], NOBODY, NOBODY)

"""The job's marks file: made by the Prolog for the job's user, read by root as data only."""

import json
import os
import pwd
import threading

import pytest

from slurm_energy.sampling.marks import MAX_BYTES, MarksWriter, job_marks_dir, prepare_job_dir, read_marks_file, remove_marks

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the Prolog side runs as root")


@root_only
def test_prepare_job_dir_gives_the_job_user_a_private_dir(tmp_path):
    nobody = pwd.getpwnam("nobody")
    root = tmp_path / "marks"
    d = prepare_job_dir("77", nobody.pw_uid, nobody.pw_gid, str(root))
    st = os.lstat(d)
    assert d == str(root / "77") and st.st_uid == nobody.pw_uid and st.st_mode & 0o777 == 0o700
    assert os.lstat(root).st_uid == 0 and os.lstat(root).st_mode & 0o777 == 0o755
    assert prepare_job_dir("77", nobody.pw_uid, nobody.pw_gid, str(root)) == d  # second node, same host


@root_only
def test_prepare_job_dir_sets_aside_what_an_earlier_job_left(tmp_path):
    nobody = pwd.getpwnam("nobody")
    root = tmp_path / "marks"
    root.mkdir()
    (root / "78").symlink_to(tmp_path)  # planted, or left: never followed, never chowned
    d = prepare_job_dir("78", nobody.pw_uid, nobody.pw_gid, str(root), node="n1")
    assert os.lstat(tmp_path).st_uid == 0 and not os.path.islink(d) and os.lstat(d).st_uid == nobody.pw_uid
    (_stale,) = [n for n in os.listdir(root) if n.startswith(".stale-78-")]
    # the same user's directory from an earlier job with this id: kept, this node's old marks removed,
    # another node's (a second slurmd of this job on the same host) kept
    (root / "78" / "marks-n1.jsonl").write_text("old\n")
    (root / "78" / "marks-n2.jsonl").write_text("n2\n")
    prepare_job_dir("78", nobody.pw_uid, nobody.pw_gid, str(root), node="n1")
    assert sorted(os.listdir(d)) == ["marks-n2.jsonl"]
    # another user's leftover directory is set aside too
    os.chown(d, 0, 0)
    prepare_job_dir("78", nobody.pw_uid, nobody.pw_gid, str(root), node="n1")
    assert os.listdir(d) == [] and len([n for n in os.listdir(root) if n.startswith(".stale-78-")]) == 2
    remove_marks("78", "n1", str(root))  # after the job: the job's dir and what was set aside
    assert os.listdir(root) == [".trash"] and os.listdir(root / ".trash") == []  # (root-only, 0700)
    assert (os.stat(root / ".trash").st_mode & 0o777, os.stat(root / ".trash").st_uid) == (0o700, os.geteuid())


def test_job_marks_dir_rejects_path_tricks():
    for bad in ("", "..", "1/2"):
        with pytest.raises(ValueError, match="SLURM_JOB_ID"):
            job_marks_dir(bad, "/run/x")


def test_writer_and_reader_round_trip(tmp_path):
    w = MarksWriter(str(tmp_path / "marks-n1.jsonl"))
    w.write("begin", t=1.0, id=1, name="epoch 0")
    w.write("end", t=2.0, id=1)
    w.close()
    assert oct(os.stat(tmp_path / "marks-n1.jsonl").st_mode & 0o777) == "0o600"
    lines, flags = read_marks_file(str(tmp_path), "marks-n1.jsonl")
    assert [json.loads(x) for x in lines] == [{"t": 1.0, "ev": "begin", "id": 1, "name": "epoch 0"},
                                              {"t": 2.0, "ev": "end", "id": 1}]
    assert flags == []
    assert read_marks_file(str(tmp_path), "marks-n2.jsonl") == ([], [])  # no marks: nothing, no flag
    assert read_marks_file(str(tmp_path / "nope"), "marks-n1.jsonl") == ([], [])


def test_reader_never_follows_a_symlink_nor_blocks_on_a_fifo(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text('{"t": 1, "ev": "stage", "frac": 0.5}\n')
    (tmp_path / "marks-n1.jsonl").symlink_to(secret)
    assert read_marks_file(str(tmp_path), "marks-n1.jsonl") == ([], ["marks_not_regular"])
    os.mkfifo(tmp_path / "marks-n2.jsonl")
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", read_marks_file(str(tmp_path), "marks-n2.jsonl")))
    th.start()
    th.join(5)
    assert not th.is_alive() and out["r"] == ([], ["marks_not_regular"])
    (tmp_path / "linkdir").symlink_to(tmp_path)  # the directory itself a symlink: not entered
    assert read_marks_file(str(tmp_path / "linkdir"), "secret")[0] == []


def test_reader_reads_at_most_max_bytes_and_drops_the_cut_line(tmp_path):
    line = '{"t":1,"ev":"stage","frac":0.5}\n'
    n = MAX_BYTES // len(line) + 100
    (tmp_path / "m").write_text(line * n)
    lines, flags = read_marks_file(str(tmp_path), "m")
    assert flags == [f"marks_truncated_bytes:{MAX_BYTES}"]
    assert len(lines) == MAX_BYTES // len(line) and all(x == line.strip() for x in lines)


def test_writer_stops_at_the_bound(tmp_path):
    w = MarksWriter(str(tmp_path / "m"))
    for _ in range(MAX_BYTES // 30 + 10):
        w.write("stage", t=1.0, frac=0.5)
    w.close()
    assert os.path.getsize(tmp_path / "m") <= MAX_BYTES


def test_remove_marks_keeps_other_nodes_files(tmp_path):
    d = tmp_path / "9"
    d.mkdir()
    (d / "marks-n1.jsonl").write_text("")
    (d / "marks-n2.jsonl").write_text("")
    (d / "junk").symlink_to("/etc/passwd")
    remove_marks("9", "n1", str(tmp_path))
    assert sorted(os.listdir(d)) == ["junk", "marks-n2.jsonl"]
    remove_marks("9", "n2", str(tmp_path))
    assert not d.exists() and os.path.exists("/etc/passwd")

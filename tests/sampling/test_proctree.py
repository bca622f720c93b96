"""Process trees from /proc without walking all of it (issue 12): real processes, and fake /proc
files for the kernel feature this machine lacks (``/proc/PID/task/TID/children``)."""

import os
import subprocess
import sys
import time

from slurm_energy.sampling import proctree
from slurm_energy.sampling.proctree import ProcTree, read_stat

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_zombie_stat_gives_the_final_cpu_time_as_wait4_does():
    p = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.4)])
    while True:  # not reaped yet: a zombie keeps its final counters
        st = read_stat(p.pid)
        if st is not None and st[0] == "Z":
            break
    _pid, _status, ru = os.wait4(p.pid, 0)
    own = ru.ru_utime + ru.ru_stime  # the process's own CPU time, s (the kernel's, us resolution)
    assert own >= 0.4  # it burned 0.4 s of CPU time, plus interpreter start-up
    assert abs(st[2] - own) <= 0.02  # /proc/PID/stat counts in 10 ms ticks
    assert read_stat(p.pid) is None  # reaped: gone


def test_listing_fallback_finds_grandchildren_and_reads_only_new_pids(monkeypatch):
    p = subprocess.Popen(["bash", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        tree = ProcTree(p.pid)
        tree.has_children_files = False  # as on this project's test VM
        for _ in range(500):
            pids = tree.pids()
            if len(pids) == 3:
                break
            time.sleep(0.01)
        assert pids[0] == p.pid and len(pids) == 3  # bash and its two sleeps
        kids = set(pids[1:])
        for k in kids:
            assert read_stat(k)[1] == p.pid  # parent of each sleep: bash
        reads = []
        real = proctree.read_stat
        monkeypatch.setattr(proctree, "read_stat", lambda pid, proc="/proc": reads.append(pid) or real(pid, proc))
        seen = set(tree._ppid)
        others = [subprocess.Popen(["sleep", "30"]) for _ in range(5)]  # not in the tree
        try:
            assert set(tree.pids()) == {p.pid} | kids
            assert {o.pid for o in others} <= set(reads)  # each new process read once ...
            assert not seen & set(reads)  # ... and none seen before (others' new processes may appear)
            seen = set(tree._ppid)
            reads.clear()
            assert set(tree.pids()) == {p.pid} | kids
            assert not seen & set(reads)  # a poll does not re-read the machine's processes
        finally:
            for o in others:
                o.kill()
                o.wait()
    finally:
        p.kill()
        p.wait()
    assert tree.pids() == []  # root gone


def _fake(proc, pid, ppid, comm="x", state="S", ticks=(0, 0, 0, 0), rss_pages=0, tids=None, children=()):
    d = proc / str(pid)
    for tid in tids or [pid]:
        t = d / "task" / str(tid)
        t.mkdir(parents=True)
        (t / "children").write_text(" ".join(str(c) for c in (children if tid == pid else ())) + " ")
    fields = [state, str(ppid)] + ["0"] * 9 + [str(x) for x in ticks] + ["0"] * 6 + [str(rss_pages)] + ["0"] * 20
    (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")


def test_children_files_followed_and_stat_parsed(tmp_path):
    _fake(tmp_path, 100, 1, comm="a) (b c", ticks=(150, 50, 20, 30), rss_pages=256, tids=[100, 101], children=[200])
    _fake(tmp_path, 200, 100, children=[300])
    _fake(tmp_path, 300, 200)
    _fake(tmp_path, 400, 1)  # not in the tree
    tree = ProcTree(100, proc=str(tmp_path))
    assert tree.has_children_files
    assert sorted(tree.pids()) == [100, 200, 300]
    state, ppid, cpu_s, rss = read_stat(100, str(tmp_path))
    # by hand: (150 + 50 + 20 + 30) ticks / 100 ticks per s = 2.5 s; 256 pages x page size
    assert (state, ppid) == ("S", 1)
    assert abs(cpu_s - 250 / os.sysconf("SC_CLK_TCK")) < 1e-9 and rss == 256 * os.sysconf("SC_PAGE_SIZE")


def test_env_scanner_finds_the_jobs_processes_and_reads_each_environment_once(monkeypatch):
    from slurm_energy.sampling.proctree import EnvScanner, pids_usage

    job = subprocess.Popen(["sleep", "30"], env={"SLURM_JOB_ID": "4711"})
    other = subprocess.Popen(["sleep", "30"], env={"SLURM_JOB_ID": "47110"})  # a prefix is not a match
    try:
        sc = EnvScanner("4711")
        assert job.pid in sc.pids() and other.pid not in sc.pids()
        opened = []
        real_open = os.open
        monkeypatch.setattr(os, "open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k))
        seen = set(sc._is_job)
        assert job.pid in sc.pids()
        reread = [p for p in opened if p.endswith("/environ") and int(p.split("/")[-2]) in seen]
        assert reread == []  # no process re-read (only ones started on the machine since, if any)
        monkeypatch.undo()
        cpu, rss = pids_usage([job.pid])
        assert cpu is not None and 0.0 <= cpu < 0.1 and rss > 0  # an idle sleep: ~0 CPU-s
    finally:
        for p in (job, other):
            p.kill()
            p.wait()
    assert pids_usage([job.pid]) == (None, None)

"""The readers' file sources: kept descriptors (KeptFiles), a recording and a replay of them."""

import errno
import os

import pytest

from slurm_energy.sampling.files import KeptFiles, RecordingFiles, ReplayFiles
from slurm_energy.sampling.nodestats import read_node_stats
from slurm_energy.sampling.readers.rapl import RaplReader
from tests.fakes.powercap import Zone, build_tree, set_energy


def test_kept_file_is_opened_once_and_read_afresh(tmp_path):
    p = tmp_path / "energy_uj"
    p.write_text("100\n")
    kf = KeptFiles()
    assert kf.read(str(p)) == b"100\n"
    fd = kf.fd(str(p))
    p.write_text("250\n")  # same inode, new content: the kept descriptor reads it at offset 0
    assert kf.read(str(p)) == b"250\n" and kf.fd(str(p)) == fd
    kf.close()
    assert not kf._fds


def test_a_failed_read_drops_the_descriptor_and_raises(tmp_path):
    kf = KeptFiles(watch_unlinked=True)
    p = tmp_path / "cpu.stat"
    p.write_text("usage_usec 5\n")
    assert kf.read(str(p)) == b"usage_usec 5\n"
    os.unlink(p)  # a plain file (a fake cgroup tree) answers on; st_nlink says it was removed
    with pytest.raises(OSError) as e:
        kf.read(str(p))
    assert e.value.errno == errno.ENOENT and not kf._fds
    with pytest.raises(FileNotFoundError):
        kf.read(str(tmp_path / "absent"))


def test_beyond_the_limit_files_are_read_without_keeping(tmp_path):
    kf = KeptFiles(limit=1)
    for n in ("a", "b"):
        (tmp_path / n).write_text(n)
    assert kf.read(str(tmp_path / "a")) == b"a" and kf.read(str(tmp_path / "b")) == b"b"
    assert list(kf._fds) == [str(tmp_path / "a")]
    kf.retain([])
    assert not kf._fds


def test_rapl_and_node_counters_replayed_from_a_recording(tmp_path):
    """The Prolog's reading: the files a row reads are recorded once, and a row is then read from
    their contents as read earlier (not from the files now)."""
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=1_000_000)])
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu  100 0 50 800 50 0 0 0 0 0\n")  # USER_HZ ticks
    (proc / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 400 kB\n")
    rec = RecordingFiles()
    assert RaplReader(root, files=rec).read()[0].energy_uj == 1_000_000
    read_node_stats(str(proc), files=rec)
    files = {p: open(p, encoding="latin-1").read() for p in rec.paths}
    assert sorted(os.path.basename(p) for p in files) == ["energy_uj", "meminfo", "stat"]
    set_energy(root, "intel-rapl:0", 9_000_000)  # the counter moved on since the Prolog read it
    replay = ReplayFiles(files)
    assert RaplReader(root, files=replay).read()[0].energy_uj == 1_000_000
    ns = read_node_stats(str(proc), files=replay)
    # busy = user + system = 150 ticks, total = 1000 ticks; memory used = (1000 - 400) kB
    assert (ns.cpu_busy_s, ns.cpu_total_s) == (150 / os.sysconf("SC_CLK_TCK"), 1000 / os.sysconf("SC_CLK_TCK"))
    assert ns.mem_used_bytes == 600 * 1024 and not replay.missing


def test_replay_of_a_file_not_recorded_says_so():
    replay = ReplayFiles({})
    with pytest.raises(FileNotFoundError):
        replay.read("/sys/class/powercap/intel-rapl:1/energy_uj")
    assert replay.missing == ["/sys/class/powercap/intel-rapl:1/energy_uj"]

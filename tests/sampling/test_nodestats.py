"""Node counters read from /proc directly: the values psutil reads, on a /proc tree written here
(numbers by hand) and on this machine's own /proc (against psutil itself)."""

import os

import psutil
import pytest

from slurm_energy.devices.info import collect_static, ram_total_bytes
from slurm_energy.sampling.nodestats import read_node_stats

HZ = os.sysconf("SC_CLK_TCK")


def test_counters_from_a_written_proc_tree(tmp_path):
    # ticks: user nice system idle iowait irq softirq steal guest guest_nice
    (tmp_path / "stat").write_text("cpu  1000 200 300 5000 400 10 20 30 600 70\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    (tmp_path / "meminfo").write_text("MemTotal:        8000000 kB\nMemFree:   100 kB\nMemAvailable:    6000000 kB\n")
    s = read_node_stats(str(tmp_path))
    # total = all fields - guest - guest_nice = 7630 - 670 = 6960 ticks; busy = 6960 - 5000 - 400 = 1560 ticks
    assert s.cpu_total_s == pytest.approx(6960 / HZ)
    assert s.cpu_busy_s == pytest.approx(1560 / HZ)
    assert s.mem_total_bytes == 8000000 * 1024 and s.mem_used_bytes == (8000000 - 6000000) * 1024  # bytes
    assert s.ncpu == os.cpu_count()


def test_missing_proc_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        read_node_stats(str(tmp_path))


def test_this_machines_counters_match_psutil():
    before = psutil.cpu_times()
    s = read_node_stats()
    after = psutil.cpu_times()
    lo = sum(before) - before.guest - before.guest_nice
    hi = sum(after) - after.guest - after.guest_nice
    assert lo - 0.05 <= s.cpu_total_s <= hi + 0.05  # CPU-s, summed over CPUs; ticks are 0.01 s
    assert s.ncpu == psutil.cpu_count()
    assert s.mem_total_bytes == psutil.virtual_memory().total


def test_inventory_matches_what_psutil_and_platform_report():
    import platform
    import socket

    st = collect_static()
    assert st["host"] == socket.gethostname()
    assert st["kernel"] == platform.release() and st["python"] == platform.python_version()
    assert st["ram_total_bytes"] == ram_total_bytes() == psutil.virtual_memory().total

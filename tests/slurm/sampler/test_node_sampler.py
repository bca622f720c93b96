"""The node sampler's rows: one node reading per tick shared by every job's row, each job's row in
its own file, the jobs' CPU shares of an interval from the same instants (their sum at most 1, so
the energy shared out is at most the node's counter delta). Values computed by hand below."""

from __future__ import annotations

import numpy as np
import pytest

from slurm_energy.accounting.attribution import cpu_shares
from slurm_energy.core import JobUsage, NodeUsage
from slurm_energy.sampling.readers.rapl import RaplReader
from slurm_energy.sampling.samplefile import SampleWriter, read_sample_table
from slurm_energy.slurm.sampler import node as node_mod
from slurm_energy.slurm.sampler.node import JobSampling, NodeSampler
from tests.fakes.powercap import Zone, build_tree, set_energy


class FakeProbe:
    """A job whose CPU time (s) the test sets; gone once ``ended``."""

    def __init__(self, cpu_s: float):
        self.usage = JobUsage(cpu_time_s=cpu_s, mem_bytes=2**30, max_mem_bytes=2**30, pids=[4242], source="test")
        self.ended = False
        self.polls = 0

    def poll(self, full: bool = True) -> JobUsage:
        self.polls += 1
        return self.usage

    def gone(self) -> bool:
        return self.ended


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with one RAPL package (the fake powercap tree of tests/fakes/powercap.py, laid out as
    the kernel's), its /proc/stat busy time set by the test (CPU-s)."""
    root = build_tree(tmp_path / "sys", [Zone("intel-rapl:0", "package-0", energy_uj=0)])
    stats = {"busy": 100.0}

    def read_node_stats() -> NodeUsage:
        return NodeUsage(cpu_busy_s=stats["busy"], cpu_total_s=4 * 1000.0, ncpu=4, mem_used_bytes=8 * 2**30,
                         mem_total_bytes=16 * 2**30)

    monkeypatch.setattr(node_mod, "read_node_stats", read_node_stats)
    stats["t"] = 1000.0  # the clock, epoch s
    ns = NodeSampler([RaplReader(root)], interval_s=5.0, gone_after_s=10.0, clock=lambda: stats["t"])
    return ns, root, stats


def _job(tmp_path, name: str, cpu_s: float) -> tuple[JobSampling, FakeProbe]:
    p = FakeProbe(cpu_s)
    return JobSampling(name, p, SampleWriter(str(tmp_path / f"{name}.jsonl"), fsync=False)), p


def test_shares_of_one_interval_come_from_one_reading(tmp_path, node):
    ns, root, stats = node
    (a, pa), (b, pb) = _job(tmp_path, "a", 10.0), _job(tmp_path, "b", 50.0)
    ns.add(a)  # start row at t=1000: package 0 J, node busy 100 CPU-s
    stats["t"] = 1005.0
    ns.add(b)  # start row at t=1005
    # the interval to t=1010: the package used 400 J (400,000,000 uJ); the node was busy 8 CPU-s,
    # of which job a 3 CPU-s and job b 1 CPU-s (the other 4: the node's own work, another user's)
    set_energy(root, "intel-rapl:0", 400_000_000)
    stats["busy"] = 108.0
    stats["t"] = 1010.0
    pa.usage.cpu_time_s = 13.0
    pb.usage.cpu_time_s = 51.0
    ns.tick()
    assert ns.n_ticks == 3  # two joins and one tick: one node reading each, not one per job
    ta, tb = read_sample_table(str(tmp_path / "a.jsonl")), read_sample_table(str(tmp_path / "b.jsonl"))
    assert ta.kind == ["start", "sample"] and tb.kind == ["start", "sample"]
    assert ta.t[-1] == tb.t[-1] == 1010.0  # the same instant in both files
    assert ta.node["cpu_busy_s"][-1] == tb.node["cpu_busy_s"][-1] == 108.0
    dev = "intel-rapl:0"
    ea, eb = ta.device(dev).vals["energy_uj"], tb.device(dev).vals["energy_uj"]
    assert ea == [0, 400_000_000] and eb == [0, 400_000_000]  # one reading of the package counter, uJ
    # (b's start row at t=1005 read the counter before the test moved it: 0 uJ then too)
    # b joined at t=1005 with busy 100 (the fake's value then): its start row is its own reading
    # the shared interval [1005, 1010] for b and [1000, 1010] for a both end at the one reading
    # job a: 3 CPU-s of 8 -> 0.375 of the package's 400 J = 150 J; job b: 1 of 8 -> 50 J
    share_a = cpu_shares(np.array([13.0 - 10.0]), np.array([108.0 - 100.0]))[0]
    share_b = cpu_shares(np.array([51.0 - 50.0]), np.array([108.0 - 100.0]))[0]
    assert share_a == pytest.approx(0.375) and share_b == pytest.approx(0.125)
    assert share_a * 400.0 == pytest.approx(150.0) and share_b * 400.0 == pytest.approx(50.0)
    assert share_a + share_b <= 1.0  # 200 J shared out of the node's 400 J delta


def test_final_cgroup_gone_and_epilog_missing(tmp_path, node):
    ns, root, stats = node
    ended: list[tuple[str, str, float]] = []
    (a, _), (b, pb) = _job(tmp_path, "a", 1.0), _job(tmp_path, "b", 2.0)
    for j in (a, b):
        j.on_end = lambda j, how, t: ended.append((j.key, how, t))
    ns.add(a)  # t=1000
    ns.add(b)
    pb.ended = True
    stats["t"] = 1005.0
    ns.tick()  # a's sample, b's cgroup_gone (its last usage), once; b gone since t=1005
    stats["t"] = 1010.0
    ns.end(["a"])  # the Epilog's request for a: its final row, then its end, at the row's time
    assert ended == [("a", "final", 1010.0)]
    stats["t"] = 1014.0
    ns.tick()  # b: a plain sample now; gone 9 s of the 10 s it waits for an Epilog
    assert "b" in ns.jobs and ended == [("a", "final", 1010.0)]
    stats["t"] = 1015.0
    ns.tick()  # gone 10 s: its sampling ends without an Epilog, at the time it was first seen gone
    assert ended == [("a", "final", 1010.0), ("b", "epilog_missing", 1005.0)] and not ns.jobs
    assert read_sample_table(str(tmp_path / "a.jsonl")).kind == ["start", "sample", "final"]
    assert read_sample_table(str(tmp_path / "b.jsonl")).kind == ["start", "cgroup_gone", "sample", "sample"]


def test_a_failing_job_file_does_not_stop_the_others(tmp_path, node):
    ns, root, stats = node
    (a, _), (b, _) = _job(tmp_path, "a", 1.0), _job(tmp_path, "b", 2.0)
    ns.add(a)
    ns.add(b)
    a.writer.close()

    class FullDisk(SampleWriter):
        def write_sample(self, *args: object, **kw: object) -> None:
            raise OSError(28, "No space left on device")

    a.writer = FullDisk(str(tmp_path / "a2.jsonl"), fsync=False)
    ns.tick()
    assert read_sample_table(str(tmp_path / "b.jsonl")).kind == ["start", "sample"]


def test_interval_must_be_positive():
    with pytest.raises(ValueError, match="sampling.interval_s"):
        NodeSampler([], interval_s=0)

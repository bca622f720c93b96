"""The sampler's values-only path for plain samples (FastRow) writes the bytes of the general path
(readers' Reading objects -> Encoder.sample_lines), through a reader's departure from its steady
state and back, a node change, a job without usage, keyframes and its own first rows."""

import os

from fakes.powercap import Zone, build_tree, set_energy

from slurm_energy.sampling import fastrow, samplecodec, sampler
from slurm_energy.sampling.nodestats import NodeStats
from slurm_energy.sampling.readers.rapl import RaplReader
from slurm_energy.sampling.readers.tdp import CpuTdpReader, RamModelReader
from slurm_energy.sampling.samplefile import SampleWriter, read_samples


class _Probe:
    needs_tail_poll = False

    def __init__(self, usages):
        self.usages, self.k = usages, 0

    def poll(self, full=True):
        return self.usages[self.k]

    def gone(self):
        return False


def _run(tmp_path, name, root, script, fast):
    """Write ``script``'s samples through a Sampler; ``fast=False``: FastRow never prepared."""
    readers = [RaplReader(root), CpuTdpReader(120.0, flags=["tdp_fallback_per_core"]), RamModelReader()]
    w = SampleWriter(str(tmp_path / name), fsync=False)
    w.encoder.tag = "tag"  # both files' rows under one writer tag, so their bytes can be compared
    usages = [u for _t, _ns, _e, u in script]
    s = sampler.Sampler(readers, _Probe(usages), w, interval_s=1.0, clock=lambda: script[s.probe.k][0])
    used = []
    for k, (_t, _ns, energy, _u) in enumerate(script):
        s.probe.k = k
        set_energy(root, "intel-rapl:0", energy) if energy is not None else None
        if energy is None:  # the counter unreadable at this instant: a read_error reading, then back
            os.chmod(os.path.join(root, "intel-rapl:0", "energy_uj"), 0o000)
            os.rename(os.path.join(root, "intel-rapl:0", "energy_uj"), os.path.join(root, "intel-rapl:0", "gone"))
            for r in readers:
                r.close()
        if not fast:
            s._fast = None
        sampler.read_node_stats = lambda ns=script[k][1]: ns
        used.append(s._fast is not None)  # the values-only path ready for this sample
        s.sample("start" if k == 0 else "sample")
        if energy is None:
            os.rename(os.path.join(root, "intel-rapl:0", "gone"), os.path.join(root, "intel-rapl:0", "energy_uj"))
            os.chmod(os.path.join(root, "intel-rapl:0", "energy_uj"), 0o600)
    w.close()
    return (tmp_path / name).read_bytes(), used


def test_fast_rows_are_the_general_paths_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(samplecodec, "KEYFRAME_ROWS", 7)  # a keyframe every 7 rows: several in the run
    monkeypatch.setattr(sampler, "read_node_stats", sampler.read_node_stats)  # restored after the test
    calls = []
    real = fastrow.FastRow.values
    monkeypatch.setattr(fastrow.FastRow, "values", lambda self, ns: calls.append(1) or real(self, ns))
    script = []
    for k in range(40):
        busy, total = 1000.0 + 0.37 * k, 5000.0 + (k if k != 12 else 11)  # k=12: within one tick (util holds)
        mem_total = 2 * 10**9 if k < 25 else 3 * 10**9  # the node's memory changes: a schema line
        ns = NodeStats(busy, total, 2, 10**9 + 4096 * k, mem_total)
        u = None if k == 30 else sampler.Usage(k * 0.25, 10**6 + k, 2 * 10**6, [5, 6] if k < 20 else [5], "cgroup-v1")
        script.append((1.7e9 + k * 1.000001, ns, None if k in (17, 18) else 10**6 * k, u))
    root_a = build_tree(tmp_path / "a", [Zone("intel-rapl:0", "package-0"), Zone("intel-rapl:0:0", "dram")])
    root_b = build_tree(tmp_path / "b", [Zone("intel-rapl:0", "package-0"), Zone("intel-rapl:0:0", "dram")])
    general, used_g = _run(tmp_path, "general", root_a, script, fast=False)
    fast, used_f = _run(tmp_path, "fast", root_b, script, fast=True)
    assert not any(used_g)
    assert fast == general
    text = fast.decode()
    assert "read_error" in text and text.count("#S") >= 8  # the departure and keyframes were written
    # the values-only path took most plain samples: 39 of them, less the departures around
    # k = 17, 18 (RAPL), 25 (node), 30 (no usage), 31 and keyframes
    assert len(calls) >= 20
    rows = list(read_samples(str(tmp_path / "fast")))
    assert len(rows) == 40
    # by hand: k = 3: util = 0.37 s busy / 1 s of all CPU time = 0.37; 120 W x 0.37 = 44.4 W
    tdp = [r for r in rows[3]["readings"] if r["device_id"] == "cpu-tdp"][0]
    assert abs(tdp["util"] - 0.37) < 1e-9 and abs(tdp["mean_power_w"] - 44.4) < 1e-6
    assert [r for r in rows[3]["readings"] if r["device_id"] == "intel-rapl:0"][0]["energy_uj"] == 3 * 10**6

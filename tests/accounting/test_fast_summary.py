"""The node summary's array path (accounting.fast_device) gives the same summary as the general
path, interval by interval, on long and varied sample files; and a file in the old JSON-lines
format gives the same summary as the compact one."""

import copy
import random

import pytest

from samplefile_rows import GIB, T0, legacy_write, node_rows, static_inventory
from slurm_energy.accounting import fast_device
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.core import DeviceStatic, Reading
from slurm_energy.model import Method
from slurm_energy.sampling.samplefile import SampleWriter, read_sample_file, read_sample_table

STATICS = [DeviceStatic(**d) for d in static_inventory()["devices"]]


def _both(monkeypatch, rows, **kw):
    kw = {"job_id": "1", "node": "n1", "start_time": rows[0]["t"], "end_time": rows[-1]["t"] + 2, "statics": STATICS,
          "cpus_alloc": 64, **kw}
    fast = summarise_node(copy.deepcopy(rows), **kw)
    monkeypatch.setattr(fast_device, "ENABLED", False)
    slow = summarise_node(copy.deepcopy(rows), **kw)
    monkeypatch.setattr(fast_device, "ENABLED", True)
    return fast, slow


def _with_models(rows, rnd):
    """Add a CPU TDP model and a RAM model device to every row (the readers' rows without RAPL)."""
    for r in rows:
        r["readings"].append(Reading("cpu", "cpu-tdp", "tdp_estimate", mean_power_w=rnd.uniform(50, 200)).to_dict())
        r["readings"].append(Reading("ram", "ram-model", "tdp_estimate", mean_power_w=rnd.uniform(5, 20)).to_dict())
    return rows


@pytest.mark.parametrize("policy", ["shared", "exclusive_whole_node"])
def test_array_path_equals_general_path_on_a_busy_gpu_node(monkeypatch, policy):
    # 3 h at 5 s crosses hours (hourly split), wraps RAPL (range 262 kJ at ~165 W: every ~26 min)
    rows, _ = node_rows(3 * 720 + 1)
    rows = _with_models(rows, random.Random(1))
    fast, slow = _both(monkeypatch, rows, policy=policy)
    assert fast.model_dump() == slow.model_dump()
    rapl = next(d for d in fast.devices if d.device_id == "intel-rapl:0")
    assert rapl.wraps > 0 and "wrap" in rapl.flags and rapl.method == Method.COUNTER
    assert len(fast.hourly_energy_j) == 4 and len(fast.power_trace) == 3 * 720


def test_array_path_equals_general_path_with_clamps_gaps_and_shared_gpus(monkeypatch):
    rnd = random.Random(7)
    rows, _ = node_rows(400)
    for k, r in enumerate(rows):
        if k % 50 == 7:
            r["job"]["cpu_time_s"] = None  # the job unseen at one poll: its share unknown there, never 0
        if k % 60 == 3:
            r["job"]["cpu_time_s"] += 1e6  # a CPU time jump beyond the node's busy time: clamped, flagged
        if k % 70 == 5:
            r["node"]["mem_used_bytes"] = None
        if k % 3 == 0:  # another job's process on GPU 0: shared by per-process utilisation
            r["readings"][2]["proc_util"] = {41000: 0.5, 99: rnd.choice([0.25, 1.2])}
        if k % 5 == 0:
            r["readings"][3]["util"] = 1.3  # NVML above 100 %: clamped, raw value kept
        r["job"]["mem_bytes"] = r["job"]["mem_bytes"] * (3 if k % 90 == 1 else 1)
    rows[200]["job"] = None  # a hook's own reading in the middle
    fast, slow = _both(monkeypatch, _with_models(rows, rnd))
    assert fast.model_dump() == slow.model_dump()
    flags = {f for d in fast.devices for f in d.flags}
    assert {"share_clamped", "util_clamped", "shared_gpu_by_process_util"} <= flags


def test_devices_the_array_path_leaves_to_the_general_path(monkeypatch):
    rows, _ = node_rows(100)
    rows[40]["readings"][0]["energy_uj"] = None  # RAPL unreadable once: two intervals dropped
    rows[60]["readings"][2]["flags"] = ["nvml_error:NVMLError_Unknown"]
    rows[70]["readings"][3]["energy_uj"] = 5  # a GPU counter that went backwards with no range: a reset
    fast, slow = _both(monkeypatch, rows)
    assert fast.model_dump() == slow.model_dump()
    rapl0 = fast.devices[0]
    assert rapl0.dropped_samples == 2 and rapl0.coverage < 1
    assert next(d for d in fast.devices if d.resets).resets == 1


def test_old_json_lines_file_gives_the_same_summary_as_the_compact_file(tmp_path):
    rows, _ = node_rows(2 * 720 + 1)
    old, new = tmp_path / "old.jsonl", tmp_path / "new"
    legacy_write(str(old), rows)
    w = SampleWriter(str(new), fsync=False)
    for r in rows:
        w.write(r)
    w.close()
    kw = {"job_id": "1", "node": "n1", "start_time": T0, "end_time": rows[-1]["t"], "statics": STATICS, "cpus_alloc": 64}
    a = summarise_node(read_sample_table(str(old)), **kw)
    b = summarise_node(read_sample_table(str(new)), **kw)
    c = summarise_node(read_sample_file(str(old)), **kw)
    assert a.model_dump() == c.model_dump()
    ea = {d.device_id: d.energy_j for d in a.devices}
    eb = {d.device_id: d.energy_j for d in b.devices}
    # the compact file keeps sample times to the microsecond: the counters' energies are exact,
    # the job's shares (CPU seconds per interval) the same to the microsecond
    assert eb == pytest.approx(ea, rel=1e-9)
    gpu0 = rows[-1]["readings"][2]["energy_uj"] - rows[0]["readings"][2]["energy_uj"]
    assert eb[rows[0]["readings"][2]["device_id"]] == pytest.approx(gpu0 / 1e6, rel=1e-12)  # uJ -> J, share 1
    assert a.devices[0].method == b.devices[0].method == Method.COUNTER
    assert b.n_samples == a.n_samples == 2 * 720 + 1
    assert 40 * GIB < b.max_mem_bytes


def test_counter_vs_power_rule_is_the_same_on_both_paths(monkeypatch):
    # 300 rows at 5 s; GPU 0's averaged power reads 3x at rows 100 and 101 (the counter moving: kept,
    # power_disagrees) and its counter sticks from row 200 to 203 (power high, no catch-up: those
    # intervals by power, counter_stuck). The array path hands the device to the general path: one rule.
    rows, _ = node_rows(300)
    uid = next(r["device_id"] for r in rows[0]["readings"] if r["device_class"] == "gpu")
    gpu = [next(r for r in row["readings"] if r["device_id"] == uid) for row in rows]
    for k in (100, 101):
        gpu[k]["power_w"] = gpu[k]["power_w"] * 3
    stuck = gpu[203]["energy_uj"] - gpu[200]["energy_uj"]
    for g in gpu[201:204]:
        g["energy_uj"] = gpu[200]["energy_uj"]
    for g in gpu[204:]:
        g["energy_uj"] -= stuck
    fast, slow = _both(monkeypatch, rows)
    assert fast.model_dump() == slow.model_dump()
    d = next(x for x in fast.devices if x.device_id == uid)
    assert {"power_disagrees", "counter_stuck", "counter_inconsistent"} <= set(d.flags)
    assert d.method == Method.POWER_INTEGRATION and d.resets == 0

"""The sample file: compact lines read back as written (every value, None kept None), old JSON-lines
files still read, torn and garbled lines cost only themselves, incremental reads."""

import json
import os

import pytest

from slurm_energy.core import Sample
from slurm_energy.sampling.samplefile import SampleReader, SampleWriter, read_sample_file
from tests.helpers.samplefile_rows import legacy_write, node_rows, read_samples


def _norm(rows):
    """Rows as JSON would give them (int keys of proc_util as str), without their times (compared
    apart: kept to the microsecond) and without reading fields that are None (not written)."""
    out = json.loads(json.dumps(rows))
    for r in out:
        del r["t"]
        r["readings"] = [{k: v for k, v in x.items() if v is not None} for x in r["readings"]]
    return out


def _times(rows):
    return [r["t"] for r in rows]


def _write(path, rows):
    w = SampleWriter(str(path), fsync=False)
    for r in rows:
        w.write(r)
    w.close()


def _odd_rows():
    rows, _ = node_rows(6)
    rows[1]["job"]["cpu_time_s"] = 1.0 / 3  # not a whole microsecond: kept as written, not rounded
    rows[1]["readings"][2]["power_w"] = None  # unreadable at that instant: None, never 0
    rows[2]["readings"][0] = {"device_class": "cpu", "device_id": "intel-rapl:0", "method": "unavailable",
                              "flags": ["eacces"]}  # RAPL turned root-only: a new schema line, then back
    rows[2]["readings"][3]["proc_util"] = {}
    rows[3]["job"]["pids"] = [7, 8]
    rows[3]["readings"][4]["proc_util"] = None
    rows[4]["job"] = None  # a hook's own reading
    rows[4]["kind"] = "epilog"
    rows[5]["node"] = {}
    rows[5]["job"]["mem_bytes"] = None
    return rows


def test_compact_lines_read_back_every_value_as_written(tmp_path):
    rows = _odd_rows()
    p = tmp_path / "samples"
    _write(p, rows)
    back = list(read_samples(str(p)))
    want = _norm(rows)
    for r in want:  # the reader gives every field of a row (None where absent), as Sample.to_dict does
        r["node"] = {k: v for k, v in r["node"].items() if v is not None}
    assert _times(back) == pytest.approx(_times(rows), abs=1e-6)
    assert _norm(back) == want
    assert back[1]["job"]["cpu_time_s"] == 1.0 / 3 and back[1]["readings"][2].get("power_w") is None
    schema_lines = [x for x in p.read_text().splitlines() if x.startswith("#S")]
    # first row; a field None (GPU power); RAPL eacces (and proc_util back); RAPL back (proc_util
    # None); a hook's row (no job); an empty node
    assert len(schema_lines) == 6


def test_a_busy_gpu_node_takes_under_400_bytes_per_sample(tmp_path):
    rows, _ = node_rows(721)  # an hour at 5 s: 2 RAPL packages + 8 GPUs with power, util, memory, processes
    old, new = tmp_path / "old.jsonl", tmp_path / "new"
    legacy_write(str(old), rows)
    _write(new, rows)
    assert os.path.getsize(new) / len(rows) < 400 < 2000 < os.path.getsize(old) / len(rows)
    a, b = list(read_samples(str(new))), list(read_samples(str(old)))
    assert _norm(a) == _norm(b) and _times(a) == pytest.approx(_times(b), abs=1e-6)


def test_old_json_lines_file_and_a_file_with_both_kinds_are_read(tmp_path):
    rows, _ = node_rows(10)
    p = tmp_path / "samples"
    legacy_write(str(p), rows[:4])  # an older sampler's lines, then a newer Epilog's
    _write(p, rows[4:])
    got = read_sample_file(str(p))
    assert [s.kind for s in got] == ["start"] + ["sample"] * 9
    assert got[3].readings[2].energy_uj == rows[3]["readings"][2]["energy_uj"]
    assert got[7].readings[2].energy_uj == rows[7]["readings"][2]["energy_uj"]
    assert got[7].readings[2].proc_util == {41000: rows[7]["readings"][2]["proc_util"][41000]}


def test_a_torn_last_line_is_skipped_and_the_next_writer_starts_on_a_new_line(tmp_path):
    rows, _ = node_rows(6)
    p = tmp_path / "samples"
    _write(p, rows[:3])
    text = p.read_text()
    p.write_text(text + text.splitlines()[-1][:25])  # the sampler killed mid-line
    assert [s.t for s in read_sample_file(str(p))] == pytest.approx([r["t"] for r in rows[:3]], abs=1e-6)
    _write(p, rows[3:])  # the Epilog's reading after it
    assert [s.t for s in read_sample_file(str(p))] == pytest.approx([r["t"] for r in rows], abs=1e-6)


def test_a_damaged_line_costs_its_writer_until_the_next_schema_line_never_a_wrong_value(tmp_path, monkeypatch):
    from slurm_energy.sampling import samplecodec

    monkeypatch.setattr(samplecodec, "KEYFRAME_ROWS", 4)  # whole values again every 4 rows
    rows, _ = node_rows(10)
    p = tmp_path / "samples"
    _write(p, rows)
    lines = p.read_text().splitlines(keepends=True)
    assert [ln.startswith("#S") for ln in lines].count(True) == 3  # rows 0-3, 4-7, 8-9
    cells = lines[3].split(",")  # the third row (line 0 is the schema)
    lines[3] = ",".join(cells[:5] + ["x!"] + cells[6:])
    p.write_text("".join(lines))
    got = read_sample_file(str(p))
    # rows 0, 1 kept; 2 damaged and 3 (its differences chain through row 2) lost; 4.. from the next schema line
    assert [s.t for s in got] == pytest.approx([r["t"] for k, r in enumerate(rows) if k not in (2, 3)], abs=1e-6)
    assert [s.readings[0].energy_uj for s in got] == [r["readings"][0]["energy_uj"] for k, r in enumerate(rows)
                                                      if k not in (2, 3)]


def test_two_writers_appending_to_one_file_do_not_mix_their_columns(tmp_path):
    rows, _ = node_rows(6)
    p = tmp_path / "samples"
    a, b = SampleWriter(str(p), fsync=False), SampleWriter(str(p), fsync=False)
    hook_row = {"t": rows[0]["t"] - 1, "kind": "prolog", "job": None, "node": {"ncpu": 64},
                "readings": rows[0]["readings"][:2]}
    b.write(hook_row)
    for r in rows[:3]:
        a.write(r)
    b.write(dict(hook_row, t=rows[2]["t"] + 1, kind="epilog"))
    for r in rows[3:]:
        a.write(r)
    a.close()
    b.close()
    got = read_sample_file(str(p))
    assert [s.kind for s in got] == ["prolog", "start", "sample", "sample", "epilog", "sample", "sample", "sample"]
    assert [s.readings[0].energy_uj for s in got if s.job] == [r["readings"][0]["energy_uj"] for r in rows]
    assert got[4].readings[1].energy_uj == rows[0]["readings"][1]["energy_uj"]


def test_incremental_reader_returns_only_new_complete_lines(tmp_path):
    rows, _ = node_rows(8)
    p = tmp_path / "samples"
    r = SampleReader(str(p))
    assert len(r.read_table()) == 0  # no file yet
    w = SampleWriter(str(p), fsync=False)
    for x in rows[:5]:
        w.write(x)
    assert r.read_table().t == pytest.approx([x["t"] for x in rows[:5]], abs=1e-6)
    assert len(r.read_table()) == 0
    s5 = Sample.from_dict(rows[5])
    line = w._enc.sample_lines(s5.t, s5.kind, s5.job, s5.node, s5.readings)
    with open(p, "a") as f:
        f.write(line[:20])  # half a line: left for the next read
    assert len(r.read_table()) == 0
    with open(p, "a") as f:
        f.write(line[20:])
    for x in rows[6:]:
        w.write(x)
    w.close()
    t = r.read_table()
    assert t.t == pytest.approx([x["t"] for x in rows[5:]], abs=1e-6)
    assert t.devices["intel-rapl:1"].vals["energy_uj"] == [x["readings"][1]["energy_uj"] for x in rows[5:]]
    assert r.offset == os.path.getsize(p)


def test_long_columns_and_counters_beyond_int64_read_back(tmp_path):
    from slurm_energy.sampling.samplefile import read_sample_table

    rows = _odd_rows() + node_rows(30, seed=5)[0]
    rows[8]["readings"][0]["energy_uj"] = 2**62 + 12345  # a sum beyond int64's safe range: Python's ints
    p = tmp_path / "samples"
    _write(p, rows)
    got = read_sample_table(str(p))
    assert got.t == pytest.approx([r["t"] for r in rows], abs=1e-6)
    assert got.devices["intel-rapl:0"].vals["energy_uj"][8] == 2**62 + 12345


def test_sample_lines_from_objects_read_back_as_the_same_values(tmp_path):
    """The one encoder (objects, a plan per schema) reads back as what was written, also when a
    method, a flag, a counter's quantum or the job's presence changes between rows (new schemas)."""
    from slurm_energy.core import JobUsage, NodeUsage, Reading

    w = SampleWriter(str(tmp_path / "s"), fsync=False)
    want = []
    for k in range(400):
        u = None if k % 97 == 5 else JobUsage(k * 0.01 if k % 13 else None, 1000 + k, 5000, [1, 2] if k % 50 else [3],
                                              "cgroup-v1")
        ns = None if k % 89 == 3 else NodeUsage(round(1000.123 + k * 0.37, 3), 5000.5 + k, 2, 10**9 + k, 2 * 10**9)
        rs = [Reading("cpu", "intel-rapl:0", "counter", energy_uj=k * 1000 + (1 if k % 31 == 0 else 0),
                      max_energy_range_uj=2**32, energy_resolution_uj=1000 if k > 10 else None, max_power_w=200.0,
                      flags=["psys"] if k % 200 == 7 else []),
              Reading("gpu", "GPU-x", "power_integration" if k % 70 else "unavailable",
                      power_w=None if k % 70 == 0 else 100 + k / 3, util=0.5, mem_bytes=10 + k,
                      proc_util={12: 0.5} if k % 3 else None),
              Reading("cpu", "cpu-tdp", "tdp_estimate", mean_power_w=None if k == 0 else 12.5 * k)]
        t, kind = 1.7e9 + k * 1.000001, "start" if k == 0 else "sample"
        w.write_sample(t, kind, u, ns, rs)
        want.append(Sample(t, kind, u, ns or NodeUsage(), rs).to_dict())
    w.close()
    got = [s.to_dict() for s in read_sample_file(str(tmp_path / "s"))]
    assert len(got) == 400 and open(tmp_path / "s").read().count("#S") > 10
    for g, x in zip(got, want):
        assert g["t"] == pytest.approx(x["t"], abs=1e-6)
        assert {**g, "t": 0} == {**x, "t": 0}


def test_kept_stat_descriptor_reads_a_zombie_then_none_once_reaped():
    import subprocess
    import time

    from slurm_energy.sampling.files import KeptFiles
    from slurm_energy.sampling.proctree import read_stat

    p = subprocess.Popen(["sleep", "0.2"])
    sf = KeptFiles()
    assert read_stat(p.pid, files=sf)[1] == os.getpid()  # (state, ppid, cpu s, rss bytes): parent is this process
    time.sleep(0.5)
    assert read_stat(p.pid, files=sf)[0] == "Z"  # exited, not reaped: still answers
    p.wait()
    assert read_stat(p.pid, files=sf) is None and not sf._fds  # reaped: ESRCH, descriptor closed

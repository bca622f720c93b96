"""Phase/stage marks -> energy per time window (accounting.phases), values computed by hand."""

import json

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.accounting.phases import MAX_MARKS, MAX_PHASES, MAX_STAGES, complement, parse_marks, union, windows_energy
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.model import CarbonFacts, JobRecord, Method

T0 = 1_796_034_000.0  # 2026-11-30T10:20:00Z


def row(t, job_cpu, node_busy, node_total, readings):
    return {"t": T0 + t, "kind": "sample", "job": {"cpu_time_s": job_cpu, "mem_bytes": None, "pids": [1],
                                                  "source": "cgroup-v1"},
            "node": {"cpu_busy_s": node_busy, "cpu_total_s": node_total, "ncpu": 2}, "readings": readings}


def _m(**d):
    return json.dumps(d)


def pkg(e_j):  # a RAPL package counter, J -> uJ
    return {"device_class": "cpu", "device_id": "intel-rapl:0", "method": "counter", "energy_uj": int(e_j * 1e6),
            "max_energy_range_uj": 10 ** 15}


def _rows():
    # 0-10 s: +100 J (10 W), 10-20 s: +300 J (30 W), 20-30 s: +200 J (20 W); the job has the whole node
    # (its CPU-time delta equals the node's busy delta), so the job's share is 1
    return [row(0, 0.0, 0, 0, [pkg(0)]), row(10, 5.0, 5, 20, [pkg(100)]),
            row(20, 10.0, 10, 40, [pkg(400)]), row(30, 15.0, 15, 60, [pkg(600)])]


def test_parse_marks_keeps_good_marks_and_flags_bad_ones():
    lines = [
        _m(t=1.0, ev="begin", id=1, name="epoch 0"),
        "{not json", "", "[1, 2]", "[" * 100_000 + "]" * 100_000,
        _m(t=10 ** 400, ev="stage", frac=0.5),
        _m(t=2.0, ev="end", id=1),
        _m(t=2.5, ev="end", id=99),  # never begun
        _m(t=3.0, ev="stage", frac=0.6),
        _m(t=3.0, ev="stage", frac=1.5),  # out of range
        _m(t=3.1, ev="stage", frac="NaN"),
        _m(t=4.0, ev="tag", tags={"flops": 1e18, "model_params": 7, "bad key": 1, "tokens": "many words",
                                  "precision": "bf16"}),
        _m(t=5.0, ev="begin", id=2, name="never closed"),
        _m(t=5.0, ev="begin", id=3, name="x\u0000y"),  # control character: not a name
    ]
    m = parse_marks(lines)
    assert m.phases == [("epoch 0", 1.0, 2.0, 0), ("never closed", 5.0, None, 0)]
    assert m.stages == [(0.6, 3.0)]
    assert m.tags == {"flops": 1e18, "model_params": 7.0, "precision": "bf16"}
    assert sorted(m.flags) == sorted(["marks_garbled:4", "marks_end_without_begin:1", "marks_stage_out_of_range:2",
                                      "marks_bad_tag:2", "marks_bad_phase:1"])


def test_parse_marks_nesting_depth_and_bound():
    m = parse_marks([_m(t=0, ev="begin", id=1, name="train"), _m(t=1, ev="begin", id=2, name="epoch 0"),
                     _m(t=2, ev="end", id=2), _m(t=3, ev="end", id=1)])
    assert m.phases == [("train", 0.0, 3.0, 0), ("epoch 0", 1.0, 2.0, 1)]
    many = [_m(t=float(i), ev="stage", frac=0.5) for i in range(MAX_MARKS + 5)]
    m = parse_marks(many)
    # 10,000 marks read, the first 1,000 stages kept (issue 22: the finalizer's cost is bounded)
    assert len(m.stages) == MAX_STAGES and f"marks_truncated_after:{MAX_MARKS}" in m.flags
    assert f"marks_truncated_stages:{MAX_STAGES}" in m.flags
    phases = [_m(t=float(i), ev="begin", id=i, name=f"p{i}") for i in range(MAX_PHASES + 7)]
    m = parse_marks(phases)
    assert len(m.phases) == MAX_PHASES and m.flags == [f"marks_truncated_phases:{MAX_PHASES}"]


def test_union_and_complement():
    assert union([(5, 8), (0, 2), (1, 3), (8, 9), (4, 4)]) == [(0, 3), (5, 9)]
    assert complement([(0, 3), (5, 9)], -1, 10) == [(-1, 0), (3, 5), (9, 10)]


def test_windows_energy_prorates_straddling_intervals():
    series = [("cpu", Method.COUNTER, [(0, 10, 100.0), (10, 20, 300.0), (20, 30, None)])]
    e, meth, cov = windows_energy(series, [(5, 15)])
    assert e == {"cpu": pytest.approx(50.0 + 150.0)}  # 10 W x 5 s + 30 W x 5 s
    assert meth == {"cpu": Method.COUNTER} and cov == pytest.approx(1.0)
    e, meth, cov = windows_energy(series, [(15, 25)])  # half of it in the unmeasured interval
    assert e["cpu"] == pytest.approx(150.0) and cov == pytest.approx(0.5)
    e, meth, cov = windows_energy(series, [(22, 28)])  # nothing measured: None, never 0
    assert e == {"cpu": None} and meth == {"cpu": Method.UNAVAILABLE} and cov == 0.0


def test_node_phases_nested_gaps_never_closed_and_stages():
    marks = parse_marks([
        _m(t=T0 + 5, ev="begin", id=1, name="train"),
        _m(t=T0 + 5, ev="begin", id=2, name="epoch 0"), _m(t=T0 + 15, ev="end", id=2),
        _m(t=T0 + 15, ev="stage", frac=0.5),
        _m(t=T0 + 15, ev="end", id=1),
        _m(t=T0 + 25, ev="begin", id=3, name="eval"),  # never closed: ends with the job at 30 s
    ])
    s = summarise_node(_rows(), job_id="1", node="n1", start_time=T0, end_time=T0 + 30, marks=marks, interval_s=10)
    assert s.devices[0].energy_j == pytest.approx(600.0)
    w = {(x.kind, x.name): x for x in s.windows}
    assert w["phase", "train"].it_j == pytest.approx(50 + 150)  # 5-15 s
    assert w["phase", "epoch 0"].it_j == pytest.approx(200.0) and w["phase", "epoch 0"].depth == 1
    assert w["phase", "eval"].it_j == pytest.approx(100.0)  # 25-30 s at 20 W
    assert "never_closed" in w["phase", "eval"].flags and "shorter_than_interval" in w["phase", "eval"].flags
    assert w["stage", "50%"].it_j == pytest.approx(100 + 150)  # 0-15 s
    # nested phases counted once: union 5-15 and 25-30 s = 300 J; outside: 0-5 + 15-25 s = 50 + 150 + 100
    assert w["in_phases", "all phases (nested counted once)"].it_j == pytest.approx(300.0)
    assert w["outside", "outside any phase"].it_j == pytest.approx(300.0)
    assert w["in_phases", "all phases (nested counted once)"].it_j + w["outside", "outside any phase"].it_j \
        == pytest.approx(s.devices[0].energy_j)


def test_outside_includes_a_final_sample_after_the_epilog_time():
    # the sampler's final sample (on the Epilog's TERM) lands at 30 s, after the Epilog's time (28 s):
    # the 20-30 s interval (200 J) still counts, 2 s of it "outside" the job's span
    marks = parse_marks([_m(t=T0 + 10, ev="begin", id=1, name="epoch 0"), _m(t=T0 + 20, ev="end", id=1)])
    s = summarise_node(_rows(), job_id="1", node="n1", start_time=T0, end_time=T0 + 28, marks=marks)
    w = {x.kind: x.it_j for x in s.windows}
    assert w["in_phases"] == pytest.approx(300.0) and w["outside"] == pytest.approx(100.0 + 200.0)
    assert w["in_phases"] + w["outside"] == pytest.approx(s.devices[0].energy_j)
    # the windows' bounds: the union is the phases' (10-20 s), not the job's; "outside" ends with the
    # job (28 s), not at the final sample (30 s), though that sample's energy counts
    b = {x.kind: (x.start_time - T0, x.end_time - T0) for x in s.windows}
    assert b["in_phases"] == (10.0, 20.0) and b["outside"] == (0.0, 28.0)


def test_union_window_spans_the_phases_not_the_job():
    marks = parse_marks([_m(t=T0 + 5, ev="begin", id=1, name="a"), _m(t=T0 + 12, ev="end", id=1),
                         _m(t=T0 + 18, ev="begin", id=2, name="b"), _m(t=T0 + 24, ev="end", id=2)])
    s = summarise_node(_rows(), job_id="1", node="n1", start_time=T0, end_time=T0 + 30, marks=marks)
    b = {x.kind: (x.start_time - T0, x.end_time - T0) for x in s.windows}
    assert b["in_phases"] == (5.0, 24.0) and b["outside"] == (0.0, 30.0)


def test_record_windows_summed_over_nodes_with_co2e():
    marks = parse_marks([_m(t=T0 + 10, ev="begin", id=1, name="epoch 0"), _m(t=T0 + 20, ev="end", id=1),
                         _m(t=T0 + 20, ev="stage", frac=1.0)])
    nodes = [summarise_node(_rows(), job_id="1", node=n, start_time=T0, end_time=T0 + 30, marks=marks)
             for n in ("n1", "n2")]
    rec = JobRecord(job_id="1", start_time=T0, end_time=T0 + 30, nodes=nodes, expected_nodes=["n1", "n2"])
    fin = finalise_record(rec, CarbonFacts(pue=1.5, ci_g_per_kwh=400.0))
    # job: 2 nodes x 600 J = 1200 J; epoch 0: 2 x 300 J = 600 J -> CO2e = 600 J / 3.6e6 x 1.5 x 400 g = 0.1 g
    (p,) = fin.phases
    assert p.it_j == pytest.approx(600.0) and p.energy_it_j == {"cpu": pytest.approx(600.0)}
    assert p.co2e_kg == pytest.approx(600 / 3.6e6 * 1.5 * 400 / 1000)
    (st,) = fin.stages
    assert st.fraction == 1.0 and st.it_j == pytest.approx(2 * 400.0)  # 0-20 s on both nodes
    totals = {w.kind: w.it_j for w in fin.phase_totals}
    assert totals == {"in_phases": pytest.approx(600.0), "outside": pytest.approx(600.0)}


def test_record_without_marks_has_no_windows():
    s = summarise_node(_rows(), job_id="1", node="n1", start_time=T0, end_time=T0 + 30)
    fin = finalise_record(JobRecord(job_id="1", start_time=T0, end_time=T0 + 30, nodes=[s]), CarbonFacts())
    assert fin.phases == [] and fin.stages == [] and fin.phase_totals == [] and s.windows == []


def test_finalizer_reads_the_jobs_marks_as_data_and_keeps_the_record(tmp_path, monkeypatch):
    """node_record (the finalizer, and the sampler's interim flush) with the job's marks file: good
    marks become windows, garbage becomes flags, the record is there either way."""
    from slurm_energy.config import SiteConfig
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.context import JobContext
    from slurm_energy.slurm.jobend.node_record import node_record

    monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(tmp_path / "marks"))
    spool = Attempt(str(tmp_path / "spool"), "31", 0, "n1").ensure()
    with open(spool.samples, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in _rows())
    ctx = JobContext(job_id="31", uid=0, gid=0, node="n1", nodelist="n1", prolog_time=T0)
    (tmp_path / "marks" / "31").mkdir(parents=True)
    marks = tmp_path / "marks" / "31" / "marks-n1.jsonl"
    marks.write_text("\n".join([_m(t=T0 + 10, ev="begin", id=1, name="epoch 0"), "\x00garbage{{{",
                                _m(t=T0 + 20, ev="end", id=1), _m(t=T0 + 20, ev="stage", frac=0.5),
                                _m(t=T0 + 21, ev="tag", tags={"flops": 2e15})]) + "\n")
    rec = node_record(SiteConfig(), spool, ctx, T0 + 30)
    (w,) = [w for w in rec.nodes[0].windows if w.kind == "phase"]
    assert w.name == "epoch 0" and w.it_j == pytest.approx(300.0)  # 10-20 s at 30 W
    assert rec.tags == {"flops": 2e15} and rec.nodes[0].marks_flags == ["marks_garbled:1"]
    marks.unlink()
    marks.symlink_to("/etc/shadow")  # never followed: flagged, the record is still made
    rec = node_record(SiteConfig(), spool, ctx, T0 + 30)
    assert rec.nodes[0].windows == [] and rec.nodes[0].marks_flags == ["marks_not_regular"]
    assert rec.nodes[0].devices[0].energy_j == pytest.approx(600.0)


def test_a_phase_with_rows_at_its_edges_is_read_one_cut_inside_intervals_is_flagged():
    # rows at 0, 10, 20, 30 s; phase "read" 10-20 s has a row at each edge (within 0.1 s): exactly
    # the 10-20 s interval, 300 J, no flag; phase "cut" 5-15 s: 10 W x 5 s + 30 W x 5 s = 200 J cut
    # from two intervals, flagged interval_cut (not shorter than the 10 s interval); a stage at 15 s
    # is cut too, one at 20.05 s is read
    marks = parse_marks([_m(t=T0 + 10.02, ev="begin", id=1, name="read"), _m(t=T0 + 19.97, ev="end", id=1),
                         _m(t=T0 + 5, ev="begin", id=2, name="cut"), _m(t=T0 + 15, ev="end", id=2),
                         _m(t=T0 + 15, ev="stage", frac=0.5), _m(t=T0 + 20.05, ev="stage", frac=0.9)])
    s = summarise_node(_rows(), job_id="1", node="n1", start_time=T0, end_time=T0 + 30, marks=marks, interval_s=10)
    w = {(x.kind, x.name): x for x in s.windows}
    assert w["phase", "read"].it_j == pytest.approx(300.0 * 9.95 / 10) and w["phase", "read"].flags == []
    assert w["phase", "cut"].it_j == pytest.approx(200.0) and w["phase", "cut"].flags == ["interval_cut"]
    assert w["stage", "50%"].flags == ["interval_cut"] and w["stage", "90%"].flags == []

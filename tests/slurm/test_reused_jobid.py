"""A job id Slurm reuses (state reset, MaxJobId wrap): two runs are two jobs, never merged.

Node records of different runs meet in one results directory (``<cluster>/<job>.<restart>``) when
the older run's merge never completed or its files were not moved; they are told apart by SLUID or
SLURM_JOB_START_TIME where Slurm gives them, else by the run's node list and overlapping spans.
"""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.accounting.merge import merge_records, split_runs
from slurm_energy.cli.jobenergy import main
from slurm_energy.model import CarbonFacts
from slurm_energy.slurm.jobend.results import (
    job_results_dir,
    retire_run,
    write_node_record,
)
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import node_record, own_site_config, parse_slurm_env, try_merge

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
MONTH = 30 * 86400


def rec(node, start, end, expected, cpu_j, **kw):
    return node_record(job_id="42", node=node, start=start, end=end, expected=expected, cpu_j=cpu_j, ram_j=None, **kw)


def test_reused_id_on_other_nodes_is_not_merged_with_the_old_run(tmp_path):
    # old run on n1 (expected n1, n9): n9 never reported, so its merge never happened
    write_node_record(tmp_path, rec("n1", T0, T0 + 600, ("n1", "n9"), 3.6e6))
    # a month later the id is reused on n2 + n3
    new2 = rec("n2", T0 + MONTH, T0 + MONTH + 60, ("n2", "n3"), 1.0e5)
    write_node_record(tmp_path, new2)
    assert try_merge(tmp_path, "c1", "42", 0, ["n2", "n3"], record=new2) is None  # n3 not yet: n1 is not it
    new3 = rec("n3", T0 + MONTH + 1, T0 + MONTH + 61, ("n2", "n3"), 2.0e5)
    write_node_record(tmp_path, new3)
    m = try_merge(tmp_path, "c1", "42", 0, ["n2", "n3"], record=new3)
    assert [n.node for n in m.nodes] == ["n2", "n3"]
    assert (m.start_time, m.end_time) == (T0 + MONTH, T0 + MONTH + 61)
    f = finalise_record(m, CarbonFacts(pue=1.0, ci_g_per_kwh=0.0))
    assert f.energy_it_j["cpu"] == pytest.approx(3.0e5)  # 1e5 + 2e5 J, none of the old run's 3.6e6 J
    # stored: its files move to stored/<start>/, the old run's file stays for collect
    assert retire_run(tmp_path, m) == 2
    d = job_results_dir(tmp_path, "c1", "42", 0)
    assert sorted(p.name for p in d.glob("*.json")) == ["n1.json"]
    assert sorted(p.name for p in (d / "stored" / f"{T0 + MONTH:.3f}").glob("*.json")) == ["n2.json", "n3.json"]


def test_reused_id_on_the_same_node_keeps_the_old_runs_file(tmp_path):
    # the old run's record on n1 was never merged (n2 missing); the new run on n1 alone must not
    # overwrite it nor be merged with it
    write_node_record(tmp_path, rec("n1", T0, T0 + 600, ("n1", "n2"), 3.6e6))
    new = rec("n1", T0 + MONTH, T0 + MONTH + 60, ("n1",), 7.2e5)
    write_node_record(tmp_path, new)
    d = job_results_dir(tmp_path, "c1", "42", 0)
    assert sorted(p.name for p in d.glob("*.json")) == ["n1.1700000000.json", "n1.json"]
    m = try_merge(tmp_path, "c1", "42", 0, ["n1"], record=new)
    assert m.start_time == T0 + MONTH and m.nodes[0].devices[0].energy_j == pytest.approx(7.2e5)


def test_same_node_set_runs_split_by_time_and_by_slurm_ids():
    old = rec("n1", T0, T0 + 600, ("n1",), 1.0)
    new = rec("n1", T0 + 3600, T0 + 3700, ("n1",), 2.0)
    assert [len(r) for r in split_runs([new, old])] == [1, 1]
    # overlapping in time (slurmctld lost the old job, slurmd still ran it) but Slurm's ids differ
    a = rec("n1", T0, T0 + 600, ("n1",), 1.0, sluid="sl_A")
    b = rec("n2", T0 + 10, T0 + 700, ("n1",), 1.0, sluid="sl_B")
    assert len(split_runs([a, b])) == 2
    a2 = rec("n1", T0, T0 + 600, ("n1", "n2"), 1.0, slurm_start_time=T0)
    b2 = rec("n2", T0 + 1, T0 + 601, ("n1", "n2"), 1.0, slurm_start_time=T0)
    assert len(split_runs([a2, b2])) == 1  # one run across two nodes
    with pytest.raises(ValueError):
        merge_records([rec("n1", T0, T0 + 1, ("n1",), 1.0), rec("n1", T0, T0 + 1, ("n1",), 1.0, restart_count=1)])


def test_requeue_is_a_different_run():
    a = rec("n1", T0, T0 + 600, ("n1",), 1.0, restart_count=0)
    b = rec("n1", T0 + 700, T0 + 900, ("n1",), 1.0, restart_count=1)
    assert len(split_runs([a, b])) == 2


def test_env_carries_slurm_run_ids():
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0",
           "SLURM_JOB_START_TIME": "1700000000", "SLURM_JOB_SLUID": "sl_01J9ZQ"}
    ctx = parse_slurm_env(env)
    assert (ctx.slurm_start_time, ctx.sluid) == (1_700_000_000, "sl_01J9ZQ")
    ctx = parse_slurm_env(dict(env, SLURM_JOB_SLUID="../../x", SLURM_JOB_START_TIME="soon"))
    assert (ctx.slurm_start_time, ctx.sluid) == (None, "")  # not a SLUID / not a time: ignored


def test_store_keeps_both_runs_jobenergy_newest_with_warning_and_S_selects(tmp_path, capsys, monkeypatch):
    own_site_config(tmp_path, monkeypatch)
    u = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(u)
    facts = CarbonFacts(pue=1.0, ci_g_per_kwh=0.0)
    s.put(finalise_record(merge_records([rec("n1", T0, T0 + 600, ("n1",), 3.6e6)]), facts))  # 1 kWh
    s.put(finalise_record(merge_records([rec("n2", T0 + MONTH, T0 + MONTH + 60, ("n2",), 7.2e6)]), facts))  # 2
    assert len(s.get_job("42")) == 2
    s.close()
    assert main(["--store", u, "-P", "-n", "-o", "JobID,NodeList,CPU_kWh", "42"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "42|n2|2" and "used by 2 jobs" in err
    assert main(["--store", u, "-P", "-n", "-o", "JobID,NodeList,CPU_kWh", "-S", "2023-11-14", "42"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "42|n1|1" and err == ""

"""The nodes' metered energy per hour in the store, and the monthly rollup's idle energy per
partition: per partition, the jobs' kWh plus the idle (no job) kWh equals the nodes' meters."""

from __future__ import annotations

import json

import pytest

from slurm_energy.core import Reading
from slurm_energy.reporting.rollup_table import month_bounds
from slurm_energy.store import schema
from slurm_energy.store.nodehours import idle_by_partition, put_node_hours
from slurm_energy.store.rollup import month_rollup
from tests.helpers.jobrecord_factory import device, finished, job_record
from tests.helpers.store_backends import store, store_url  # noqa: F401  (fixtures)

H = 3600.0
T_OCT = 1_790_812_800.0  # 2026-10-01T00:00Z
KWH = 3.6e6


def _gpu_job(start: float = T_OCT, hours: float = 0.6, kwh: float = 6.0):
    """A job on node g1 in partition gpu: ``kwh`` over [start, start + hours h), all in the hour of
    ``start`` (the node's hourly energy, as its finalizer stamps it)."""
    ns = {"hourly_energy_j": {"2026-10-01T00:00:00Z": kwh * KWH}}
    return finished(job_record(job_id="7", node="g1", expected=("g1",), start=start, end=start + hours * H,
                               devices=[device("cpu", kwh * KWH, node="g1")], partition="gpu", node_fields=ns))


def _hour(h: float, metered: float, jobs: float, idle: float, node: str = "g1", partition: str = "gpu") -> dict:
    return dict(cluster="c1", node=node, hour_start=h, partition=partition, partition_from="jobs",
                source="acpi_power_meter", metered_kwh=metered, jobs_kwh=jobs, idle_kwh=idle, metered_s=3600.0)


def test_jobs_plus_idle_equal_the_meter_per_partition(store):
    # g1 (partition gpu) metered 10 kWh in 2026-10-01T00Z: its job 6 kWh, 4 kWh with no job.
    # g2 (partition cpu) 2 kWh, all idle. Sept 30 23:00Z (g1, 3 kWh idle) is outside October UTC.
    store.put(_gpu_job())
    assert put_node_hours(store.db, [_hour(T_OCT, 10.0, 6.0, 4.0), _hour(T_OCT - H, 3.0, 0.0, 3.0),
                                     _hour(T_OCT, 2.0, 0.0, 2.0, node="g2", partition="cpu")]) == 3
    t0, t1 = month_bounds("2026-10")
    [gpu] = month_rollup(store.db, "partition", t0, t1)
    idle = {r["partition"]: r for r in idle_by_partition(store.db, t0, t1)}
    assert gpu["partition"] == "gpu" and gpu["it_kwh"] == pytest.approx(6.0)
    assert idle["gpu"]["idle_kwh"] == pytest.approx(4.0) and idle["gpu"]["metered_kwh"] == pytest.approx(10.0)
    assert gpu["it_kwh"] + idle["gpu"]["idle_kwh"] == pytest.approx(idle["gpu"]["metered_kwh"])  # 6 + 4 = 10
    assert idle["gpu"]["residual_kwh"] == pytest.approx(0.0) and idle["gpu"]["nodes"] == 1
    assert (idle["cpu"]["idle_kwh"], idle["cpu"]["nodes"], idle["cpu"]["node_hours"]) == (pytest.approx(2.0), 1, 1)
    # a window from Sept 30 23:30Z takes half of the 23:00 hour: 4 + 3 / 2 = 5.5 kWh idle on gpu
    [g] = [r for r in idle_by_partition(store.db, T_OCT - H / 2, t1) if r["partition"] == "gpu"]
    assert g["idle_kwh"] == pytest.approx(5.5) and g["metered_kwh"] == pytest.approx(11.5)
    # stored again (reconcile run twice over the hour): replaced, not added
    put_node_hours(store.db, [_hour(T_OCT, 9.0, 6.0, 3.0)])
    assert store.db.execute("SELECT count(*), sum(idle_kwh) FROM node_hours WHERE node = 'g1' AND hour_start = :h",
                            {"h": int(T_OCT)}) == [(1, pytest.approx(3.0))]
    with pytest.raises(ValueError, match="not at a whole UTC hour"):
        put_node_hours(store.db, [_hour(T_OCT + 60, 1.0, 0.0, 1.0)])


def test_no_node_hours_stored_is_no_idle_line(store):
    assert schema.has_table(store.db, "node_hours") and schema.current_version(store.db) == 8
    assert idle_by_partition(store.db, *month_bounds("2026-10")) == []  # not metered: no line, never 0


def test_reconcile_save_then_rollup(tmp_path, capsys, monkeypatch):
    # the meter reads 10 kW every 10 s over 2026-10-01T00Z: 10 kWh. The job (partition gpu) ran
    # 0-2160 s charged 6 kWh; the node had no job 2160-3600 s: 1440 s x 10 kW = 4 kWh idle.
    from slurm_energy.cli import reconcile_cmd, store_cmds
    from slurm_energy.cli.main import build_parser
    from slurm_energy.sampling import meterspool
    from slurm_energy.store import open_store

    mf = str(tmp_path / "node-meter-g1.jsonl")
    for k in range(361):
        meterspool.append(mf, meterspool.MeterRow(T_OCT + 10 * k, "acpi_power_meter",
                                                  Reading("node", "acpi-power-meter-hwmon0", "power_integration",
                                                          power_w=10_000.0)))
    url = f"sqlite:///{tmp_path}/jobs.db"
    st = open_store(url)
    st.put(_gpu_job())
    st.close()
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: c1\ntimezone: UTC\npaths: {{spool_dir: {tmp_path}, store_url: '{url}'}}\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    args = build_parser().parse_args(["reconcile", "--node", "g1", "--format", "json", "--save"])
    assert reconcile_cmd.cmd_reconcile(args) == 0
    out = capsys.readouterr()
    [p] = json.loads(out.out)["periods"]
    assert (p["metered_kwh"], p["jobs_kwh"], p["idle_kwh"]) == (pytest.approx(10.0), pytest.approx(6.0),
                                                                pytest.approx(4.0))
    assert "1 node hour of g1 stored" in out.err
    st = open_store(url, readonly=True)
    assert st.db.execute('SELECT cluster, "partition", partition_from, metered_kwh, jobs_kwh, idle_kwh FROM node_hours') \
        == [("c1", "gpu", "jobs", pytest.approx(10.0), pytest.approx(6.0), pytest.approx(4.0))]
    st.close()
    rollup = tmp_path / "r.json"
    args = build_parser().parse_args(["rollup", "--month", "2026-10", "--by", "partition", "--format", "json",
                                      "--out", str(rollup)])
    assert store_cmds.cmd_rollup(args) == 0
    doc = json.loads(rollup.read_text())
    [gpu] = doc["rows"]
    [idle] = doc["idle_by_partition"]
    assert gpu["partition"] == idle["partition"] == "gpu"
    assert gpu["it_kwh"] + idle["idle_kwh"] == pytest.approx(idle["metered_kwh"]) == pytest.approx(10.0)  # 6 + 4
    args = build_parser().parse_args(["rollup", "--month", "2026-10", "--by", "partition"])
    assert store_cmds.cmd_rollup(args) == 0
    table = capsys.readouterr().out
    assert "Idle_kWh" in table and "Metered_kWh" in table


def test_save_needs_one_partition():
    from slurm_energy.cli.reconcile_cmd import node_partition

    a, b = job_record(job_id="1", partition="gpu"), job_record(job_id="2", partition="debug")
    assert node_partition("n1", None, [a, a]) == ("gpu", "jobs")
    assert node_partition("n1", "gpu", [a, b]) == ("gpu", "given")
    with pytest.raises(ValueError, match="ran in partitions debug, gpu; give --partition P"):
        node_partition("n1", None, [a, b])
    with pytest.raises(ValueError, match="name no partition .or no job ran.; give --partition"):
        node_partition("n1", None, [])

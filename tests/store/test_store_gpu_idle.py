"""GPU-idle figures on the store row (schema v3), and a v2 store (before the columns) surviving
the migration with its rows."""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.model import CarbonFacts, Method
from slurm_energy.store import open_store, schema
from slurm_energy.store.db import connect
from tests.helpers.jobrecord_factory import device, finished, job_record
from tests.helpers.store_backends import store_url  # noqa: F401  (fixture)

T = 1_796_034_000.0


def idle_job(job_id="7", idle_s=30.0, idle_j=1800.0, user="alice", account="physics", start=T):
    g = device("gpu", 10_200.0, method=Method.POWER_INTEGRATION, device_id="GPU-0", idle_s=idle_s,
               idle_energy_j=idle_j)
    return finalise_record(job_record(job_id=job_id, devices=[device("cpu", 3600.0), g], start=start, end=start + 60,
                                      user=user, account=account), CarbonFacts(pue=1.5, ci_g_per_kwh=400.0))


def test_idle_figures_on_the_row_and_the_record(tmp_path):
    st = open_store(f"sqlite:///{tmp_path}/s.db")
    rec = idle_job()
    assert (rec.gpu_idle_s, rec.gpu_idle_energy_j, rec.gpu_idle_method) == (30.0, 1800.0, "power_integration")
    st.put(rec)
    [row] = st.rows(jobs=["7"])
    # 1800 J / 3.6e6 J/kWh = 5.0e-4 kWh
    assert (row.gpu_idle_s, row.gpu_idle_kwh, row.gpu_idle_method) == (30.0, pytest.approx(5.0e-4), "power_integration")
    [got] = st.get_job("7")
    assert got.gpu_idle_energy_j == 1800.0
    st.close()


def test_v2_store_migrates_to_v3_and_v4_keeping_rows(store_url):
    """A v2 store (no GPU-idle columns, no sluid column) gains both, rows kept: the idle figures
    unknown (NULL, never 0), each run's SLUID backfilled from its record JSON."""
    st = open_store(store_url)
    st.put(finished(job_record(job_id="1", devices=[device("cpu", 3600.0)], sluid="sBR1JB8J1YM400")))
    st.put(finished(job_record(job_id="3", devices=[device("cpu", 3600.0)])))
    st.close()
    db = connect(store_url)
    with db.transaction():  # back to the v2 layout: the columns v3 and v4 added and v6's table, gone
        db.execute("DROP TABLE node_hours")
        db.execute("DROP INDEX ix_sluid")
        for col in ("gpu_idle_s", "gpu_idle_kwh", "gpu_idle_method", "sluid"):
            db.execute(f"ALTER TABLE job_records DROP COLUMN {col}")
        db.execute("DELETE FROM schema_version WHERE version >= 3")
    db.close()
    st = open_store(store_url)
    assert schema.current_version(st.db) == schema.SCHEMA_VERSION == 8
    assert {"gpu_idle_s", "gpu_idle_kwh", "gpu_idle_method", "sluid"} <= schema.columns(st.db, "job_records")
    [row] = st.rows(jobs=["1"])
    assert row.it_kwh == pytest.approx(0.001) and row.gpu_idle_s is None and row.gpu_idle_kwh is None  # unknown
    assert (row.sluid, st.rows(jobs=["3"])[0].sluid) == ("sBR1JB8J1YM400", "")
    assert [r.job_id for r in st.rows(jobs=["sBR1JB8J1YM400"])] == ["1"]
    st.put(idle_job(job_id="2"))
    [row2] = st.rows(jobs=["2"])
    assert row2.gpu_idle_kwh == pytest.approx(5.0e-4)
    st.close()


def test_rollup_idle_kwh_per_user_and_account_and_top_jobs(tmp_path, capsys, monkeypatch):
    import os
    import pwd

    from slurm_energy.cli.main import main as se_main
    from slurm_energy.reporting.rollup_table import month_bounds

    cfg = tmp_path / "site.yaml"
    cfg.write_text(f"admins: [{pwd.getpwuid(os.getuid()).pw_name}]\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(cfg))
    t0, _ = month_bounds("2026-11")
    url = f"sqlite:///{tmp_path}/s.db"
    st = open_store(url)
    # alice: 30 s at 60 W (1800 J = 5.0e-4 kWh) and 120 s at 60 W (7200 J = 2.0e-3 kWh); bob: 60 s at 60 W
    # on another account (3600 J = 1.0e-3 kWh)
    st.put(idle_job("1", 30.0, 1800.0, start=t0 + 100))
    st.put(idle_job("2", 120.0, 7200.0, start=t0 + 200))
    st.put(idle_job("3", 60.0, 3600.0, user="bob", account="chem", start=t0 + 300))
    st.close()
    for by, want in (("user", {"alice": 2.5e-3, "bob": 1.0e-3}), ("account", {"physics": 2.5e-3, "chem": 1.0e-3})):
        assert se_main(["rollup", "--month", "2026-11", "--by", by, "--format", "json", "--store", url]) == 0
        import json

        got = json.loads(capsys.readouterr().out)
        assert {r[by]: r["gpu_idle_kwh"] for r in got["rows"]} == {k: pytest.approx(v) for k, v in want.items()}
        top = got["top_gpu_idle_jobs"]
        assert [r["job_id"] for r in top] == ["2", "3", "1"]  # 2.0e-3 > 1.0e-3 > 5.0e-4 kWh
        assert top[0]["gpu_idle_kwh"] == pytest.approx(2.0e-3) and top[0]["gpu_idle_method"] == "power_integration"
    assert se_main(["rollup", "--month", "2026-11", "--by", "user", "--store", url]) == 0
    text = capsys.readouterr().out
    assert "top jobs by GPU energy while allocated but idle" in text and "0.002" in text

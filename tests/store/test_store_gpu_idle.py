"""GPU-idle figures on the store row (schema v3), and a v2 store (before the columns) surviving
the migration with its rows."""

import pytest
import sqlalchemy as sa

from jobrecord_factory import device, finished, job_record
from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.model import CarbonFacts, Method
from slurm_energy.store import open_store, schema

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


def test_v2_store_migrates_to_v3_keeping_rows(tmp_path):
    db = tmp_path / "v2.db"
    url = f"sqlite:///{db}"
    st = open_store(url)
    st.put(finished(job_record(job_id="1", devices=[device("cpu", 3600.0)])))
    st.close()
    eng = sa.create_engine(url)
    with eng.begin() as c:  # back to the v2 layout: the columns v3 added, gone
        for col in ("gpu_idle_s", "gpu_idle_kwh", "gpu_idle_method"):
            c.execute(sa.text(f"ALTER TABLE job_records DROP COLUMN {col}"))
        c.execute(sa.text("DELETE FROM schema_version WHERE version = 3"))
    eng.dispose()
    st = open_store(url)
    with st.engine.connect() as c:
        assert schema.current_version(c) == 3
        cols = {x["name"] for x in sa.inspect(c).get_columns("job_records")}
    assert {"gpu_idle_s", "gpu_idle_kwh", "gpu_idle_method"} <= cols
    [row] = st.rows(jobs=["1"])
    assert row.it_kwh == pytest.approx(0.001) and row.gpu_idle_s is None and row.gpu_idle_kwh is None  # unknown
    st.put(idle_job(job_id="2"))
    [row2] = st.rows(jobs=["2"])
    assert row2.gpu_idle_kwh == pytest.approx(5.0e-4)
    st.close()

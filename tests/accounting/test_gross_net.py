"""Location-based (gross) and net CO2e apart, as SCI (ISO/IEC 21031:2024: O = E x I, offsets shall
not lower the score) and the GHG Protocol Scope 2 (location-based beside market-based) count them:

    CO2e_location = E_facility x CI          CO2e_net = CO2e_location x alpha
"""

import json

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.model import CarbonFacts, JobRecord, Method
from slurm_energy.outputs.prometheus import entry_from_record, render
from slurm_energy.store import open_store, schema
from slurm_energy.store.db import connect
from tests.helpers.jobrecord_factory import device, job_record, run_jobenergy
from tests.helpers.store_backends import store_url  # noqa: F401  (fixture)

T = 1_796_036_400.0  # 2026-11-30T11:00:00Z, on the hour
H = 3600.0


def rec(alpha=0.5, job_id="7", start=T, cpu_j=3.6e6, **kw):
    r = job_record(job_id=job_id, devices=[device("cpu", cpu_j, method=Method.COUNTER)], start=start, end=start + H, **kw)
    return finalise_record(r, CarbonFacts(pue=1.5, ci_g_per_kwh=200.0, alpha=alpha, alpha_source="REC contract 2026"))


def test_gross_is_e_times_ci_net_times_alpha():
    r = rec(alpha=0.5)
    # IT 3.6e6 J = 1 kWh; facility 1 x 1.5 = 1.5 kWh; location-based 1.5 kWh x 200 g/kWh = 300 g = 0.3 kg
    assert r.facility_kwh == pytest.approx(1.5)
    assert r.co2e_gross_kg == pytest.approx(0.3)
    # net = 0.3 kg x alpha 0.5 = 0.15 kg
    assert r.co2e_kg == pytest.approx(0.15)
    # alpha 1: one number
    one = rec(alpha=1.0)
    assert one.co2e_gross_kg == one.co2e_kg == pytest.approx(0.3)


def test_hourly_gross_sums_each_hours_ci_without_alpha():
    # 2 h job, 1 kWh IT in each hour (0.5 h of the first two UTC hours each... the job starts on
    # the hour: hour 11 and hour 12 each get 1.8e6 J = 0.5 kWh IT), PUE 1.5 -> 0.75 kWh facility each
    r = job_record(job_id="8", devices=[device("cpu", 3.6e6, method=Method.COUNTER)], start=T, end=T + 2 * H)
    r.nodes[0].hourly_energy_j = {"2026-11-30T11:00:00Z": 1.8e6, "2026-11-30T12:00:00Z": 1.8e6}
    ci = {"2026-11-30T11:00:00Z": 100.0, "2026-11-30T12:00:00Z": 300.0}
    f = finalise_record(r, CarbonFacts(pue=1.5, ci_g_per_kwh=200.0, alpha=0.25), ci)
    # gross = 0.75 x 100 + 0.75 x 300 = 75 + 225 = 300 g = 0.3 kg; net = 0.3 x 0.25 = 0.075 kg
    assert f.carbon.hourly and f.co2e_gross_kg == pytest.approx(0.3) and f.co2e_kg == pytest.approx(0.075)


def test_record_stored_before_gross_existed_reads_it_back_as_net_over_alpha():
    r = rec(alpha=0.5)
    old = json.loads(r.model_dump_json())
    del old["co2e_gross_kg"]  # the JSON of a record stored before this field
    back = JobRecord.model_validate(old)
    assert back.co2e_gross_kg == pytest.approx(0.15 / 0.5)
    # alpha 0: the location-based figure cannot be recovered: unknown, never 0
    zero = json.loads(rec(alpha=0.0).model_dump_json())
    del zero["co2e_gross_kg"]
    assert zero["co2e_kg"] == 0.0 and JobRecord.model_validate(zero).co2e_gross_kg is None


def test_phase_shares_both_figures():
    from slurm_energy.model import WindowEnergy

    r = job_record(job_id="9", devices=[device("cpu", 3.6e6, method=Method.COUNTER)], start=T, end=T + H)
    r.nodes[0].windows = [WindowEnergy(kind="phase", name="train", start_time=T, end_time=T + 1800,
                                      energy_it_j={"cpu": 1.8e6}, it_j=1.8e6, coverage=1.0)]
    f = finalise_record(r, CarbonFacts(pue=1.5, ci_g_per_kwh=200.0, alpha=0.5))
    [w] = f.phases
    # half the IT energy: gross 0.3 / 2 = 0.15 kg, net 0.15 / 2 = 0.075 kg
    assert w.co2e_gross_kg == pytest.approx(0.15) and w.co2e_kg == pytest.approx(0.075)


def test_store_v4_to_v5_backfills_alpha_and_gross(store_url):
    st = open_store(store_url)
    st.put(rec(alpha=0.5, job_id="1"))
    st.put(rec(alpha=0.0, job_id="2"))
    st.close()
    db = connect(store_url)
    with db.transaction():  # back to the v4 layout (v6's table gone too)
        db.execute("DROP TABLE node_hours")
        for col, _ in schema.CARBON_COLUMNS:
            db.execute(f"ALTER TABLE job_records DROP COLUMN {col}")
        db.execute("DELETE FROM schema_version WHERE version >= 5")
    db.close()
    st = open_store(store_url)
    assert schema.current_version(st.db) == schema.SCHEMA_VERSION == 8
    [r1] = st.rows(jobs=["1"])
    [r2] = st.rows(jobs=["2"])
    # job 1: net 0.15 kg, alpha 0.5 (from its JSON) -> location-based 0.15 / 0.5 = 0.3 kg
    assert r1.alpha == 0.5 and r1.co2e_gross_kg == pytest.approx(0.3)
    # job 2: alpha 0: not recoverable, NULL (never 0); embodied and cost not backfilled
    assert r2.alpha == 0.0 and r2.co2e_gross_kg is None and r1.embodied_kg is None and r1.cost is None
    st.close()


def test_jobenergy_table_shows_net_only_where_alpha_is_not_1(tmp_path, site_config, monkeypatch, capsys):

    site_config.write(bare=True, cluster_name="c1")
    url = f"sqlite:///{tmp_path}/spool/jobs.db"
    st = open_store(url)
    st.put(rec(alpha=1.0, job_id="1"))
    st.close()
    rc, out, err = run_jobenergy(capsys, "--store", url, "-P", "1")
    head, row = out.strip().splitlines()
    assert rc == 0 and "Net_kgCO2e" not in head and dict(zip(head.split("|"), row.split("|")))["kgCO2e"] == "0.3"
    st = open_store(url)
    st.put(rec(alpha=0.5, job_id="2"))
    st.close()
    rc, out, err = run_jobenergy(capsys, "--store", url, "-P", "2")
    head, row = out.strip().splitlines()
    d = dict(zip(head.split("|"), row.split("|")))
    assert (d["kgCO2e"], d["Net_kgCO2e"]) == ("0.3", "0.15")  # location-based 0.3 kg; x alpha 0.5
    rc, out, err = run_jobenergy(capsys, "--store", url, "--json", "2")
    fp = json.loads(out)["jobs"][0]["footprint"]
    assert fp["operational_location_based_kg"] == pytest.approx(0.3) and fp["operational_net_kg"] == pytest.approx(0.15)
    assert fp["alpha"] == 0.5 and fp["alpha_source"] == "REC contract 2026" and "sci_ai" not in fp
    rc, out, err = run_jobenergy(capsys, "--store", url, "-l", "2")
    assert "net of offsets" in out and "x alpha 0.5 (REC contract 2026)" in out


def test_rollup_sums_gross_and_net_apart(tmp_path):
    from slurm_energy.store.rollup import month_rollup

    st = open_store(f"sqlite:///{tmp_path}/s.db")
    st.put(rec(alpha=0.5, job_id="1"))
    st.put(rec(alpha=1.0, job_id="2"))
    [row] = month_rollup(st.db, "account", T - 86400, T + 86400)
    # location-based 0.3 + 0.3 = 0.6 kg; net 0.15 + 0.3 = 0.45 kg
    assert row["co2e_gross_kg"] == pytest.approx(0.6) and row["co2e_kg"] == pytest.approx(0.45)
    st.close()


def test_prometheus_location_based_and_net_series():
    text = render([entry_from_record(rec(alpha=0.5), T + H)]).decode()
    # location-based 300 g; net 150 g (alpha 0.5)
    assert 'slurm_energy_job_co2e_grams_total{account="physics",cluster="c1"' in text
    assert [ln.split()[-1] for ln in text.splitlines() if ln.startswith("slurm_energy_job_co2e_grams_total")] == ["300.0"]
    assert [ln.split()[-1] for ln in text.splitlines() if ln.startswith("slurm_energy_job_co2e_net_grams_total")] == ["150.0"]
    one = render([entry_from_record(rec(alpha=1.0), T + H)]).decode()
    assert "slurm_energy_job_co2e_net_grams_total{" not in one  # alpha 1: one number

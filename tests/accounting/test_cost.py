"""Energy cost = sum over hours of facility kWh x that hour's price (flat or time-of-use tariff), in the
tariff's currency; per job and per account in the rollup."""

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.carbon.hourly import hour_key
from slurm_energy.carbon.prices import import_price_csv, load_price_csv
from slurm_energy.config.schema import SiteConfig, Tariff
from slurm_energy.errors import HourlyDataError
from slurm_energy.model import CarbonFacts, Method
from slurm_energy.store import open_store
from slurm_energy.store.rollup import month_rollup
from tests.helpers.jobrecord_factory import device, job_record

T = 1_796_036_400.0  # 2026-11-30T11:00:00Z
H = 3600.0


def rec(tariff, prices=None, job_id="1", account="physics", start=T):
    # 2 h, 1 kWh IT in each UTC hour; PUE 1.5 -> 1.5 kWh facility per hour, 3 kWh in all
    r = job_record(job_id=job_id, devices=[device("cpu", 7.2e6, method=Method.COUNTER)], start=start,
                   end=start + 2 * H, account=account)
    r.nodes[0].hourly_energy_j = {hour_key(start): 3.6e6, hour_key(start + H): 3.6e6}
    return finalise_record(r, CarbonFacts(pue=1.5, ci_g_per_kwh=100.0), tariff=tariff, hourly_price=prices)


def test_flat_tariff():
    r = rec(Tariff(currency="EUR", price_per_kwh=0.2, source="contract 2026"))
    # 3 kWh facility x 0.20 EUR/kWh = 0.60 EUR
    assert r.cost == pytest.approx(0.6) and r.cost_currency == "EUR" and "flat 0.2 EUR/kWh" in r.cost_source


def test_time_of_use_prices_each_hour_and_flat_for_the_rest():
    t = Tariff(currency="EUR", price_per_kwh=0.2, zone="FR")
    both = rec(t, {hour_key(T): 0.10, hour_key(T + H): 0.30})
    # 1.5 kWh x 0.10 + 1.5 kWh x 0.30 = 0.15 + 0.45 = 0.60 EUR
    assert both.cost == pytest.approx(0.6) and "2 hourly" in both.cost_source
    one = rec(t, {hour_key(T): 0.10})
    # 1.5 x 0.10 + 1.5 x 0.20 (flat) = 0.45 EUR
    assert one.cost == pytest.approx(0.45) and "1 at the flat 0.2 EUR/kWh" in one.cost_source
    none = rec(Tariff(currency="EUR", zone="FR"), {hour_key(T): 0.10})
    assert none.cost is None and "no price for 1 hour" in none.cost_source  # never a made-up 0
    assert rec(None).cost is None and rec(None).cost_currency == ""  # no tariff: no cost


def test_rollup_cost_per_account_in_one_currency_only(tmp_path):
    st = open_store(f"sqlite:///{tmp_path}/s.db")
    eur = Tariff(currency="EUR", price_per_kwh=0.2)
    st.put(rec(eur, job_id="1"))
    st.put(rec(eur, job_id="2"))
    st.put(rec(eur, job_id="3", account="chem"))
    st.put(rec(Tariff(currency="USD", price_per_kwh=0.1), job_id="4", account="chem"))
    rows = {r["account"]: r for r in month_rollup(st.db, "account", T - 86400, T + 86400)}
    # physics: 0.6 + 0.6 = 1.2 EUR; chem mixes EUR and USD: no sum (NULL), currency "mixed"
    assert rows["physics"]["cost"] == pytest.approx(1.2) and rows["physics"]["cost_currency"] == "EUR"
    assert rows["chem"]["cost"] is None and rows["chem"]["cost_currency"] == "mixed"
    st.close()


def test_price_csv_import_and_errors(tmp_path):
    src = tmp_path / "p.csv"
    src.write_text("timestamp,price_per_kwh\n2026-11-30T11:00:00Z,0.1\n2026-11-30T12:00:00+00:00,0.3\n")
    n, total, path = import_price_csv(src, "FR", str(tmp_path / "prices"))
    assert (n, total) == (2, 2) and load_price_csv(path) == {"2026-11-30T11:00:00Z": 0.1, "2026-11-30T12:00:00Z": 0.3}
    bad = tmp_path / "mwh.csv"
    bad.write_text("timestamp,price\n2026-11-30T11:00:00Z,182\n")
    with pytest.raises(HourlyDataError, match="line 2.*per MWh.*0.182"):
        load_price_csv(bad)


def test_site_tariff_config_and_pipeline_cost(tmp_path):
    from slurm_energy.pipeline import finalise_job

    site = SiteConfig(tariff={"currency": "EUR", "price_per_kwh": 0.2, "zone": "FR"},
                      paths={"spool_dir": str(tmp_path), "hourly_price_dir": str(tmp_path / "prices")})
    src = tmp_path / "p.csv"
    src.write_text("timestamp,price_per_kwh\n2026-11-30T11:00:00Z,0.1\n")
    import_price_csv(src, "FR", site.paths.hourly_price_dir)
    r = job_record(job_id="5", devices=[device("cpu", 3.6e6, method=Method.COUNTER)], start=T, end=T + H)
    r.nodes[0].hourly_energy_j = {hour_key(T): 3.6e6}
    f = finalise_job([r], site)
    # 1 kWh IT x PUE (default 1.58) = 1.58 kWh x 0.10 EUR = 0.158 EUR
    assert f.cost == pytest.approx(0.158) and f.cost_currency == "EUR"
    with pytest.raises(ValueError, match="currency"):
        SiteConfig(tariff={"price_per_kwh": 0.2})

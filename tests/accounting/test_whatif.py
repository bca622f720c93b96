"""Carbon-aware what-if: the job's own profile shifted by whole hours across an hourly CI series with a
known minimum. CO2e(s) = sum_h E_facility,h x CI_h (SCI's O = E x I, location-based)."""

import os

import pytest

from slurm_energy.accounting.formulas import finalise_record
from slurm_energy.accounting.whatif import best_windows, flat_profile, profile, what_if
from slurm_energy.carbon.hourly import hour_key, write_zone
from slurm_energy.model import CarbonFacts, Method
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import device, job_record, run_jobenergy

D0 = 1_796_083_200.0  # 2026-12-01T00:00:00Z
H = 3600.0


def series(days=3, base=300.0, low=None):
    """{hour: gCO2e/kWh} over ``days`` from D0: ``base`` everywhere, ``low`` {hour index: value}."""
    ci = {hour_key(D0 + i * H): base for i in range(days * 24)}
    for i, v in (low or {}).items():
        ci[hour_key(D0 + i * H)] = v
    return ci


def job(start, hours=2, trace=None, alpha=1.0):
    # 2 h at 1000 W IT on one device: 2 kWh IT, PUE 1.0 -> 2 kWh facility
    nf = {"power_trace": trace} if trace else {}
    r = job_record(job_id="9", devices=[device("gpu", hours * 3.6e6, method=Method.COUNTER)], start=start,
                   end=start + hours * H, node_fields=nf)
    return finalise_record(r, CarbonFacts(pue=1.0, ci_g_per_kwh=300.0, alpha=alpha))


def test_best_start_is_the_known_minimum():
    # the job ran on day 2 at 12:00 (CI 300 g/kWh); day 1 10:00-12:00 has 50 g/kWh
    r = job(D0 + 36 * H)
    w = what_if(r, series(low={10: 50.0, 11: 50.0}))
    # actual: 2 kWh x 300 g = 600 g = 0.6 kg; best at day 1 10:00: 2 kWh x 50 g = 0.1 kg; saving 0.5 kg
    assert w.best_start == D0 + 10 * H and w.best_kg == pytest.approx(0.1)
    assert w.actual_kg == pytest.approx(0.6) and w.saving_kg == pytest.approx(0.5)
    # window: the data's 72 hours, the last start 70:00 (a 2 h job must end inside them): 71 starts
    assert w.candidates == 71 and w.window == (D0, D0 + 70 * H)


def test_profile_shape_from_the_trace_decides_the_best_hour():
    # 2 h: 3000 W in the first hour, 1000 W in the second (the record's 2 kWh split 3:1 -> 1.5 / 0.5 kWh)
    t0 = D0 + 36 * H
    trace = [[t0, 3000.0, None, None], [t0 + H, 3000.0, None, None], [t0 + 2 * H, 1000.0, None, None]]
    r = job(t0, trace=trace)
    pieces, src = profile(r)
    assert src == "power trace" and [p.kwh for p in pieces] == pytest.approx([1.5, 0.5])
    # one low hour (index 20, 50 g/kWh): best to spend the 1.5 kWh hour there (start 20:00):
    # 1.5 x 50 + 0.5 x 300 = 75 + 150 = 225 g; starting 19:00 gives 1.5 x 300 + 0.5 x 50 = 475 g
    w = what_if(r, series(low={20: 50.0}))
    assert w.best_start == D0 + 20 * H and w.best_kg == pytest.approx(0.225)


def test_window_days_clip_and_no_data():
    r = job(D0 + 36 * H)
    w = what_if(r, series(low={10: 50.0, 11: 50.0}), window_days=0.5)  # starts 24:00 .. 48:00 only
    assert w.window == (D0 + 24 * H, D0 + 48 * H) and w.best_kg == pytest.approx(0.6) and w.saving_kg == 0
    assert what_if(r, {}) is None


def test_alpha_does_not_enter_the_what_if():
    w = what_if(job(D0 + 36 * H, alpha=0.5), series(low={10: 50.0, 11: 50.0}))
    assert w.actual_kg == pytest.approx(0.6)  # location-based


def test_predict_windows_for_a_job_not_yet_run():
    # 2 h at 1 kW facility from now (day 1 00:00): the low hours 10-11 first, then ties broken by time
    top = best_windows(flat_profile(2.0, 1.0), series(low={10: 50.0, 11: 50.0}), D0, top=2)
    assert top[0] == (D0 + 10 * H, pytest.approx(0.1))
    # next best: 9:00 or 11:00 (half in a low hour: 300 + 50 = 350 g); the earlier wins
    assert top[1] == (D0 + 9 * H, pytest.approx(0.35))


def test_jobenergy_what_if(tmp_path, site_config, monkeypatch, capsys):
    site_config.write(location={"country": "FR"},
                      paths={"store_url": f"sqlite:///{tmp_path}/jobs.db", "hourly_ci_dir": f"{tmp_path}/ci"})
    write_zone(str(tmp_path / "ci"), "FR", series(low={10: 50.0, 11: 50.0}))
    st = open_store(f"sqlite:///{tmp_path}/jobs.db")
    st.put(job(D0 + 36 * H))
    st.close()
    rc, out, err = run_jobenergy(capsys, "--what-if", "9")
    assert rc == 0, err
    assert "ran at 2026-12-02T12:00:00 UTC: 0.6 kgCO2e" in out
    assert "best start 2026-12-01T10:00:00 UTC: 0.1 kgCO2e" in out and "saving: 0.5 kgCO2e, 83 %" in out


def test_jobenergy_what_if_without_data_names_the_zone_to_import(tmp_path, site_config, monkeypatch, capsys):
    """A fresh tester could not tell which Z to import: the error names the job's zone(s)."""
    site_config.write(location={"country": "FR"},
                      paths={"store_url": f"sqlite:///{tmp_path}/jobs.db", "hourly_ci_dir": f"{tmp_path}/ci"})
    st = open_store(f"sqlite:///{tmp_path}/jobs.db")
    st.put(job(D0 + 36 * H))
    st.close()
    rc, out, err = run_jobenergy(capsys, "--what-if", "9")
    assert rc == 1 and out == ""
    assert "no hourly intensity imported for its zone (FR): run slurm-energy ci-import FILE --zone ZONE" in err


def test_predict_suggests_start_windows_over_the_imported_forecast(tmp_path, site_config, monkeypatch, capsys):
    import json

    from slurm_energy.cli.main import main

    site_config.write(location={"country": "FR"}, paths={"hourly_ci_dir": f"{tmp_path}/ci"})
    write_zone(str(tmp_path / "ci"), "FR", series(low={10: 50.0, 11: 50.0}))
    # 1 GPU at 1000 W x power fraction 1 for 1e15 FLOP/s x 0.5: 7.2e18 FLOP -> 14400 s = 4 h, 4 kWh IT, PUE 1
    rc = main(["predict", "--flops", "7.2e18", "--gpu-flops", "1e15", "--gpu-watts", "1000", "--n-gpus", "1",
               "--util", "0.5", "--power-frac", "1", "--pue", "1", "--ci", "300", "--no-calibration",
               "--no-node-overhead", "--after", "2026-12-01T00:00Z", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["facility_kwh"] == pytest.approx(4.0)
    # 4 h at 1 kW: best starts cover both low hours (10, 11): 8:00, 9:00, 10:00 give 2 x 50 + 2 x 300 = 700 g;
    # ties by time: 08:00 first
    assert [w["start"] for w in d["start_windows"]] == ["2026-12-01T08:00Z", "2026-12-01T09:00Z", "2026-12-01T10:00Z"]
    assert d["start_windows"][0]["kgco2e"] == pytest.approx(0.7)


def test_report_shows_the_what_if(home):
    """Written as an ordinary user into their directory (as root, a record of uid 0 gets no report)."""
    from slurm_energy.outputs.report import ReportSink
    from tests.helpers import ordinary_user as ou

    r = job(D0 + 36 * H)
    u = ou.ordinary_user() or ("me", os.getuid(), os.getgid())  # None: the suite runs as that user
    r.work_dir, r.uid, r.gid = str(home), u[1], u[2]
    sink = ReportSink(hourly_ci=lambda rec: series(low={10: 50.0, 11: 50.0}))
    assert sink.publish(r) == []
    html = (home / "energy-9.html").read_text()
    assert "When would it have emitted least?" in html and "saving: 0.5 kgCO2e, 83 %" in html

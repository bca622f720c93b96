"""Prediction calibrated on the site's own measured jobs (issue 13 item 5, issue 17): values by hand.

Jobs on NVIDIA A100-SXM4-80GB (bundled table: 400 W, dense BF16 312 TFLOP/s = 3.12e14 FLOP/s):

  job  GPUs  elapsed s  FLOP/s frac f  power frac p  GPU J                        CPU+RAM J   node W/GPU
  A    4     10_000     0.4            0.8           4 x 400 x 0.8 x 10_000 = 12.8e6   2.4e6   2.4e6 / (4 x 10_000) = 60
  B    8      5_000     0.3            0.7           8 x 400 x 0.7 x 5_000 = 11.2e6   3.2e6   3.2e6 / (8 x 5_000) = 80
  C    8      2_000     0.5            0.9           8 x 400 x 0.9 x 2_000 = 5.76e6   none    (not measured)

FLOPs tags: A 4 x 3.12e14 x 10_000 x 0.4 = 4.992e18; B 8 x 3.12e14 x 5_000 x 0.3 = 3.744e18;
C declares model_params 1e9 and tokens 4.16e8: 6 x 1e9 x 4.16e8 = 2.496e18 = 8 x 3.12e14 x 2_000 x 0.5.
"""

from __future__ import annotations

import json

import pytest

from slurm_energy.accounting.calibration import Spread, check_job, fit, for_gpu, job_fit, predict_range
from slurm_energy.cli.main import main
from slurm_energy.model import JobRecord, Method
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import device, job_record, store_with

A100 = "NVIDIA A100-SXM4-80GB"


@pytest.fixture(autouse=True)
def _own_site_config(site_config):
    """Never read this machine's /etc/slurm-energy/site.yaml: a minimal one of our own."""
    site_config.write(bare=True, cluster_name="c1")


def rec(job_id, n_gpus, elapsed, gpu_j, cpu_j=None, ram_j=None, tags=None, model=A100, method=Method.COUNTER):
    devs = [device("gpu", gpu_j, method=method, device_id="gpu-all", model=model, count=n_gpus, rated_power_w=400.0,
                   duration_s=elapsed)]
    if cpu_j is not None:
        devs.append(device("cpu", cpu_j, method=Method.COUNTER, device_id="rapl", duration_s=elapsed))
    if ram_j is not None:
        devs.append(device("ram", ram_j, device_id="ram", duration_s=elapsed))
    return job_record(job_id, devs, end=1000.0 + elapsed, user="", uid=None, account="", partition="", tags=tags or {})


JOBS = [
    rec("A", 4, 10_000, 12.8e6, cpu_j=2.0e6, ram_j=0.4e6, tags={"flops": 4.992e18}),
    rec("B", 8, 5_000, 11.2e6, cpu_j=3.0e6, ram_j=0.2e6, tags={"flops": 3.744e18}),
    rec("C", 8, 2_000, 5.76e6, tags={"model_params": 1e9, "tokens": 4.16e8}),
    rec("untagged", 8, 2_000, 5.76e6),
    rec("estimated", 8, 2_000, 5.76e6, tags={"flops": 1e18}, method=Method.TDP_ESTIMATE),
]


def test_tags_field_default_and_old_records():
    old = json.loads(JOBS[0].model_dump_json())
    del old["tags"]  # a record stored before the field existed
    assert JobRecord.model_validate(old).tags == {}
    r = JobRecord.model_validate_json(JOBS[0].model_dump_json())
    assert r.tags == {"flops": 4.992e18}


def test_job_fit_by_hand():
    jf, why = job_fit(JOBS[0])
    assert why == ""
    assert jf.flops_frac == pytest.approx(0.4)  # 4.992e18 / (10_000 s x 4 x 3.12e14)
    assert jf.power_frac == pytest.approx(0.8)  # 12.8e6 J / (4 x 400 W x 10_000 s)
    assert jf.node_w_per_gpu == pytest.approx(60.0)  # 2.4e6 J / (4 x 10_000 s)
    assert job_fit(JOBS[2])[0].flops_frac == pytest.approx(0.5)
    assert job_fit(JOBS[2])[0].node_w_per_gpu is None
    assert job_fit(JOBS[3]) == (None, "no flops tag (or model_params and tokens)")
    assert job_fit(JOBS[4])[1] == "no measured GPU energy (counter or power_integration)"


def test_implausible_tag_is_refused():
    # 4.992e19 FLOPs in 10_000 s on 4 GPUs is 4.0 x rated FLOP/s
    jf, why = job_fit(rec("X", 4, 10_000, 12.8e6, tags={"flops": 4.992e19}))
    assert jf is None and "4.00 of rated FLOP/s (> 1)" in why


def test_percentile_linear():
    # [0.3, 0.4, 0.5]: p10 at position 0.2 -> 0.3 + 0.2 x 0.1 = 0.32; p90 at 1.8 -> 0.48
    s = Spread.of([0.5, 0.3, 0.4])
    assert (s.median, s.p10, s.p90, s.n) == (pytest.approx(0.4), pytest.approx(0.32), pytest.approx(0.48), 3)
    assert Spread.of([7.0]).p90 == 7.0


def test_fit_spread_by_hand():
    cal = for_gpu(fit(JOBS), "A100 SXM4 80GB")
    assert cal.n_jobs == 3
    assert (cal.flops_frac.median, cal.flops_frac.p10, cal.flops_frac.p90) == pytest.approx((0.4, 0.32, 0.48))
    assert (cal.power_frac.median, cal.power_frac.p10, cal.power_frac.p90) == pytest.approx((0.8, 0.72, 0.88))
    # node W/GPU [60, 80]: median 70, p10 60 + 0.1 x 20 = 62, p90 78; only 2 jobs measured it
    assert (cal.node_w_per_gpu.median, cal.node_w_per_gpu.p10, cal.node_w_per_gpu.p90) == pytest.approx((70, 62, 78))
    assert cal.node_w_per_gpu.n == 2
    assert for_gpu(fit(JOBS), "NVIDIA H100 80GB HBM3") is None


def test_predict_range_by_hand():
    cal = for_gpu(fit(JOBS), A100)
    rng = predict_range(cal, 1.248e18, 4, 3.12e14, 400.0, pue=1.0, ci_g_per_kwh=100.0)
    # t_j = 1.248e18 / (4 x 3.12e14 x f_j): A 2500 s, B 3333.3 s, C 2000 s
    # E_j = 4 t_j (400 p_j + o_j): A 4 x 2500 x 380 = 3.8e6 J; B 4 x 3333.3 x 360 = 4.8e6 J;
    #       C (no node measurement: median 70 W) 4 x 2000 x 430 = 3.44e6 J
    kwh = sorted([3.8e6 / 3.6e6, 4.8e6 / 3.6e6, 3.44e6 / 3.6e6])
    assert rng["facility_kwh"].median == pytest.approx(kwh[1])
    assert rng["facility_kwh"].p10 == pytest.approx(kwh[0] + 0.2 * (kwh[1] - kwh[0]))
    assert rng["facility_kwh"].p90 == pytest.approx(kwh[1] + 0.8 * (kwh[2] - kwh[1]))
    assert rng["time_s"].p10 == pytest.approx(2100.0) and rng["time_s"].p90 == pytest.approx(2500 + 0.8 * 833.333, rel=1e-5)
    assert rng["co2e_kg"].median == pytest.approx(kwh[1] * 0.1)


def test_check_job_predicted_vs_measured():
    c = check_job(JOBS[1])
    # measured GPU 11.2e6 J = 3.111 kWh; predicted at the default 0.76: 8 x 400 x 0.76 x 5_000 = 12.16e6 J = 3.378 kWh
    assert c["gpu_kwh_measured"] == pytest.approx(11.2e6 / 3.6e6)
    assert c["gpu_kwh_predicted"] == pytest.approx(12.16e6 / 3.6e6)
    assert c["gpu_kwh_error_pct"] == pytest.approx((12.16 - 11.2) / 11.2 * 100)  # +8.57 %
    assert c["flops_frac_measured"] == pytest.approx(0.3) and c["power_frac_measured"] == pytest.approx(0.7)
    assert check_job(JOBS[3]) is None
    assert check_job(JOBS[4])["note"].startswith("no measured GPU energy")


@pytest.fixture
def store_url(tmp_path):
    return store_with(tmp_path, *JOBS)


def test_cli_predict_uses_site_calibration(store_url, capsys):
    rc = main(["predict", "--flops", "1.248e18", "--gpu", A100, "--n-gpus", "4", "--pue", "1.0", "--ci", "100",
               "--store", store_url, "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0
    # medians f 0.4, p 0.8, node 70 W/GPU: t = 1.248e18 / (4 x 3.12e14 x 0.4) = 2500 s
    assert d["time_s"] == pytest.approx(2500.0)
    # GPU 4 x 400 x 0.8 x 2500 = 3.2e6 J; node 4 x 70 x 2500 = 0.7e6 J; IT 3.9e6 J = 1.0833 kWh; x 0.1 kg/kWh
    assert d["energy_kwh"]["gpu"] == pytest.approx(3.2e6 / 3.6e6)
    assert d["energy_kwh"]["node"] == pytest.approx(0.7e6 / 3.6e6)
    assert d["co2e_kg"] == pytest.approx(3.9e6 / 3.6e6 * 0.1)
    assert d["calibration"] == f"site calibration: 3 jobs on {A100}"
    assert d["site_range"]["facility_kwh"]["n"] == 3


def test_cli_predict_text_says_range_and_jobs(store_url, capsys):
    rc = main(["predict", "--flops", "1.248e18", "--gpu", A100, "--n-gpus", "4", "--pue", "1.0", "--ci", "100",
               "--store", store_url])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"FLOP/s fraction:  0.4 (achieved / rated FLOP/s, sets the time: site calibration: 3 jobs on {A100}: " \
           "0.4 (p10-p90 0.32-0.48 over 3 jobs))" in out
    assert "power fraction:   0.8 (" in out and "0.8 (p10-p90 0.72-0.88 over 3 jobs)" in out
    # time p10-p90 2100-3166.7 s = 0.5833-0.8796 h, as sacct prints Elapsed: 35:00 and 52 min 46.7 s,
    # the fraction dropped
    assert "site range:       p10-p90 over the 3 measured jobs: time 00:35:00-00:52:46" in out


def test_cli_predict_other_gpu_falls_back_labelled(store_url, capsys):
    rc = main(["predict", "--flops", "1e18", "--gpu", "NVIDIA H100 80GB HBM3", "--util", "0.4", "--store", store_url])
    out = capsys.readouterr().out
    assert rc == 0
    assert "power fraction:   0.76 (drawn / rated GPU power, sets the energy: default:" in out
    assert "site calibration: no measured job on NVIDIA H100 80GB HBM3 declared its FLOPs" in out


# ------------------------------------------------ predicted vs measured in the report and jobenergy


def _job_b_mine():
    import getpass
    import os

    return JOBS[1].model_copy(update={"job_id": "102", "user": getpass.getuser(), "uid": os.getuid()})


def test_report_prediction_csv_is_its_own_table():
    import io

    import pandas as pd

    from slurm_energy.reporting.report import render_csv, render_prediction_csv

    main_table = render_csv(JOBS[1])
    assert "\n\n" not in main_table and "declared work" not in main_table  # one CSV = one table
    df = pd.read_csv(io.StringIO(main_table))
    assert sorted(df["device_class"]) == ["cpu", "gpu", "ram", "total"] and df.columns[0] == "job_id"
    text = render_prediction_csv(JOBS[1])
    assert list(pd.read_csv(io.StringIO(text)).columns) == ["jobid", "quantity", "predicted", "measured", "unit", "basis"]
    lines = text.strip().splitlines()
    assert lines[0] == "jobid,quantity,predicted,measured,unit,basis"
    rows = {ln.split(",")[1]: ln.split(",") for ln in lines[1:]}
    assert rows["declared work"][2] == "3.744e+18"
    assert rows["FLOP/s fraction"][3] == "0.3"
    assert rows["power fraction"][2:4] == ["0.76", "0.7"]
    # predicted 8 x 400 W x 0.76 x 5000 s = 12.16e6 J = 3.378 kWh; measured 11.2e6 J = 3.111 kWh; +8.6 %
    assert rows["GPU energy"][2:5] == ["3.378", "3.111", "kWh"] and "error +8.6 %" in rows["GPU energy"][5]
    # (3.0e6 + 0.2e6) J / (8 GPUs x 5000 s) = 80 W per GPU
    assert rows["node overhead"][3] == "80"


def test_report_csv_untagged_job_unchanged(tmp_path):
    import os

    from slurm_energy.reporting.report import render_csv, render_prediction_csv, write_reports

    assert "\n\n" not in render_csv(JOBS[3]) and render_prediction_csv(JOBS[3]) == ""
    (tmp_path / "untagged").mkdir()
    (tmp_path / "tagged").mkdir()
    write_reports(JOBS[3], str(tmp_path / "untagged"), os.getuid(), os.getgid())
    write_reports(JOBS[1], str(tmp_path / "tagged"), os.getuid(), os.getgid())
    assert sorted(p.name for p in (tmp_path / "untagged").iterdir()) == ["energy-untagged.csv", "energy-untagged.html"]
    assert sorted(p.name for p in (tmp_path / "tagged").iterdir()) == ["energy-B.csv", "energy-B.html",
                                                                       "energy-B.prediction.csv"]


def test_report_html_section():
    from slurm_energy.reporting.report import render_html

    html = render_html(JOBS[1])
    assert "<h2>Predicted vs measured</h2>" in html and "3.378" in html and "3.111" in html
    assert "Predicted vs measured" not in render_html(JOBS[3])


def test_jobenergy_long_and_json(tmp_path, monkeypatch, capsys):
    from slurm_energy.cli.jobenergy import main as jobenergy

    url = store_with(tmp_path, _job_b_mine())
    assert jobenergy(["--store", url, "-j", "102", "-l", "-p"]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    head = lines[0].split("|")
    rows = {r["DeviceID"]: r for r in (dict(zip(head, ln.split("|"))) for ln in lines[1:]) if r["Class"] == "prediction"}
    assert rows["GPU energy predicted"]["Energy_kWh"] == "3.378" and rows["GPU energy measured"]["Energy_kWh"] == "3.111"
    assert rows["power fraction"]["Covers"].startswith("predicted 0.76, measured 0.7 drawn / rated; predicted: default:")
    assert rows["node overhead"]["Covers"].startswith("measured 80 W per GPU;")
    assert jobenergy(["--store", url, "-j", "102", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["jobs"][0]
    assert d["record"]["tags"] == {"flops": 3.744e18}
    assert d["prediction_check"]["gpu_kwh_predicted"] == pytest.approx(12.16e6 / 3.6e6)
    assert d["prediction_check"]["power_frac_measured"] == pytest.approx(0.7)


def test_running_record_is_not_learned_from():
    from slurm_energy.model import Status

    jf, why = job_fit(JOBS[0].model_copy(update={"status": Status.RUNNING}))
    assert jf is None and why == "job still running (interim record)"


def test_merge_keeps_tags():
    from slurm_energy.accounting.merge import merge_records

    a = rec("7", 4, 100, 1e5, tags={"flops": 1e15, "tokens": 1e6})
    b = rec("7", 4, 100, 1e5, tags={"flops": 2e15, "model_params": 1e8})
    b.nodes[0].node = "n2"
    # node order n1, n2: n1's flops wins, keys from both kept
    assert merge_records([b, a]).tags == {"flops": 1e15, "tokens": 1e6, "model_params": 1e8}


def test_store_tagged_reads_only_tagged_finished_records(store_url):
    from slurm_energy.model import Status

    s = open_store(store_url)
    s.put(rec("106", 4, 100, 1e5, tags={"flops": 1e15}).model_copy(update={"status": Status.RUNNING,
                                                                          "start_time": 999.0}))
    got = s.tagged()
    # A, B, C and "estimated" are tagged and complete; "untagged" and the running 106 are not read
    assert sorted(r.job_id for r in got) == ["A", "B", "C", "estimated"]
    assert [r.job_id for r in s.tagged(limit=1)] in (["A"], ["B"], ["C"], ["estimated"])
    s.close()


def test_for_gpu_short_name_and_ambiguity():
    cals = fit(JOBS)
    assert for_gpu(cals, "A100").n_jobs == 3  # the only A100 variant with jobs
    two = fit(JOBS + [rec("9", 4, 10_000, 12.8e6, tags={"flops": 4.992e18}, model="NVIDIA A100-SXM4-40GB")])
    assert for_gpu(two, "A100") is None  # 40GB and 80GB both have jobs: ambiguous
    assert for_gpu(two, "NVIDIA A100-SXM4-40GB").n_jobs == 1


def test_power_above_rated_is_refused():
    # 4 x 400 W x 10_000 s = 16e6 J rated; 17.6e6 J measured is 1.10 x rated
    jf, why = job_fit(rec("8", 4, 10_000, 17.6e6, tags={"flops": 4.992e18}))
    assert jf is None and why.startswith("measured GPU power is 1.10 x rated (> 1)")


def test_cli_calibration_lists_fit_and_reasons(store_url, capsys):
    assert main(["calibration", "--store", store_url, "-v"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 tagged jobs; 3 used.")
    # medians (p10-p90) by hand above: f 0.4 (0.32-0.48), p 0.8 (0.72-0.88), node 70 (62-78) W/GPU
    assert f"{A100:<32}    3  0.4 (0.32-0.48)" in out and "0.8 (0.72-0.88)" in out and "70 (62-78)" in out
    assert "job estimated: not used: no measured GPU energy (counter or power_integration)" in out
    assert main(["calibration", "--store", store_url, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["gpus"][A100]["jobs"] == 3 and d["gpus"][A100]["power_frac"]["median"] == pytest.approx(0.8)


def test_cli_calibration_unreadable_store(tmp_path, capsys):
    assert main(["calibration", "--store", f"sqlite:///{tmp_path}/none.db"]) == 1
    assert "store not readable" in capsys.readouterr().err


def test_predict_range_user_fractions_replace_the_jobs():
    cal = for_gpu(fit(JOBS), A100)
    # --util 0.5 fixes f for every job: t = 1.248e18 / (4 x 3.12e14 x 0.5) = 2000 s for all three
    rng = predict_range(cal, 1.248e18, 4, 3.12e14, 400.0, pue=1.0, ci_g_per_kwh=0.0, flops_frac=0.5)
    assert (rng["time_s"].p10, rng["time_s"].p90) == pytest.approx((2000.0, 2000.0))
    # energy still spreads with each job's p and o: A 4 x 2000 x (320 + 60), B (280 + 80), C (360 + 70) J
    kwh = sorted(4 * 2000 * w / 3.6e6 for w in (380, 360, 430))
    assert rng["facility_kwh"].median == pytest.approx(kwh[1])
    # all three fixed: no spread left
    rng = predict_range(cal, 1.248e18, 4, 3.12e14, 400.0, pue=1.0, ci_g_per_kwh=0.0, flops_frac=0.5,
                        power_frac=0.5, node_w_per_gpu=0.0)
    assert rng["facility_kwh"].p10 == pytest.approx(rng["facility_kwh"].p90) == pytest.approx(4 * 2000 * 200 / 3.6e6)

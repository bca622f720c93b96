"""Prediction mode: FLOPs -> time -> kWh -> kgCO2e, values computed by hand."""

from __future__ import annotations

import pytest

from slurm_energy.accounting.prediction import (
    DeviceSpec,
    PredictionError,
    inference_flops,
    predict,
    predict_energy_kwh,
    predict_time_s,
    training_flops,
)
from tests.helpers.jobrecord_factory import own_site_config

GPU = DeviceSpec("gpu", count=8, rated_power_w=700.0, power_frac=0.5, flops_per_s=1e15, flops_frac=0.5)
CPU = DeviceSpec("cpu", count=32, rated_power_w=10.0, power_frac=0.5)
RAM = DeviceSpec("ram", count=100, rated_power_w=0.3725, power_frac=1.0)


@pytest.fixture(autouse=True)
def _own_site_config(tmp_path, monkeypatch):
    """Never read this machine's /etc/slurm-energy/site.yaml: a minimal one of our own."""
    own_site_config(tmp_path, monkeypatch)


def test_training_flops_kaplan():
    # 6 x 7e9 params x 1e9 tokens = 4.2e19 FLOPs
    assert training_flops(7e9, 1e9) == pytest.approx(4.2e19)


def test_inference_flops():
    # 2 x 7e9 x 1e9 = 1.4e19 FLOPs
    assert inference_flops(7e9, 1e9) == pytest.approx(1.4e19)


def test_time_from_flops_and_rated_throughput():
    # rate = 8 GPUs x 1e15 FLOP/s x 0.5 = 4e15 FLOP/s; t = 4.2e19 / 4e15 = 10_500 s
    assert predict_time_s(4.2e19, [GPU, CPU, RAM]) == pytest.approx(10_500.0)


def test_energy_per_class():
    e = predict_energy_kwh([GPU, CPU, RAM], 10_500.0)
    # GPU: 8 x 700 W x 0.5 x 10_500 s = 29_400_000 J = 8.16667 kWh
    assert e["gpu"] == pytest.approx(29_400_000 / 3.6e6)
    # CPU: 32 cores x 10 W x 0.5 x 10_500 s = 1_680_000 J = 0.466667 kWh
    assert e["cpu"] == pytest.approx(1_680_000 / 3.6e6)
    # RAM: 100 GB x 0.3725 W/GB x 1.0 x 10_500 s = 391_125 J = 0.108646 kWh
    assert e["ram"] == pytest.approx(391_125 / 3.6e6)


def test_full_prediction():
    p = predict(training_flops(7e9, 1e9), [GPU, CPU, RAM], pue=1.5, ci_g_per_kwh=200.0, alpha=1.0)
    assert p.time_s == pytest.approx(10_500.0)
    # IT = 29_400_000 + 1_680_000 + 391_125 = 31_471_125 J = 8.741979 kWh
    assert p.it_kwh == pytest.approx(31_471_125 / 3.6e6)
    # facility = 8.741979 kWh x 1.5 = 13.112969 kWh
    assert p.facility_kwh == pytest.approx(31_471_125 / 3.6e6 * 1.5)
    # CO2e = 13.112969 kWh x 200 g/kWh x 1.0 = 2622.59 g = 2.62259 kg
    assert p.co2e_kg == pytest.approx(31_471_125 / 3.6e6 * 1.5 * 200 / 1000)
    assert "not a measurement" in p.method


def test_alpha_scales_carbon_only():
    a = predict(4.2e19, [GPU], pue=1.2, ci_g_per_kwh=100.0, alpha=1.0)
    b = predict(4.2e19, [GPU], pue=1.2, ci_g_per_kwh=100.0, alpha=0.25)
    # GPU only: 8.16667 kWh x 1.2 = 9.8 kWh; x 100 g/kWh = 980 g = 0.98 kg; alpha 0.25 -> 0.245 kg
    assert a.facility_kwh == pytest.approx(9.8) and b.facility_kwh == pytest.approx(9.8)
    assert a.co2e_kg == pytest.approx(0.98) and b.co2e_kg == pytest.approx(0.245)


def test_mixed_compute_devices_add_throughput():
    gpus = DeviceSpec("gpu", count=2, rated_power_w=400.0, power_frac=1.0, flops_per_s=3e14, flops_frac=1.0)
    cpus = DeviceSpec("cpu", count=64, rated_power_w=5.0, power_frac=1.0, flops_per_s=5e10, flops_frac=1.0)
    # rate = 2 x 3e14 + 64 x 5e10 = 6e14 + 3.2e12 = 6.032e14 FLOP/s; t = 6.032e18 / 6.032e14 = 10_000 s
    assert predict_time_s(6.032e18, [gpus, cpus]) == pytest.approx(10_000.0)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(flops_frac=1.5), r"gpu\.flops_frac=1\.5 is above 1"),
        (dict(flops_frac=0), r"gpu\.flops_frac=0 must be a finite number > 0"),
        (dict(power_frac=1.2), r"gpu\.power_frac=1\.2 is above 1.*--power-frac"),
        (dict(count=-1), r"gpu\.count=-1"),
        (dict(rated_power_w=float("nan")), r"gpu\.rated_power_w=nan"),
        (dict(flops_per_s=0.0), r"gpu\.flops_per_s=0\.0"),
    ],
)
def test_bad_device_fields_named(kwargs, match):
    base = dict(device_class="gpu", count=8, rated_power_w=700.0, power_frac=0.5, flops_per_s=1e15, flops_frac=0.5)
    base.update(kwargs)
    with pytest.raises(PredictionError, match=match):
        predict(1e18, [DeviceSpec(**base)], pue=1.5, ci_g_per_kwh=200.0)


def test_no_compute_device_is_a_clear_error():
    with pytest.raises(PredictionError, match="no device has a rated FLOP/s"):
        predict_time_s(1e18, [CPU, RAM])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(pue=0.9), r"pue=0\.9 is below 1"),
        (dict(ci_g_per_kwh=-5), r"ci_g_per_kwh=-5"),
        (dict(alpha="x"), r"alpha='x'"),
    ],
)
def test_bad_site_facts_named(kwargs, match):
    args = dict(pue=1.5, ci_g_per_kwh=200.0, alpha=1.0)
    args.update(kwargs)
    with pytest.raises(PredictionError, match=match):
        predict(1e18, [GPU], **args)


def test_bad_params_named():
    with pytest.raises(PredictionError, match=r"params=0 "):
        training_flops(0, 1e9)
    with pytest.raises(PredictionError, match=r"tokens='many'"):
        training_flops(7e9, "many")


# ------------------------------------------------------------------------ slurm-energy predict

import json  # noqa: E402

from slurm_energy.cli.main import main  # noqa: E402


def _run(capsys, *argv):
    if "--store" not in argv:  # never read whatever store this machine has
        argv = (*argv, "--no-calibration")
    if "--node-watts" not in argv and "--default-node" not in argv:  # these hand values are GPU-only
        argv = (*argv, "--no-node-overhead")
    argv = tuple(a for a in argv if a != "--default-node")
    rc = main(["predict", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_explicit_gpu_values(capsys):
    rc, out, _ = _run(capsys, "--params", "7e9", "--tokens", "1e9", "--gpu-flops", "1e15", "--gpu-watts", "700",
                      "--n-gpus", "8", "--util", "0.5", "--power-frac", "0.5", "--pue", "1.5", "--ci", "200", "--json")
    assert rc == 0
    d = json.loads(out)
    # t = 6 x 7e9 x 1e9 / (8 x 1e15 x 0.5) = 4.2e19 / 4e15 = 10_500 s
    assert d["time_s"] == pytest.approx(10_500.0)
    # 8 x 700 W x 0.5 x 10_500 s = 29_400_000 J = 8.16667 kWh; x1.5 = 12.25 kWh; x 0.2 kg/kWh = 2.45 kg
    assert d["it_kwh"] == pytest.approx(29_400_000 / 3.6e6)
    assert d["facility_kwh"] == pytest.approx(12.25)
    assert d["co2e_kg"] == pytest.approx(2.45)
    assert d["pue_source"] == "--pue" and d["ci_source"] == "--ci"


def test_cli_table_lookup_a100(capsys):
    # bundled table (Epoch AI): NVIDIA A100 SXM4 40 GB, 400 W, dense BF16 312 TFLOP/s
    rc, out, _ = _run(capsys, "--flops", "3.12e18", "--gpu", "NVIDIA A100-SXM4-40GB", "--n-gpus", "4",
                      "--util", "0.25", "--pue", "1.0", "--ci", "100")
    assert rc == 0
    # t = 3.12e18 / (4 x 3.12e14 x 0.25) = 3.12e18 / 3.12e14 = 10_000 s = 2.778 h
    # 10,000 s as sacct prints Elapsed: 2 h 46 min 40 s = 02:46:40
    assert "time:             1e+04 s (02:46:40; FLOPs / (n x rated FLOP/s x FLOP/s fraction))" in out
    # power fraction is not the FLOP/s fraction: default 0.76 (measured under training, Newkirk et al. 2025)
    # E = 4 x 400 W x 0.76 x 10_000 s = 12_160_000 J = 3.378 kWh; x 100 g/kWh = 337.8 g = 0.3378 kg
    assert "IT energy:        3.378 kWh" in out
    assert "carbon:           0.3378 kgCO2e" in out
    assert "Epoch AI" in out
    assert "FLOP/s fraction:  0.25 (achieved / rated FLOP/s, sets the time: --util)" in out
    assert "power fraction:   0.76 (drawn / rated GPU power, sets the energy: default:" in out
    assert "arXiv:2506.14551" in out and "--no-calibration" in out


def test_cli_defaults_are_named(capsys):
    rc, out, _ = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "100", "--util", "1")
    assert rc == 0
    # no PUE/CI in the site config: defaults PUE 1.58 (Uptime 2023), CI 475 g/kWh (IEA 2019), labelled
    assert "PUE 1.58: DEFAULT: industry average" in out and "CI 475 gCO2e/kWh: DEFAULT: world average" in out


def test_cli_site_config_pue_and_ci_for_partition(tmp_path, monkeypatch, capsys):
    (tmp_path / "site.yaml").write_text(
        "cluster_name: c1\npue: 1.2\nlocation:\n  country: FR\ndatacenters:\n  gpu-room:\n    pue: 1.1\n"
        "    pue_source: annual report\n    carbon_intensity: {value: 20, unit: gCO2e/kWh}\n    partitions: [gpu]\n")
    rc, out, _ = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "100", "--util", "1",
                      "--partition", "gpu", "--json")
    d = json.loads(out)
    # t = 1e18 / 1e15 = 1000 s; GPU 100 W x 0.76 x 1000 s = 76_000 J = 0.021111 kWh; x PUE 1.1 = 0.023222 kWh
    assert d["facility_kwh"] == pytest.approx(76_000 / 3.6e6 * 1.1)
    # x 20 gCO2e/kWh = 0.46444 g
    assert d["co2e_kg"] == pytest.approx(76_000 / 3.6e6 * 1.1 * 20 / 1000)
    assert d["pue_source"] == "datacenter gpu-room: annual report" and d["ci_source"].startswith("datacenter gpu-room")
    # another partition: the site's own PUE 1.2
    _rc, out, _ = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "100", "--util", "1", "--json")
    assert json.loads(out)["pue"] == 1.2 and json.loads(out)["pue_source"] == "site config: pue"


def test_cli_amd_gpu_from_the_table(capsys):
    rc, out, _ = _run(capsys, "--params", "7e9", "--tokens", "1e9", "--gpu", "MI300X", "--n-gpus", "8",
                      "--util", "0.5", "--power-frac", "0.5", "--pue", "1.5", "--ci", "200", "--no-calibration",
                      "--json")
    assert rc == 0
    d = json.loads(out)
    # 6 x 7e9 x 1e9 = 4.2e19 FLOP at 8 x 1307.4e12 FLOP/s (MI300X dense BF16) x 0.5 = 8031.2 s;
    # at power fraction 0.5: 8 x 750 W x 0.5 x 8031.2 s = 24.09 MJ = 6.693 kWh
    assert d["time_s"] == pytest.approx(4.2e19 / (8 * 1307.4e12 * 0.5))
    assert d["energy_kwh"]["gpu"] == pytest.approx(8 * 750 * 0.5 * 4.2e19 / (8 * 1307.4e12 * 0.5) / 3.6e6)
    assert d["devices"][0]["model"] == "AMD Instinct MI300X"


def test_cli_unknown_gpu_is_clear(capsys):
    rc, _, err = _run(capsys, "--flops", "1e18", "--gpu", "Quantum Toaster 9000", "--util", "0.4")
    assert rc == 2
    assert "--gpu='Quantum Toaster 9000' is not in the bundled GPU table" in err and "--gpu-flops" in err


def test_cli_needs_work(capsys):
    rc, _, err = _run(capsys, "--params", "7e9", "--gpu-flops", "1e15", "--gpu-watts", "700", "--util", "0.4")
    assert rc == 2 and "--params/--tokens: both are needed" in err


def test_cli_cpu_cores_need_watts(capsys):
    rc, _, err = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "700", "--util", "0.4",
                      "--cpu-cores", "8")
    assert rc == 2 and "--cpu-watts-per-core is needed" in err


def test_cli_fractions_kept_apart(capsys):
    # FLOP/s fraction 0.2 sets the time, power fraction 0.9 the energy (issue 17).
    _rc, out, _ = _run(capsys, "--flops", "8e18", "--gpu-flops", "1e15", "--gpu-watts", "500", "--n-gpus", "4",
                      "--util", "0.2", "--power-frac", "0.9", "--pue", "1.0", "--ci", "0", "--json")
    d = json.loads(out)
    # t = 8e18 / (4 x 1e15 x 0.2) = 10_000 s; E = 4 x 500 W x 0.9 x 10_000 s = 18_000_000 J = 5 kWh
    assert d["time_s"] == pytest.approx(10_000.0)
    assert d["it_kwh"] == pytest.approx(5.0)
    # the old formula (power scaled by the FLOP/s fraction) gave 4 x 500 x 0.2 x 10_000 J = 1.111 kWh, 4.5x less
    assert d["flops_frac_source"] == "--util" and d["power_frac_source"] == "--power-frac"


def test_cli_gpu_hours_and_node_overhead(capsys):
    # 1000 GPU-hours on 8 GPUs: t = 3600 x 1000 / 8 = 450_000 s = 125 h
    rc, out, _ = _run(capsys, "--gpu-hours", "1000", "--gpu-watts", "400", "--n-gpus", "8", "--power-frac", "1",
                      "--node-watts", "800", "--gpus-per-node", "8", "--pue", "1.1", "--ci", "100", "--json")
    assert rc == 0
    d = json.loads(out)
    assert d["time_s"] == pytest.approx(450_000.0)
    # GPU: 8 x 400 W x 1.0 x 450_000 s = 1.44e9 J = 400 kWh; node: 8 x (800 W / 8) x 450_000 s = 3.6e8 J = 100 kWh
    assert d["energy_kwh"]["gpu"] == pytest.approx(400.0)
    assert d["energy_kwh"]["node"] == pytest.approx(100.0)
    # facility = 500 kWh x 1.1 = 550 kWh; CO2e = 550 x 100 g = 55 kg
    assert d["facility_kwh"] == pytest.approx(550.0) and d["co2e_kg"] == pytest.approx(55.0)
    assert d["flops"] is None and d["time_basis"] == "given (GPU-hours / n)"


def test_cli_node_overhead_not_included_is_said(capsys):
    rc, out, _ = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "100", "--util", "1")
    assert rc == 0 and "node overhead:    not included (--no-node-overhead)" in out


def test_cli_default_node_overhead_on_its_own_line(capsys):
    # an A100 (400 W): the DGX A100's (6500 - 3200) / 8 = 412.5 W besides each GPU x 0.76 = 313.5 W per GPU;
    # 1e18 FLOPs / (312e12 x 0.5) = 6410.3 s; IT = (400 x 0.76 + 313.5) W x 6410.3 s / 3.6e6 = 1.0996 kWh
    rc, out, _ = _run(capsys, "--flops", "1e18", "--gpu", "NVIDIA A100-SXM4-40GB", "--util", "0.5", "--pue", "1",
                      "--ci", "100", "--default-node")
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("node overhead:"))
    assert "313.5 W per GPU" in line and "DGX A100" in line and "6.5 kW" in line
    it = next(ln for ln in out.splitlines() if ln.startswith("IT energy:"))
    assert float(it.split()[2]) == pytest.approx((400 * 0.76 + 313.5) * 1e18 / (312e12 * 0.5) / 3.6e6, rel=1e-3)


def test_cli_needs_util_without_calibration(capsys):
    rc, _, err = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "100")
    assert rc == 2 and "--util is needed: site calibration: off (--no-calibration)" in err


def test_cli_power_frac_above_one_is_named(capsys):
    rc, _, err = _run(capsys, "--flops", "1e18", "--gpu-flops", "1e15", "--gpu-watts", "100", "--util", "0.5",
                      "--power-frac", "1.3")
    assert rc == 2 and "--power-frac=1.3 is above 1" in err


@pytest.mark.parametrize("argv, expect", [
    (("--params", "-7e9", "--tokens", "1e9"), "slurm-energy predict: --params -7e+09: must be a number > 0; pass the "
                                               "model's parameter count, e.g. --params 7e9"),
    (("--params", "7e9", "--tokens", "-1E+9"), "slurm-energy predict: --tokens -1e+09: must be a number > 0"),
    (("--params", "0", "--tokens", "1e9"), "slurm-energy predict: --params 0: must be a number > 0"),
    (("--flops", "-1e18"), "slurm-energy predict: --flops -1e+18: must be a number > 0; pass the job's total FLOPs"),
])
def test_negative_numbers_reach_the_check_that_names_the_field(capsys, argv, expect):
    # argparse alone reads "-7e9" as an option: "argument --params: expected one argument"
    rc, out, err = _run(capsys, "--gpu", "A100", "--util", "0.5", *argv)
    assert rc == 2 and out == ""
    assert err.strip() == expect or err.startswith(expect), err
    assert "expected one argument" not in err


def test_attach_negative_values_only_for_options_that_take_one():
    from slurm_energy.cli.main import attach_negative_values

    opts = {"--params", "--ci"}
    assert attach_negative_values(["--params", "-7e9", "--inference", "-5", "--ci", "-.5e-3", "x"], opts) == [
        "--params=-7e9", "--inference", "-5", "--ci=-.5e-3", "x"]
    assert attach_negative_values(["--params", "-x"], opts) == ["--params", "-x"]

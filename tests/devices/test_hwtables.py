"""CPU/GPU model-name normalisation and table look-ups."""

import os

import pytest

from slurm_energy.devices import hwtables as hw


@pytest.mark.parametrize("raw, key", [
    ("Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz", "xeon e5-2683 v4"),
    ("AMD EPYC 7763 64-Core Processor", "epyc 7763"),
    ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "core i7-8700"),
    ("Intel Xeon E5-2683 v4", "xeon e5-2683 v4"),
])
def test_normalize_cpu(raw, key):
    assert hw.normalize_cpu_model(raw) == key


def test_e5_2683_v4_as_the_os_reports_it():
    row = hw.lookup_cpu("Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz")
    assert (row.tdp_w, row.n_cores) == (120.0, 16)  # W per socket, cores per socket (Green Algorithms)


@pytest.mark.parametrize("raw, tdp", [
    ("AMD EPYC 7763 64-Core Processor", 280.0),  # GA TDP_cpu.csv "AMD EPYC 7763"
    ("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", 270.0),  # codecarbon "Intel Xeon Platinum 8380"
    ("AMD Ryzen 9 5950X 16-Core Processor", 105.0),  # codecarbon
])
def test_cpu_table_values(raw, tdp):
    assert hw.lookup_cpu(raw).tdp_w == tdp


def test_unknown_cpu_is_none_not_a_guess():
    assert hw.lookup_cpu("QEMU Virtual CPU version 2.5+") is None
    assert hw.lookup_cpu("AMD EPYC") is None  # family only: too vague to pick a TDP
    assert hw.lookup_cpu("") is None


@pytest.mark.parametrize("nvml_name, watts, bf16", [
    ("NVIDIA H100 80GB HBM3", 700.0, 989.4e12),  # H100 SXM5 datasheet: 700 W, 989.4 TFLOP/s dense BF16
    ("NVIDIA H200", 700.0, 989.5e12),
    ("NVIDIA A100-SXM4-80GB", 400.0, 312e12),
    ("Tesla V100-SXM2-16GB", 300.0, 125e12),
    ("NVIDIA H100 PCIe", 350.0, 756e12),
])
def test_gpu_table(nvml_name, watts, bf16):
    r = hw.lookup_gpu(nvml_name)
    assert (r.rated_w, r.bf16_flops) == (watts, bf16)


@pytest.mark.parametrize("name, watts, fp32, bf16", [
    # names as slurm_energy.devices.drm gives them (PCI id -> product); Epoch AI rows
    ("AMD Instinct MI300X", 750.0, 163.4e12, 1307.4e12),
    ("AMD Instinct MI300A", 760.0, 122.6e12, 980.6e12),
    ("AMD Instinct MI250X", 500.0, 47.87e12, 383e12),
    ("Intel Data Center GPU Max 1550", 600.0, 52.43e12, None),
    ("Intel Data Center GPU Max 1100", 300.0, 22.22e12, None),
    # scripts/data/gpu_specs_supplement.csv rows (AMD's spec table as AnandTech printed it)
    ("AMD Instinct MI210", 300.0, 22.6e12, 181e12),
    ("AMD Instinct MI250", 560.0, 45.3e12, 362.1e12),
    ("AMD Instinct MI100", 300.0, 23.1e12, None),
    ("Intel Data Center GPU Flex 170", 150.0, None, None),
])
def test_amd_intel_gpu_table(name, watts, fp32, bf16):
    r = hw.lookup_gpu(name)
    assert (r.rated_w, r.fp32_flops, r.bf16_flops) == (watts, fp32, bf16)
    assert r.source  # every row names where its numbers come from


def test_gpu_word_order_and_unknown():
    assert hw.lookup_gpu("NVIDIA A100-PCIE-40GB").rated_w == 250.0  # GA "NVIDIA A100 40GB PCIe"
    assert hw.lookup_gpu("Tesla T4").rated_w == 70.0
    assert hw.lookup_gpu("NVIDIA Mystery 9000") is None


def test_devices_notice_ships_mit_licence():
    text = open(os.path.join(hw.DATA_DIR, "NOTICE")).read()
    assert "MIT License" in text and "Epoch AI" in text


def test_lookup_does_not_import_pandas():
    import subprocess
    import sys

    code = ("import sys; from slurm_energy.config import SiteConfig; c=SiteConfig();"
            "from slurm_energy.config.carbon import resolve_carbon; from slurm_energy.devices.rated import cpu_tdp;"
            "cpu_tdp(c.hardware, 'AMD EPYC 7763 64-Core Processor', 64); resolve_carbon(c, offline=True);"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.stdout.strip() == "False", out.stderr


def _whole_table_index(path=hw.CPU_TABLE):
    """The reference: every row indexed (exact key; key without family words when its rows agree)."""
    import csv

    exact = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            exact.setdefault(r["key"], float(r["tdp_w"]))
    loose, ambiguous = {}, set()
    for key, w in exact.items():
        k = hw.strip_family(key)
        if not k or (k.isdigit() and len(k) < 4):
            continue
        if k in loose and loose[k][1] != w:
            ambiguous.add(k)
        loose.setdefault(k, (key, w))
    return exact, {k: v for k, v in loose.items() if k not in ambiguous}


def test_lookup_reading_only_matching_lines_answers_as_the_whole_table_index():
    exact, loose = _whole_table_index()
    assert len(exact) > 4000
    for key, w in list(exact.items())[::7]:  # a seventh of the keys as is, and with the family word dropped or swapped
        row = hw.lookup_cpu(key)
        assert row is not None and (row.key, row.tdp_w) == (key, w), key
        k = hw.strip_family(key)
        for variant in (k, "xeon " + k, "epyc " + k):
            got = hw.lookup_cpu(variant)
            key2 = hw.normalize_cpu_model(variant)
            want = exact.get(key2)
            if want is None and hw.strip_family(key2) in loose:
                want = loose[hw.strip_family(key2)][1]
            assert (got.tdp_w if got else None) == want, variant

"""RAPL on the server layouts sites run: AMD Zen per-CCD zones, AMD without power limits, TPMI
Xeons with psys between the packages, Sapphire Rapids' DRAM unit. Each layout is built by
tests/fakes/powercap.py from the capture it cites."""

import pytest

from slurm_energy.devices.hardware import HardwareConfig
from slurm_energy.sampling import setup
from slurm_energy.sampling.readers.rapl import SPR_DRAM_FLAG, RaplReader, discover_zones
from tests.fakes.powercap import AMD_RANGE_UJ, Zone, amd_zen4_per_ccd, build_tree, set_energy, tpmi_two_sockets
from tests.helpers.series_points import series_from_readings

S0, S1 = 64_930_873_566, 12_345_678_901  # uJ, the two sockets' package counters (S0 from an AMD fixture)


def _by_id(readings):
    return {r.device_id: r for r in readings}


def test_amd_zen4_per_ccd_zones_count_each_socket_once(tmp_path):
    root = build_tree(tmp_path, amd_zen4_per_ccd([S0, S1]))
    r = RaplReader(root)
    # 16 zones intel-rapl:0..f (hex ids), 8 per socket reading one counter: one device per socket
    assert [d.device_id for d in r.devices()] == ["intel-rapl:0", "intel-rapl:8"]
    assert [d.model for d in r.devices()] == ["package-0-die-0", "package-1-die-0"]
    why = {z.key: z.why for z in r.zones}
    assert why["intel-rapl:7"].startswith("reads the same counter as intel-rapl:0")
    assert why["intel-rapl:f"].startswith("reads the same counter as intel-rapl:8")
    a = r.read()
    # +1000 J on socket 0 and +500 J on socket 1 over 10 s, seen through every CCD zone
    for i in range(16):
        set_energy(root, f"intel-rapl:{i:x}", (S0 + 1_000_000_000) if i < 8 else (S1 + 500_000_000))
    b = r.read()
    total = sum(series_from_readings([(0.0, x), (10.0, _by_id(b)[x.device_id])]).total_j for x in a)
    assert total == pytest.approx(1500.0)  # J: 1000 + 500, not 8 x 1500 = 12000
    assert all(x.method == "counter" and x.max_energy_range_uj == AMD_RANGE_UJ for x in b)


def test_amd_after_the_kernel_fix_one_zone_per_socket(tmp_path):
    # the same server after linux 26096aed255f: intel-rapl:0 package-0, intel-rapl:1 package-1
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=S0, max_energy_range_uj=AMD_RANGE_UJ),
                                 Zone("intel-rapl:0:0", "core", energy_uj=1, max_energy_range_uj=AMD_RANGE_UJ),
                                 Zone("intel-rapl:1", "package-1", energy_uj=S1, max_energy_range_uj=AMD_RANGE_UJ),
                                 Zone("intel-rapl:1:0", "core", energy_uj=1, max_energy_range_uj=AMD_RANGE_UJ)])
    assert [d.device_id for d in RaplReader(root).devices()] == ["intel-rapl:0", "intel-rapl:1"]


def test_intel_per_die_counters_that_differ_are_all_kept(tmp_path):
    # Cascade Lake-AP: package-P-die-D zones with their own counters (not one counter): both count
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0-die-0", energy_uj=5_000_000_000),
                                 Zone("intel-rapl:1", "package-0-die-1", energy_uj=7_500_000_000)])
    r = RaplReader(root)
    assert [d.device_id for d in r.devices()] == ["intel-rapl:0", "intel-rapl:1"]
    assert [x.energy_uj for x in r.read()] == [5_000_000_000, 7_500_000_000]


def test_amd_no_power_limit_wraps_bounded_by_rated_power(tmp_path):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=0, max_energy_range_uj=AMD_RANGE_UJ)])
    r = RaplReader(root)
    assert r.unbounded_zones() == ["intel-rapl:0"]
    assert r.read()[0].max_power_w is None  # no constraint file: no bound yet
    r.bound_wraps(280.0, "table: AMD EPYC 9354")
    assert r.unbounded_zones() == []
    (dev,) = r.devices()
    assert dev.extra["wrap_bound"] == "rated power 280 W (table: AMD EPYC 9354)"
    a = r.read()[0]
    assert a.max_power_w == pytest.approx(280.0)
    set_energy(root, "intel-rapl:0", 30_000_000_000)  # +30,000 J
    b = r.read()[0]
    # fastest wrap = 65,532.610987 J / 280 W = 234.05 s: a 240 s gap may hide a wrap, 230 s cannot
    slow = series_from_readings([(0.0, a), (240.0, b)])
    fast = series_from_readings([(0.0, a), (230.0, b)])
    assert slow.total_j == pytest.approx(30_000.0) and "possible_multiple_wrap" in slow.flags
    assert fast.total_j == pytest.approx(30_000.0) and "possible_multiple_wrap" not in fast.flags


def test_build_readers_bounds_amd_wraps_from_the_bundled_table(tmp_path, monkeypatch):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=0, max_energy_range_uj=AMD_RANGE_UJ)])
    monkeypatch.setattr(setup, "cpu_model", lambda: "AMD EPYC 9354 32-Core Processor")
    readers, _notes = setup.build_readers(HardwareConfig(rapl_root=root))
    (rapl,) = [x for x in readers if x.name == "rapl"]
    (dev,) = rapl.devices()
    assert dev.extra["wrap_bound"].startswith("rated power 280 W (table: AMD EPYC 9354")
    assert rapl.read()[0].max_power_w == pytest.approx(280.0)  # W, the table's TDP


def test_tpmi_psys_between_packages_never_added(tmp_path):
    root = build_tree(tmp_path, tpmi_two_sockets((10_000_000, 20_000_000), (1_000_000, 2_000_000),
                                                 (50_000_000, 60_000_000)))
    r = RaplReader(root)
    assert [(d.device_id, d.device_class) for d in r.devices()] == [
        ("intel-rapl:0", "cpu"), ("intel-rapl:0:0", "ram"), ("intel-rapl:2", "cpu"), ("intel-rapl:2:0", "ram")]
    why = {z.key: z.why for z in discover_zones(root)}
    assert why["intel-rapl:1"] == why["intel-rapl:3"] == "psys contains package and dram, which are reported"
    cpu_uj = sum(x.energy_uj for x in r.read() if x.device_class == "cpu")
    assert cpu_uj == 30_000_000  # uJ: package-0 + package-1, no psys


def test_tpmi_control_type_name_accepted(tmp_path):
    root = build_tree(tmp_path, [Zone("intel-rapl-tpmi:0", "package-0", energy_uj=3),
                                 Zone("intel-rapl-tpmi:0:0", "dram", energy_uj=4)])
    assert [(x.device_id, x.energy_uj) for x in RaplReader(root).read()] == [
        ("intel-rapl-tpmi:0", 3), ("intel-rapl-tpmi:0:0", 4)]


def test_tpmi_view_of_an_msr_package_is_not_added(tmp_path):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=3),
                                 Zone("intel-rapl-tpmi:0", "package-0", energy_uj=5)])
    r = RaplReader(root)
    assert [x.device_id for x in r.read()] == ["intel-rapl:0"]
    why = {z.key: z.why for z in r.zones}
    assert why["intel-rapl-tpmi:0"] == "duplicates intel-rapl package-0 (intel-rapl-tpmi view of the same package)"


def _cpuinfo(tmp_path, family, model, name):
    p = tmp_path / "cpuinfo"
    p.write_text("".join(f"processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                         f"model name\t: {name}\nphysical id\t: 0\n\n" for i in range(2)))
    return str(p)


@pytest.mark.parametrize(("model", "kernel", "flagged"), [
    (143, "5.15.0-91-generic", True),   # Sapphire Rapids (0x8F), kernel 5.9..6.0: 15.3 uJ quirk applied
    (143, "6.1.0-17-amd64", False),     # 6.1 has 4c081324df56
    (106, "5.15.0-91-generic", False),  # Ice Lake-SP (0x6A): the 15.3 uJ unit is right there
])
def test_spr_dram_unit_flagged_on_kernels_before_the_fix(tmp_path, model, kernel, flagged):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=9),
                                 Zone("intel-rapl:0:0", "dram", energy_uj=8)])
    info = _cpuinfo(tmp_path, 6, model, "Intel(R) Xeon(R) Platinum 8480+")
    pkg, dram = RaplReader(root, cpuinfo=info, kernel_release=kernel).read()
    assert (SPR_DRAM_FLAG in dram.flags) is flagged
    assert SPR_DRAM_FLAG not in pkg.flags
    assert dram.energy_uj == 8  # uJ, as the kernel gave it: flagged, never rescaled

"""RaplReader on fake powercap trees (this machine has no RAPL)."""

import errno
import os

import pytest

from slurm_energy.sampling.files import KeptFiles
from slurm_energy.sampling.readers.rapl import RaplReader, discover_zones
from tests.fakes.powercap import Zone, build_tree, set_energy
from tests.helpers.series_points import intervals, series_from_readings

PKG_RANGE = 262_143_328_850  # uJ, a real Xeon package max_energy_range_uj
DRAM_RANGE = 65_712_999_613  # uJ, a real dram max_energy_range_uj (differs from the package's)


def test_twelve_sockets_numeric_order_keyed_by_path(tmp_path):
    # powercap_sys.c names zones "%s:%x": the 11th and 12th packages are intel-rapl:a and :b
    zones = []
    for i in range(12):
        zones.append(Zone(f"intel-rapl:{i:x}", f"package-{i}", energy_uj=1000 * i))
        zones.append(Zone(f"intel-rapl:{i:x}:0", "dram", energy_uj=10 * i))
    r = RaplReader(build_tree(tmp_path, zones))
    cpu = [d.device_id for d in r.devices() if d.device_class == "cpu"]
    ram = [d.device_id for d in r.devices() if d.device_class == "ram"]
    assert cpu == [f"intel-rapl:{i:x}" for i in range(12)]  # a and b after 9
    assert cpu[-3:] == ["intel-rapl:9", "intel-rapl:a", "intel-rapl:b"]
    assert ram == [f"intel-rapl:{i:x}:0" for i in range(12)]  # twelve "dram" names, twelve keys
    by_id = {x.device_id: x for x in r.read()}
    assert by_id["intel-rapl:b"].energy_uj == 11_000  # uJ, package-11
    assert by_id["intel-rapl:a:0"].energy_uj == 100  # uJ, dram of package-10
    assert all(x.method == "counter" for x in by_id.values())


def test_overlap_policy_laptop_with_psys_core_uncore_mmio(tmp_path):
    root = build_tree(
        tmp_path,
        [
            Zone("intel-rapl:0", "package-0"),
            Zone("intel-rapl:0:0", "core"),
            Zone("intel-rapl:0:1", "uncore"),
            Zone("intel-rapl:0:2", "dram"),
            Zone("intel-rapl:1", "psys"),
            Zone("intel-rapl-mmio:0", "package-0"),
        ],
    )
    r = RaplReader(root)
    assert [(d.device_id, d.device_class) for d in r.devices()] == [
        ("intel-rapl:0", "cpu"),
        ("intel-rapl:0:2", "ram"),
    ]
    why = {z.key: z.why for z in discover_zones(root)}
    assert "inside its package" in why["intel-rapl:0:0"]
    assert "psys contains" in why["intel-rapl:1"]
    assert "duplicates" in why["intel-rapl-mmio:0"]


def test_psys_only_when_nothing_else(tmp_path):
    r = RaplReader(build_tree(tmp_path, [Zone("intel-rapl:0", "psys", energy_uj=5)]))
    (rd,) = r.read()
    assert (rd.device_id, rd.device_class, rd.energy_uj) == ("intel-rapl:0", "cpu", 5)
    assert "psys" in rd.flags


def test_mmio_package_reported_when_no_msr_package(tmp_path):
    r = RaplReader(build_tree(tmp_path, [Zone("intel-rapl-mmio:0", "package-0", energy_uj=7)]))
    assert [d.device_id for d in r.devices()] == ["intel-rapl-mmio:0"]


def test_package_no_wrap_dram_wraps_with_its_own_range(tmp_path):
    root = build_tree(
        tmp_path,
        [
            Zone("intel-rapl:0", "package-0", energy_uj=1_000_000_000, max_energy_range_uj=PKG_RANGE),
            Zone("intel-rapl:0:0", "dram", energy_uj=DRAM_RANGE - 4_000_000, max_energy_range_uj=DRAM_RANGE),
            Zone("intel-rapl:1", "package-1", energy_uj=PKG_RANGE - 1_000_000, max_energy_range_uj=PKG_RANGE),
        ],
    )
    r = RaplReader(root)
    first = {x.device_id: x for x in r.read()}
    set_energy(root, "intel-rapl:0", 1_500_000_000)  # +500 J, no wrap
    set_energy(root, "intel-rapl:0:0", 6_000_000)  # wraps: 6e6 + DRAM_RANGE - (DRAM_RANGE - 4e6) = 10e6 uJ = 10 J
    set_energy(root, "intel-rapl:1", 2_000_000)  # wraps: 2e6 + PKG_RANGE - (PKG_RANGE - 1e6) = 3e6 uJ = 3 J
    second = {x.device_id: x for x in r.read()}
    res = {k: series_from_readings([(0.0, first[k]), (5.0, second[k])]) for k in first}
    assert res["intel-rapl:0"].total_j == pytest.approx(500.0) and res["intel-rapl:0"].wraps == 0
    assert res["intel-rapl:0:0"].total_j == pytest.approx(10.0) and res["intel-rapl:0:0"].wraps == 1
    assert res["intel-rapl:1"].total_j == pytest.approx(3.0) and res["intel-rapl:1"].wraps == 1


def test_max_power_from_constraints_and_multiple_wrap_flag(tmp_path):
    # range 1_000 J, constraints 150 W (long term) and 200 W (short term):
    # fastest wrap = 1000 J / 200 W = 5 s, so a 6 s gap is flagged.
    root = build_tree(
        tmp_path,
        [Zone("intel-rapl:0", "package-0", energy_uj=0, max_energy_range_uj=10**9,
              max_power_uw={0: 150_000_000, 1: 200_000_000})],
    )
    r = RaplReader(root)
    (dev,) = r.devices()
    assert dev.rated_power_w == pytest.approx(150.0)
    a = r.read()[0]
    assert a.max_power_w == pytest.approx(200.0)
    set_energy(root, "intel-rapl:0", 100_000_000)  # +100 J
    b = r.read()[0]
    s = series_from_readings([(0.0, a), (6.0, b)])
    assert s.total_j == pytest.approx(100.0)
    assert "possible_multiple_wrap" in s.flags


def test_energy_uj_eacces_gives_unavailable_not_crash(tmp_path):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0"), Zone("intel-rapl:0:0", "dram", energy_uj=9)])
    real = KeptFiles()

    class RootOnly:  # root reads everything, so simulate the kernel >= 5.10 0400 energy_uj
        def read(self, path, size=1 << 16):
            if path.endswith(os.path.join("intel-rapl:0", "energy_uj")):
                raise PermissionError(errno.EACCES, "Permission denied", path)
            return real.read(path, size)

    by_id = {x.device_id: x for x in RaplReader(root, files=RootOnly()).read()}
    pkg = by_id["intel-rapl:0"]
    assert pkg.method == "unavailable" and pkg.energy_uj is None and pkg.flags == ["eacces"]
    assert by_id["intel-rapl:0:0"].method == "counter" and by_id["intel-rapl:0:0"].energy_uj == 9


def test_unreadable_range_flags_and_backwards_step_dropped(tmp_path):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0", energy_uj=50_000_000, max_energy_range_uj=None)])
    r = RaplReader(root)
    a = r.read()[0]
    assert a.max_energy_range_uj is None and "range_unreadable" in a.flags
    set_energy(root, "intel-rapl:0", 10_000_000)  # backwards with range unknown
    b = r.read()[0]
    set_energy(root, "intel-rapl:0", 12_000_000)  # +2 J
    c = r.read()[0]
    s = series_from_readings([(0.0, a), (5.0, b), (10.0, c)])
    assert [iv.energy_j for iv in intervals(s)] == [None, pytest.approx(2.0)]
    assert s.dropped == 1 and s.resets == 0 and "range_unreadable" in s.flags


def test_garbage_counter_is_read_error(tmp_path):
    root = build_tree(tmp_path, [Zone("intel-rapl:0", "package-0")])
    with open(os.path.join(os.path.realpath(os.path.join(root, "intel-rapl:0")), "energy_uj"), "w") as f:
        f.write("not a number\n")
    (rd,) = RaplReader(root).read()
    assert rd.method == "unavailable" and rd.flags == ["read_error"]


def test_absent_root(tmp_path):
    r = RaplReader(str(tmp_path / "nope"))
    assert not r.available and r.read() == [] and r.devices() == []
    assert "absent" in r.reason


def test_real_machine_has_no_powercap_here():
    # Environment fact for this CI box (no /sys/class/powercap): the reader says why, no crash.
    if os.path.isdir("/sys/class/powercap"):
        pytest.skip("this machine has powercap")
    assert RaplReader().reason.startswith("/sys/class/powercap absent")


def test_nested_tree_root_gives_same_zones(tmp_path):
    # /sys/devices/virtual/powercap (nested) and /sys/class/powercap (flat links) list the same zones
    build_tree(tmp_path, [Zone("intel-rapl:0", "package-0"), Zone("intel-rapl:0:0", "dram"),
                          Zone("intel-rapl:1", "package-1"), Zone("intel-rapl:1:0", "dram")])
    nested = RaplReader(str(tmp_path / "devices" / "virtual" / "powercap"))
    flat = RaplReader(str(tmp_path / "class" / "powercap"))
    ids = ["intel-rapl:0", "intel-rapl:0:0", "intel-rapl:1", "intel-rapl:1:0"]
    assert [d.device_id for d in nested.devices()] == ids
    assert [d.device_id for d in flat.devices()] == ids

"""hwmon power meters (ACPI power meter, X-Gene rails) measuring ARM server CPUs, on fake trees
built by tests/fakes/hwmon.py from the captures it cites; arm64 sockets from sysfs topology."""

import errno

import pytest

from slurm_energy.devices.hardware import HardwareConfig
from slurm_energy.devices.info import cpu_topology
from slurm_energy.sampling import setup
from slurm_energy.sampling.readers.hwmon_power import (
    HwmonPowerReader,
    covers_memory,
    cpu_meters,
    find_power_meters,
    memory_meters,
)
from slurm_energy.sampling.readers.tdp import CpuTdpReader, RamModelReader
from tests.fakes.hwmon import FIRMWARE_ERROR_UW, acpi_power_meter, arm64_node, grace_socket, set_average, smpro, xgene
from tests.helpers.series_points import series_from_readings

GH200 = {"Module": 450_000_000, "Grace": 150_000_000, "CPU": 100_000_000, "SysIO": 20_000_000}  # uW


def test_finds_acpi_meters_under_device_with_label_and_interval(tmp_path):
    grace_socket(tmp_path, 0, 0, GH200)
    ms = find_power_meters(str(tmp_path))
    assert [(m.key, m.driver, m.label, m.interval_ms) for m in ms] == [
        ("hwmon0/power1", "power_meter", "Module Power Socket 0", 50),
        ("hwmon1/power1", "power_meter", "Grace Power Socket 0", 50),
        ("hwmon2/power1", "power_meter", "CPU Power Socket 0", 50),
        ("hwmon3/power1", "power_meter", "SysIO Power Socket 0", 50),
    ]
    assert ms[1].path.endswith("hwmon1/device/power1_average")


def test_gh200_cpu_is_the_grace_meter_never_module_or_rails_on_top(tmp_path):
    grace_socket(tmp_path, 0, 0, GH200)
    devs = cpu_meters(find_power_meters(str(tmp_path)))
    assert [(d.device_class, d.device_id) for d in devs] == [("cpu", "grace-socket-0")]
    assert devs[0].covers.startswith("Grace socket: CPU and SoC rails, LPDDR5X memory")
    assert covers_memory(devs)
    r = HwmonPowerReader(devs)
    a = r.read()
    set_average(tmp_path, 1, 170_000_000)  # Grace meter: 150 W -> 170 W
    b = r.read()
    assert [(x.method, x.power_w) for x in a + b] == [("power_integration", 150.0), ("power_integration", 170.0)]
    s = series_from_readings([(0.0, a[0]), (10.0, b[0])])
    assert s.total_j == pytest.approx(1600.0)  # J: (150 + 170) / 2 W x 10 s; never the 450 W module
    (dev,) = r.devices()
    assert dev.model == "Grace Power Socket 0" and dev.extra["meter"] == "hwmon1/power1"


def test_grace_cpu_superchip_two_sockets(tmp_path):
    grace_socket(tmp_path, 0, 0, {"Grace": 120_000_000, "CPU": 90_000_000, "SysIO": 15_000_000})
    grace_socket(tmp_path, 3, 1, {"Grace": 130_500_000, "CPU": 95_000_000, "SysIO": 16_000_000})
    r = HwmonPowerReader(cpu_meters(find_power_meters(str(tmp_path))))
    assert [(x.device_id, x.power_w) for x in r.read()] == [("grace-socket-0", 120.0), ("grace-socket-1", 130.5)]


def test_cpu_rail_when_no_grace_meter(tmp_path):
    grace_socket(tmp_path, 0, 0, {"Module": 400_000_000, "CPU": 80_000_000})
    devs = cpu_meters(find_power_meters(str(tmp_path)))
    assert [d.device_id for d in devs] == ["cpu-socket-0"]
    assert devs[0].covers.startswith("Grace CPU rail only")
    assert not covers_memory(devs)


def test_module_meter_alone_measures_no_cpu(tmp_path):
    acpi_power_meter(tmp_path, 0, "Module Power Socket 0", 450_000_000)
    assert cpu_meters(find_power_meters(str(tmp_path))) == []


def test_firmware_error_value_and_enodata_are_unavailable_never_power(tmp_path):
    grace_socket(tmp_path, 0, 0, {"Grace": FIRMWARE_ERROR_UW})
    r = HwmonPowerReader(cpu_meters(find_power_meters(str(tmp_path))))
    (x,) = r.read()
    assert (x.method, x.power_w, x.flags) == ("unavailable", None, ["meter_error_value"])

    class NoData:
        def read(self, path, size=0):
            raise OSError(errno.ENODATA, "No data available")

    r2 = HwmonPowerReader(cpu_meters(find_power_meters(str(tmp_path))), files=NoData())
    (y,) = r2.read()
    assert (y.method, y.power_w, y.flags) == ("unavailable", None, ["meter_no_data"])


def test_xgene_cpu_and_io_rails(tmp_path):
    xgene(tmp_path, 0, cpu_uw=45_000_000, io_uw=12_500_000)
    devs = cpu_meters(find_power_meters(str(tmp_path)))
    assert [d.device_id for d in devs] == ["xgene-hwmon0-cpu", "xgene-hwmon0-io"]
    r = HwmonPowerReader(devs)
    xs = r.read()
    assert [(x.method, x.power_w) for x in xs] == [("power_integration", 45.0), ("power_integration", 12.5)]
    assert sum(x.power_w for x in xs) == pytest.approx(57.5)  # W: disjoint rails of one SoC


def test_build_readers_on_gh200_measures_cpu_and_skips_ram_model(tmp_path):
    grace_socket(tmp_path / "hwmon", 0, 0, GH200)
    hw = HardwareConfig(rapl_root=str(tmp_path / "no-powercap"), hwmon_root=str(tmp_path / "hwmon"))
    readers, notes = setup.build_readers(hw)
    assert [type(r).__name__ for r in readers] == ["HwmonPowerReader"]
    assert not any(isinstance(r, (CpuTdpReader, RamModelReader)) for r in readers)
    assert any(n.startswith("cpu: measured by hwmon power meters: grace-socket-0 = Grace socket") for n in notes)
    assert any(n.startswith("ram: measured by the hwmon power meters") for n in notes)
    assert [(x.device_id, x.method, x.power_w) for x in readers[0].read()] == [
        ("grace-socket-0", "power_integration", 150.0)]


def test_build_readers_rail_meter_keeps_ram_model(tmp_path):
    xgene(tmp_path / "hwmon", 0, cpu_uw=45_000_000, io_uw=12_500_000)
    hw = HardwareConfig(rapl_root=str(tmp_path / "no-powercap"), hwmon_root=str(tmp_path / "hwmon"))
    readers, _ = setup.build_readers(hw)
    assert [type(r).__name__ for r in readers] == ["HwmonPowerReader", "RamModelReader"]


def test_build_readers_meter_in_error_falls_back_to_labelled_tdp(tmp_path, monkeypatch):
    grace_socket(tmp_path / "hwmon", 0, 0, {"Grace": FIRMWARE_ERROR_UW})
    monkeypatch.setattr(setup, "cpu_model", lambda: "")
    monkeypatch.setattr(setup, "cpu_topology", lambda: (1, 72, 72))
    hw = HardwareConfig(rapl_root=str(tmp_path / "no-powercap"), hwmon_root=str(tmp_path / "hwmon"),
                        cpu_tdp_default_w=250.0)
    readers, notes = setup.build_readers(hw)
    assert [type(r).__name__ for r in readers] == ["CpuTdpReader", "RamModelReader"]
    assert "hwmon-power: CPU meters found but none answers; CPU uses the TDP model" in notes


def test_arm64_sockets_from_sysfs_topology(tmp_path):
    info, cpu_dir = arm64_node(tmp_path, sockets=4, cores_per_socket=3)
    assert cpu_topology(info, cpu_dir) == (4, 3, 12)  # (sockets, cores per socket, logical CPUs)


def test_tdp_estimate_on_a_4_socket_arm_node_counts_4_sockets(tmp_path, monkeypatch):
    info, cpu_dir = arm64_node(tmp_path, sockets=4, cores_per_socket=3)
    monkeypatch.setattr(setup, "cpu_model", lambda: "Neoverse-V2")
    monkeypatch.setattr(setup, "cpu_topology", lambda: cpu_topology(info, cpu_dir))
    hw = HardwareConfig(rapl_root=str(tmp_path / "none"), hwmon_root=str(tmp_path / "none"),
                        cpu_tdp_w={"Neoverse-V2": 250.0})
    readers, _ = setup.build_readers(hw)
    (tdp,) = [r for r in readers if isinstance(r, CpuTdpReader)]
    assert tdp.tdp_total_w == 1000.0  # W: 250 W x 4 sockets, not x 1
    assert tdp.cores == 12


def test_altra_smpro_core_soc_rca_rails_measure_cpu_and_dimm_rails_memory(tmp_path):
    smpro(tmp_path / "hwmon", 0, (60_000_000, 25_000_000, 8_000_000, 7_500_000, 19_500_000))
    meters = find_power_meters(str(tmp_path / "hwmon"))
    assert [d.device_id for d in cpu_meters(meters)] == ["smpro-hwmon0-core", "smpro-hwmon0-soc", "smpro-hwmon0-rca"]
    assert [d.device_id for d in memory_meters(meters)] == ["smpro-hwmon0-dimm1", "smpro-hwmon0-dimm2"]
    hw = HardwareConfig(rapl_root=str(tmp_path / "no-powercap"), hwmon_root=str(tmp_path / "hwmon"))
    readers, notes = setup.build_readers(hw)
    assert [type(r).__name__ for r in readers] == ["HwmonPowerReader"]  # no TDP model, no RAM model
    xs = readers[0].read()
    assert all(x.method == "power_integration" for x in xs)
    cpu_w = sum(x.power_w for x in xs if x.device_class == "cpu")
    ram_w = sum(x.power_w for x in xs if x.device_class == "ram")
    assert (cpu_w, ram_w) == (pytest.approx(104.5), pytest.approx(15.5))  # W: 60 + 25 + 19.5; 8 + 7.5

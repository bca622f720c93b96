"""Node meter sources (ACPI power meter, pm_counters, IPMI DCMI, Slurm) and the checks that flag a
meter that lies. Every fake cites its source (tests/fakes/hwmon.py, pm_counters.py, dcmi/README.md)."""

from __future__ import annotations

import os
import subprocess

import pytest

from slurm_energy.config.schema import NodeMeter
from slurm_energy.core import Reading
from slurm_energy.sampling.readers import hwmon_power, ipmi_dcmi, node_meter, pm_counters
from tests.fakes import hwmon as fake_hwmon
from tests.fakes import pm_counters as fake_pm

DCMI = os.path.join(os.path.dirname(__file__), "..", "fakes", "dcmi")


def _capture(name: str) -> str:
    with open(os.path.join(DCMI, name)) as f:
        return f.read()


# ---- ACPI power meter (the one hwmon reader) ----

def test_acpi_node_meter_reads_the_whole_node_meter_not_grace_sockets(tmp_path):
    # a node-level ACPI000D meter (no OEM string) beside one Grace socket's meters
    fake_hwmon.acpi_power_meter(tmp_path, 0, "", 412_500_000, interval_ms=1000)
    fake_hwmon.grace_socket(tmp_path, 1, 0, {"Grace": 250_000_000, "CPU": 180_000_000})
    devs = hwmon_power.node_meters(hwmon_power.find_power_meters(str(tmp_path)))
    assert [d.device_id for d in devs] == ["acpi-power-meter-hwmon0"]
    r = hwmon_power.HwmonPowerReader(devs).read()
    assert r[0].device_class == "node" and r[0].power_w == pytest.approx(412.5)  # 412 500 000 uW = 412.5 W


def test_auto_picks_acpi_then_pm_counters_and_never_a_network_bmc(tmp_path):
    hw = tmp_path / "hwmon"
    pm = tmp_path / "pm"
    cfg = NodeMeter(source="auto", pm_counters_root=str(pm),
                    redfish={"url": "https://bmc.example:443"})  # given, but auto never reads it
    reader, note = node_meter.open_node_meter(cfg, hwmon_root=str(hw), dev_ipmi=())
    assert reader is None and "none found in-band" in note
    fake_pm.tree(pm, 5_405_478, 350)
    reader, note = node_meter.open_node_meter(cfg, hwmon_root=str(hw), dev_ipmi=())
    assert isinstance(reader, pm_counters.PmCountersReader), note
    fake_hwmon.acpi_power_meter(hw, 0, "", 300_000_000)
    reader, note = node_meter.open_node_meter(cfg, hwmon_root=str(hw), dev_ipmi=())
    assert isinstance(reader, hwmon_power.HwmonPowerReader) and "ACPI power meter hwmon0/power1" in note


def test_named_source_absent_says_what_is_missing(tmp_path):
    reader, note = node_meter.open_node_meter(NodeMeter(source="pm_counters", pm_counters_root=str(tmp_path)),
                                              hwmon_root=str(tmp_path), dev_ipmi=())
    assert reader is None and note == f"node meter: no {tmp_path}/energy"
    reader, note = node_meter.open_node_meter(NodeMeter(source="none"))
    assert reader is None and "none" in note


def test_redfish_source_needs_a_url():
    with pytest.raises(ValueError, match="node_meter.redfish.url"):
        NodeMeter(source="redfish")


# ---- HPE/Cray pm_counters ----

def test_pm_counters_energy_counter_and_power(tmp_path):
    fake_pm.tree(tmp_path, 5_405_478, 350, cpu_j=2_000_000, memory_j=400_000, accel_j=1_000_000)
    now = [100.0]
    r = pm_counters.PmCountersReader(str(tmp_path), clock=lambda: now[0])
    [x] = r.read()
    assert x.method == "counter" and x.energy_uj == 5_405_478_000_000  # 5 405 478 J x 1e6 uJ/J
    assert x.power_w == 350.0 and x.flags == []
    assert r.domains() == {"accel": 1_000_000.0, "cpu": 2_000_000.0, "memory": 400_000.0}
    assert r.devices()[0].extra["domains"] == ["accel", "cpu", "memory"]


def test_pm_counters_stale_freshness_and_generation_change(tmp_path):
    fake_pm.tree(tmp_path, 1000, 300, freshness=7)
    now = [0.0]
    r = pm_counters.PmCountersReader(str(tmp_path), clock=lambda: now[0])
    assert r.read()[0].flags == []
    now[0] = 1.0  # freshness counts at ~10 Hz: unchanged after 1 s is not yet stale
    assert r.read()[0].flags == []
    now[0] = 2.5  # unchanged 2.5 s after it last moved: stale
    assert r.read()[0].flags == ["meter_stale"]
    fake_pm.step(tmp_path, 4000, 300, freshness=40, generation=4)  # a power cap changed
    now[0] = 12.5
    assert r.read()[0].flags == ["meter_generation_changed"]


# ---- IPMI DCMI ----

def test_parse_freeipmi_capture():
    r = ipmi_dcmi.parse_power_reading(_capture("freeipmi-ceems.txt"))
    assert (r.current_w, r.min_w, r.max_w, r.average_w) == (332, 68, 504, 348)
    assert r.period_s == 2_685_198.0  # 2 685 198 000 ms
    assert r.active and r.timestamp == 1699000589.0  # 11/03/2023 08:36:29 UTC


def test_parse_ipmitool_captures():
    r = ipmi_dcmi.parse_power_reading(_capture("ipmitool-telegraf-1566.txt"))
    assert (r.current_w, r.min_w, r.max_w, r.average_w) == (167, 124, 422, 156)
    assert r.period_s == 699043.0 and r.active and r.timestamp == 1470086571.0  # Mon Aug 1 21:22:51 2016 UTC
    off = ipmi_dcmi.parse_power_reading(_capture("ipmitool-openbmc-3257.txt"))
    assert off.current_w == 319 and not off.active and off.timestamp is None  # 1970: no statistics kept


def test_parse_refuses_output_without_a_reading():
    with pytest.raises(ipmi_dcmi.DcmiParseError, match="Current Power"):
        ipmi_dcmi.parse_power_reading("Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0\n")


def test_dcmi_reader_counts_requests_and_flags_failures():
    outs = [_capture("freeipmi-ceems.txt"), _capture("freeipmi-ceems.txt")]
    calls = []

    def runner(argv, timeout):
        calls.append((list(argv), timeout))
        if not outs:
            raise subprocess.TimeoutExpired(argv, timeout)
        return outs.pop(0)

    argv = ipmi_dcmi.tool_argv("freeipmi", "/usr/sbin/ipmi-dcmi")
    r = ipmi_dcmi.DcmiReader(argv, runner, timeout_s=3.0)
    first = r.read()[0]
    assert first.method == "power_integration" and first.power_w == 332.0 and first.flags == []
    assert r.read()[0].flags == ["meter_stale"]  # the same IPMI timestamp again: the BMC did not update
    assert r.read()[0].flags == ["meter_timeout"] and r.read()[0].method == "unavailable"
    assert r.requests == 4 and calls[0] == (["/usr/sbin/ipmi-dcmi", "--get-system-power-statistics"], 3.0)


def test_dcmi_network_argv_uses_a_password_file_never_argv_secrets():
    argv = ipmi_dcmi.tool_argv("ipmitool", "/usr/bin/ipmitool", "10.0.0.9", "admin", "/etc/slurm-energy/ipmi.pw")
    assert argv == ["/usr/bin/ipmitool", "-I", "lanplus", "-H", "10.0.0.9", "-U", "admin",
                    "-f", "/etc/slurm-energy/ipmi.pw", "dcmi", "power", "reading"]
    with pytest.raises(ValueError, match="tool: ipmitool"):
        ipmi_dcmi.tool_argv("freeipmi", "/usr/sbin/ipmi-dcmi", "10.0.0.9", "admin", "/x")


# ---- Slurm acct_gather_energy ----

def test_scontrol_node_energy():
    # the shape of `scontrol --json show node` (slurm's openapi v0.0.40 node "energy" object)
    text = ('{"nodes": [{"name": "n1", "energy": {"average_watts": 250, "base_consumed_energy": 0, '
            '"consumed_energy": 7200000, "current_watts": {"set": true, "infinite": false, "number": 260}, '
            '"previous_consumed_energy": 0, "last_collected": 1700000000}}]}')
    assert node_meter.parse_scontrol_node_energy(text) == (7_200_000.0, 260.0)
    none = '{"nodes": [{"name": "n1", "energy": {"consumed_energy": 0, "current_watts": 0}}]}'
    assert node_meter.parse_scontrol_node_energy(none) == (None, None)  # not collected: never 0 J
    r = node_meter.SlurmNodeEnergyReader("n1", runner=lambda argv, t: text).read()[0]
    assert r.method == "counter" and r.energy_uj == 7_200_000_000_000 and r.power_w == 260.0


# ---- a meter that lies ----

def _p(w: float) -> Reading:
    return Reading("node", "m", "power_integration", power_w=w)


@pytest.mark.parametrize("w", [0.0, 65535.0])
def test_zero_and_all_ones_are_implausible(w):
    r = node_meter.MeterCheck().check(0.0, _p(w))
    assert r.method == "unavailable" and r.flags == ["meter_implausible"]


def test_frozen_reading_and_counter_reset():
    c = node_meter.MeterCheck(frozen_after_s=60.0)
    assert c.check(0.0, _p(321.0)).method == "power_integration"
    assert c.check(50.0, _p(321.0)).method == "power_integration"  # 50 s unchanged: not yet
    frozen = c.check(60.0, _p(321.0))
    assert frozen.method == "unavailable" and frozen.flags == ["meter_frozen"]
    assert c.check(70.0, _p(322.0)).flags == []  # moved again
    e = [Reading("node", "pm", "counter", energy_uj=v) for v in (5_000_000, 4_000_000)]
    assert c.check(0.0, e[0]).flags == []
    assert c.check(10.0, e[1]).flags == ["meter_counter_reset"]


def test_inactive_dcmi_power_is_not_believed():
    r = Reading("node", "ipmi-dcmi", "power_integration", power_w=319.0, flags=["meter_inactive"])
    assert node_meter.MeterCheck().check(0.0, r).method == "unavailable"

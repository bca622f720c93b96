"""The node meter: which source measures the whole node, and whether its readings can be believed.

Sources (``node_meter.source`` in site.yaml; docs/NODE_METER.md):

* ``acpi_power_meter`` -- hwmon ACPI power meters (:func:`~slurm_energy.sampling.readers.hwmon_power.node_meters`,
  read by the one :class:`~slurm_energy.sampling.readers.hwmon_power.HwmonPowerReader`);
* ``pm_counters`` -- HPE/Cray (:mod:`~slurm_energy.sampling.readers.pm_counters`);
* ``ipmi_dcmi`` -- DCMI Get Power Reading through ipmi-dcmi/ipmitool (:mod:`~slurm_energy.sampling.readers.ipmi_dcmi`);
* ``redfish`` -- the BMC's Redfish chassis power (:mod:`~slurm_energy.sampling.readers.redfish`);
* ``slurm`` -- Slurm's own node energy (acct_gather_energy) through ``scontrol --json show node``:
  ``energy.consumed_energy`` (J, a counter) and ``energy.current_watts``;
* ``auto`` -- the first in-band one found: ACPI power meter, pm_counters, DCMI through /dev/ipmi0.
  Never a network BMC (Redfish, lanplus) that site.yaml does not name.

:class:`MeterCheck` judges successive readings: 0 W or 65535 W and above (a 16-bit sensor's
all-ones) are ``meter_implausible``; a power unchanged for ``frozen_after_s`` is ``meter_frozen``;
an energy counter that goes back is ``meter_counter_reset``. A flagged reading is kept (with its
flags) but counts as ``unavailable``: the rest of the node falls back to "not metered" there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading
from slurm_energy.slurmpaths import client_path

#: DCMI and most BMC power sensors are 16-bit: all ones is "no reading", never 65.5 kW.
IMPLAUSIBLE_W = 65535.0
DEV_IPMI = ("/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0")


def parse_scontrol_node_energy(text: str) -> tuple[float | None, float | None]:
    """``(consumed_energy_j, current_watts)`` of the one node in ``scontrol --json show node NAME``.
    Slurm answers 0 for both where no acct_gather_energy plugin runs: read as None (never 0 W)."""
    try:
        nodes = json.loads(text).get("nodes") or []
        e = nodes[0].get("energy") or {}
    except (ValueError, AttributeError, IndexError):
        return None, None

    def num(v: Any) -> float | None:
        if isinstance(v, dict):  # Slurm >= 23.11: {"set": true, "infinite": false, "number": N}
            v = v.get("number") if v.get("set", True) else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    return num(e.get("consumed_energy")), num(e.get("current_watts"))


SCONTROL = client_path("scontrol")


class SlurmNodeEnergyReader(Reader):
    """Slurm's node energy (acct_gather_energy) as a counter (J -> uJ). Run only by the per-node
    meter process or after the job, never by a Prolog/Epilog (they never call scontrol)."""

    name = "slurm-node-energy"
    device_class = "node"

    def __init__(self, node: str, scontrol: str = SCONTROL,
                 runner: Callable[[Sequence[str], float], str] | None = None, timeout_s: float = 10.0):
        self.node, self.scontrol, self.timeout_s = node, scontrol, timeout_s
        self._run = runner or (lambda argv, t: subprocess.run(list(argv), capture_output=True, text=True,
                                                              timeout=t, check=True).stdout)
        self.requests = 0

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic("node", "slurm", model="Slurm acct_gather_energy", extra={
            "node": self.node, "covers": "whole node as Slurm's energy plugin measures it"})]

    def read(self) -> list[Reading]:
        self.requests += 1
        try:
            j, w = parse_scontrol_node_energy(self._run([self.scontrol, "--json", "show", "node", self.node],
                                                        self.timeout_s))
        except (OSError, subprocess.SubprocessError):
            return [Reading("node", "slurm", "unavailable", flags=["meter_error"])]
        if j is None:
            return [Reading("node", "slurm", "unavailable", flags=["meter_not_collected"])]
        return [Reading("node", "slurm", "counter", energy_uj=round(j * 1e6), power_w=w,
                        energy_resolution_uj=1_000_000)]


class MeterCheck:
    """Flags readings that lie (see the module's docstring); keeps the previous one per device."""

    def __init__(self, frozen_after_s: float = 300.0):
        self.frozen_after_s = frozen_after_s
        self._since: dict[str, tuple[float, float]] = {}  # device -> (power, t it was first seen)
        self._energy: dict[str, int] = {}

    def check(self, t: float, r: Reading) -> Reading:
        """``r`` with flags added; a lying one becomes ``unavailable`` (its values kept for the record)."""
        flags = list(r.flags)
        bad = False
        if r.power_w is not None:
            if r.power_w <= 0 or r.power_w >= IMPLAUSIBLE_W:
                flags.append("meter_implausible")
                bad = True
            else:
                prev = self._since.get(r.device_id)
                if prev is None or prev[0] != r.power_w:
                    self._since[r.device_id] = (r.power_w, t)
                elif t - prev[1] >= self.frozen_after_s:
                    flags.append("meter_frozen")
                    bad = True
        if r.energy_uj is not None:
            prev_e = self._energy.get(r.device_id)
            if prev_e is not None and r.energy_uj < prev_e:
                flags.append("meter_counter_reset")
            self._energy[r.device_id] = r.energy_uj
        if any(f in ("meter_stale", "meter_inactive") for f in flags):
            bad = True
        if bad:
            return replace(r, method="unavailable", flags=flags)
        return replace(r, flags=flags) if flags != r.flags else r


def _dcmi_tool(pref: str) -> tuple[str, str] | None:
    for tool, exe in (("freeipmi", "ipmi-dcmi"), ("ipmitool", "ipmitool")):
        if pref in ("auto", tool):
            path = shutil.which(exe, path="/usr/sbin:/usr/bin:/sbin:/bin")
            if path:
                return tool, path
    return None


#: reader name -> the ``node_meter.source`` it is (what a meter row and a record's method name)
SOURCE_OF = {"hwmon-power": "acpi_power_meter", "pm_counters": "pm_counters", "ipmi-dcmi": "ipmi_dcmi",
             "redfish": "redfish", "slurm-node-energy": "slurm"}


def source_name(reader: Reader) -> str:
    """The ``node_meter.source`` name of an open node meter (``auto`` resolved)."""
    return SOURCE_OF.get(reader.name, reader.name)


def _acpi(cfg: Any, node: str, hwmon_root: str, dev_ipmi: Sequence[str]) -> tuple[Reader | None, str]:
    from slurm_energy.sampling.readers import hwmon_power

    devs = hwmon_power.node_meters(hwmon_power.find_power_meters(hwmon_root))
    if devs:
        return hwmon_power.HwmonPowerReader(devs[:1]), f"node meter: ACPI power meter {devs[0].meter.key}"
    return None, f"node meter: no ACPI power meter under {hwmon_root}"


def _pm(cfg: Any, node: str, hwmon_root: str, dev_ipmi: Sequence[str]) -> tuple[Reader | None, str]:
    from slurm_energy.sampling.readers import pm_counters

    if pm_counters.present(cfg.pm_counters_root):
        return pm_counters.PmCountersReader(cfg.pm_counters_root), f"node meter: pm_counters {cfg.pm_counters_root}"
    return None, f"node meter: no {cfg.pm_counters_root}/energy"


def _dcmi_in_band(cfg: Any, node: str, hwmon_root: str, dev_ipmi: Sequence[str]) -> tuple[Reader | None, str]:
    return _dcmi(cfg, dev_ipmi, network=False)


def _dcmi(cfg: Any, dev_ipmi: Sequence[str], network: bool) -> tuple[Reader | None, str]:
    from slurm_energy.sampling.readers import ipmi_dcmi, redfish

    d = cfg.ipmi_dcmi
    host = d.host if network else ""
    if not host and not any(os.path.exists(p) for p in dev_ipmi):
        return None, "node meter: no /dev/ipmi0 (load ipmi_si and ipmi_devintf) and no node_meter.ipmi_dcmi.host"
    found = _dcmi_tool("ipmitool" if host else d.tool)
    if not found:
        return None, "node meter: neither ipmi-dcmi (freeipmi-tools) nor ipmitool is installed"
    if host:
        redfish.read_credentials_mode_only(d.password_file, "node_meter.ipmi_dcmi.password_file")
    argv = ipmi_dcmi.tool_argv(found[0], found[1], host, d.user, d.password_file, getattr(d, "port", 623),
                                getattr(d, "cipher_suite", None))
    return ipmi_dcmi.DcmiReader(argv, timeout_s=d.timeout_s), f"node meter: IPMI DCMI via {found[1]} ({host or 'in-band'})"


def _redfish(cfg: Any, node: str, hwmon_root: str, dev_ipmi: Sequence[str]) -> tuple[Reader | None, str]:
    from slurm_energy.sampling.readers import redfish

    rf = cfg.redfish
    user, pw = redfish.read_credentials(rf.credentials_file)
    verify: bool | str = False if rf.insecure else (rf.ca_file or True)
    return (redfish.RedfishReader(rf.url, redfish.make_session(user, pw, verify), rf.chassis, rf.timeout_s),
            f"node meter: Redfish {rf.url}")


def _slurm(cfg: Any, node: str, hwmon_root: str, dev_ipmi: Sequence[str]) -> tuple[Reader | None, str]:
    return SlurmNodeEnergyReader(node), "node meter: Slurm acct_gather_energy (scontrol)"


def open_node_meter(cfg: Any, node: str = "", hwmon_root: str | None = None,
                    dev_ipmi: Sequence[str] = DEV_IPMI) -> tuple[Reader | None, str]:
    """The node meter ``cfg`` (site.yaml's ``node_meter``) chooses, and a note saying which and why.
    ``(None, note)`` where none (``source: none``, nothing found by ``auto``, a named source absent).
    Raises ValueError (a :class:`~slurm_energy.sampling.readers.redfish.CredentialsError`) for a
    secret file that cannot be used, naming the field and the fix."""
    src = cfg.source
    root = str(hwmon_root or getattr(cfg, "acpi_root", None) or "/sys/class/hwmon")
    if src == "none":
        return None, "node meter: none (node_meter.source: none)"
    if src == "auto":  # in-band only: never a network BMC
        for probe in (_acpi, _pm, _dcmi_in_band):
            reader, note = probe(cfg, node, root, dev_ipmi)
            if reader is not None:
                return reader, note
        return None, "node meter: none found in-band (ACPI power meter, pm_counters, /dev/ipmi0)"
    if src == "ipmi_dcmi":
        return _dcmi(cfg, dev_ipmi, network=True)
    pick = {"acpi_power_meter": _acpi, "pm_counters": _pm, "redfish": _redfish, "slurm": _slurm}[src]
    return pick(cfg, node, root, dev_ipmi)

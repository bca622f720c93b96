"""hwmon power meters: one reader for the power a platform's firmware or SoC reports through hwmon.

Two kinds of files, both microwatts (Documentation/hwmon/sysfs-interface.rst, ``power[1-*]_average``
and ``power[1-*]_input``: "Unit: microWatt"):

* ACPI power meters (drivers/hwmon/acpi_power_meter.c, ACPI ``ACPI000D`` devices; hwmon ``name``
  ``power_meter``): ``power1_average`` = the firmware's ``_PMM`` in mW x 1000, averaged over
  ``power1_average_interval`` (ms), labelled by ``power1_oem_info`` (the ``_PMC`` OEM string). The
  attributes sit in ``hwmonN/device/`` (the ACPI device) on older kernels and in ``hwmonN/`` on newer
  ones; both are looked in. A firmware that cannot measure returns ``0xFFFFFFFF`` mW (ACPI
  ``_PMM``; NVIDIA's TH500 tables return ``PWR_METER_ERR_RETURN 0xFFFFFFFF`` on a failed or invalid
  telemetry read): kernels with the ``UNKNOWN_POWER`` check in ``show_power`` answer ``ENODATA``, older
  ones print 4294967295000 uW. Both are read as *unavailable*, never as power.
* Labelled power rails (``power<N>_input`` with ``power<N>_label``): Ampere/APM X-Gene SoCs
  (drivers/hwmon/xgene-hwmon.c, hwmon ``name`` ``apm_xgene``: ``power1_label`` "CPU power",
  ``power2_label`` "IO power", inputs mW x 1000); Ampere Altra's SMpro co-processor
  (drivers/hwmon/smpro-hwmon.c, hwmon ``name`` ``smpro``, Documentation/hwmon/smpro-hwmon.rst:
  ``power1`` "power1 CORE VRD", ``power2`` "power2 SoC", ``power3``/``power4`` "power3 DIMM VRD1" /
  "power4 DIMM VRD2", ``power5`` "power5 RCA VRD", uW). SMpro answers on the BMC's I2C bus ("Altra
  SoC BMC Interface Specification"): a host sees it only where the SMpro is wired to it; where it
  is, its core, SoC and RCA rails measure the CPU and its DIMM rails the memory.

:func:`find_power_meters` lists them (whole node: a node-meter feature reads the same list);
:func:`cpu_meters` picks what measures the CPU sockets, :func:`memory_meters` the memory;
:class:`HwmonPowerReader` reads the chosen meters (method ``power_integration``), each reading
labelled by what its meter covers.

NVIDIA Grace (TH500) power meters, one set per socket, labelled ``<Kind> Power Socket <N>``
(NVIDIA Grace Performance Tuning Guide, "Power Telemetry"; edk2-nvidia's TH500 SSDT
``BpmpSsdtSocket*_th500.asl`` declares them): ``Module`` (the whole superchip module: GPU, HBM,
Grace, LPDDR5X, regulator loss; GH200/GB200 only), ``Grace`` (the Grace socket: CPU and SoC rails,
LPDDR5X memory, regulator loss), ``CPU`` (CPU rail), ``SysIO`` (SoC rail). They nest: Module ⊃ GPU +
Grace, Grace ⊃ CPU + SysIO. The CPU is charged the Grace meter per socket (the CPU rail where no
Grace meter exists); the Module meter is never read for the CPU, and never added to a GPU (NVML
measures the GPU).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from slurm_energy.sampling.files import KeptFiles
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurm_energy.sampling.files import FileSource

DEFAULT_ROOT = "/sys/class/hwmon"

#: ACPI _PMM "measurement unknown" (0xFFFFFFFF mW) as an older acpi_power_meter prints it (x 1000).
UNKNOWN_POWER_UW = 0xFFFFFFFF * 1000

_GRACE_RE = re.compile(r"^(Module|Grace|CPU|SysIO) Power Socket (\d+)$")

#: What each Grace meter covers (NVIDIA Grace Performance Tuning Guide, Power Telemetry).
GRACE_COVERS = {
    "Module": "superchip module: GPU, HBM, Grace socket, LPDDR5X, regulator loss",
    "Grace": "Grace socket: CPU and SoC rails, LPDDR5X memory, regulator loss",
    "CPU": "Grace CPU rail only (no SoC rail, no memory)",
    "SysIO": "Grace SoC (SysIO) rail only",
}


#: Altra SMpro rails (smpro-hwmon.c labels): the CPU's (disjoint regulators) and the memory's.
SMPRO_CPU_RAILS = {"power1 CORE VRD": "core", "power2 SoC": "soc", "power5 RCA VRD": "rca"}
SMPRO_DIMM_RAILS = ("power3 DIMM VRD1", "power4 DIMM VRD2")


@dataclass(frozen=True)
class PowerMeter:
    """One hwmon power file: ``key`` ``hwmon3/power1``; ``path`` the file read each sample
    (``power1_average`` or ``power1_input``, uW); ``driver`` the hwmon ``name``; ``label`` the
    ``power1_oem_info`` or ``power1_label`` text; ``interval_ms`` the averaging interval (ACPI)."""

    key: str
    path: str
    driver: str
    label: str
    interval_ms: int | None = None


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def find_power_meters(root: str = DEFAULT_ROOT) -> list[PowerMeter]:
    """Every hwmon power meter under ``root`` (``/sys/class/hwmon``), in hwmon number order.
    Empty where ``root`` is absent."""
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    out: list[PowerMeter] = []
    for e in sorted((e for e in entries if re.fullmatch(r"hwmon\d+", e)), key=lambda e: int(e[5:])):
        base = os.path.join(root, e)
        driver = _text(os.path.join(base, "name")) or ""
        for d in (base, os.path.join(base, "device")):
            try:
                files = set(os.listdir(d))
            except OSError:
                continue
            for f in sorted(files):
                m = re.fullmatch(r"power(\d+)_(average|input)", f)
                if not m:
                    continue
                n = m.group(1)
                if m.group(2) == "input" and f"power{n}_average" in files:
                    continue  # one meter per channel: the average where both exist
                label = _text(os.path.join(d, f"power{n}_oem_info")) or _text(os.path.join(d, f"power{n}_label")) or ""
                ival = _text(os.path.join(d, f"power{n}_average_interval"))
                out.append(PowerMeter(f"{e}/power{n}", os.path.join(d, f), driver, label,
                                      int(ival) if ival and ival.isdigit() else None))
            if any(m.key.startswith(e + "/") for m in out):
                break  # found in hwmonN/: not again through device/
    return out


@dataclass(frozen=True)
class MeteredDevice:
    """A device measured by one meter: ``device_id`` (e.g. ``grace-socket-0``), what it ``covers``."""

    meter: PowerMeter
    device_class: str
    device_id: str
    covers: str


def grace_kind(label: str) -> tuple[str, int] | None:
    """``("Grace", 1)`` for ``"Grace Power Socket 1"``; None for any other label."""
    m = _GRACE_RE.match(label)
    return (m.group(1), int(m.group(2))) if m else None


def cpu_meters(meters: list[PowerMeter]) -> list[MeteredDevice]:
    """The meters that measure this node's CPU sockets, one device each, never two nested ones:
    per Grace socket its ``Grace`` meter, else its ``CPU`` rail meter (never ``Module``, which holds
    the GPU); per X-Gene/Altra SoC its ``CPU power`` and ``IO power`` rails (disjoint). Empty when
    none measures a CPU (the TDP model stays)."""
    out: list[MeteredDevice] = []
    grace: dict[int, dict[str, PowerMeter]] = {}
    for m in meters:
        g = grace_kind(m.label) if m.driver in ("power_meter", "") else None
        if g is not None:
            grace.setdefault(g[1], {})[g[0]] = m
        elif m.driver == "apm_xgene" and m.label in ("CPU power", "IO power"):
            rail = "cpu" if m.label == "CPU power" else "io"
            out.append(MeteredDevice(m, "cpu", f"xgene-{m.key.split('/')[0]}-{rail}",
                                     f"SoC {m.label} rail (xgene-hwmon {m.label!r})"))
        elif m.driver == "smpro" and m.label in SMPRO_CPU_RAILS:
            out.append(MeteredDevice(m, "cpu", f"smpro-{m.key.split('/')[0]}-{SMPRO_CPU_RAILS[m.label]}",
                                     f"Altra {SMPRO_CPU_RAILS[m.label]} rail (smpro-hwmon {m.label!r})"))
    for sock in sorted(grace):
        kinds = grace[sock]
        for kind in ("Grace", "CPU"):
            if kind in kinds:
                label = f"{kind} Power Socket {sock}"
                out.append(MeteredDevice(kinds[kind], "cpu", f"{kind.lower()}-socket-{sock}",
                                         f"{GRACE_COVERS[kind]} (ACPI power meter {label!r})"))
                break
    return out


def memory_meters(meters: list[PowerMeter]) -> list[MeteredDevice]:
    """The meters that measure this node's memory, one ``ram`` device each: Altra SMpro DIMM rails."""
    return [MeteredDevice(m, "ram", f"smpro-{m.key.split('/')[0]}-dimm{m.label[-1]}",
                          f"Altra DIMM rail (smpro-hwmon {m.label!r})")
            for m in meters if m.driver == "smpro" and m.label in SMPRO_DIMM_RAILS]


def covers_memory(devices: list[MeteredDevice]) -> bool:
    """True when the chosen meters measure the node's memory: Grace socket meters (LPDDR5X inside)
    for every socket, or memory rails of their own (SMpro DIMM rails)."""
    cpu = [d for d in devices if d.device_class == "cpu"]
    grace = bool(cpu) and all(d.device_id.startswith("grace-socket-") for d in cpu)
    return grace or any(d.device_class == "ram" for d in devices)


class HwmonPowerReader(Reader):
    """Reads chosen hwmon power meters (``power_integration``, W), each labelled by what it covers.

    Args:
        devices: the meters to read (:func:`cpu_meters`, or a node meter).
        files: where the power files are read at each :meth:`read` (default: kept descriptors).
    """

    name = "hwmon-power"

    def __init__(self, devices: list[MeteredDevice], files: FileSource | None = None):
        self._devices = list(devices)
        self.device_class = "cpu" if any(d.device_class == "cpu" for d in self._devices) else (
            self._devices[0].device_class if self._devices else "cpu")
        self._kept: KeptFiles | None = None
        if files is None:
            files = self._kept = KeptFiles()
        self.files: FileSource = files

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic(d.device_class, d.device_id, model=d.meter.label, extra={
            "meter": d.meter.key, "meter_path": d.meter.path, "driver": d.meter.driver, "covers": d.covers,
            "average_interval_ms": d.meter.interval_ms}) for d in self._devices]

    def read(self) -> list[Reading]:
        """One reading per meter. Never raises: a firmware error value, ``ENODATA`` or a failed
        read gives ``unavailable`` with ``meter_error_value`` / ``meter_no_data`` / ``read_error``."""
        out: list[Reading] = []
        for d in self._devices:
            try:
                uw = int(self.files.read(d.meter.path, 64))
            except OSError as e:
                fl = "meter_no_data" if e.errno == errno.ENODATA else "read_error"
                out.append(Reading(d.device_class, d.device_id, "unavailable", flags=[fl]))
                continue
            except ValueError:
                out.append(Reading(d.device_class, d.device_id, "unavailable", flags=["read_error"]))
                continue
            if uw < 0 or uw >= UNKNOWN_POWER_UW:
                out.append(Reading(d.device_class, d.device_id, "unavailable", flags=["meter_error_value"]))
                continue
            out.append(Reading(d.device_class, d.device_id, "power_integration", power_w=uw / 1e6))
        return out

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()


def node_meters(meters: list[PowerMeter]) -> list[MeteredDevice]:
    """The ACPI power meters that measure the whole node (Documentation/hwmon/acpi_power_meter.rst:
    ``power1_average`` of an ``ACPI000D`` device, hwmon ``name`` ``power_meter``), one device each.
    Grace's per-socket meters (``<Kind> Power Socket <N>``) measure parts of a node, never the node:
    they are left out (:func:`cpu_meters` reads them)."""
    return [MeteredDevice(m, "node", f"acpi-power-meter-{m.key.split('/')[0]}",
                          f"whole node (ACPI power meter{' ' + repr(m.label) if m.label else ''})")
            for m in meters if m.driver == "power_meter" and grace_kind(m.label) is None]

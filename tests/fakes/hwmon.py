"""Fake hwmon power meters and arm64 CPU topology, in the drivers' real layouts (no Grace, no Altra here).

Where every name and value comes from:

* ACPI power meter (drivers/hwmon/acpi_power_meter.c): hwmon ``name`` "power_meter"; the meter's
  attributes on the ACPI device, ``hwmonN/device/``: ``power1_average`` = ``_PMM`` (mW) x 1000, in uW
  ("%llu\\n" of ``resource->power * 1000``), ``power1_average_interval`` (ms), ``power1_oem_info``
  (the ``_PMC`` package's OEM string). The NVIDIA Grace Performance Tuning Guide ("Power Telemetry")
  reads them as ``/sys/class/hwmon/hwmon*/device/power1_average`` and ``.../power1_oem_info``.
* Grace's OEM strings and intervals: edk2-nvidia TH500 SSDT ``BpmpSsdtSocket2_th500.asl``, the
  ``_PMC`` packages ``"Module Power Socket 2"``, ``"Grace Power Socket 2"`` (also CPU, SysIO),
  averaging interval ``PWR_METER_MEASUREMENT_SAMPLING_TIME_50MS``; on a failed or invalid
  telemetry read ``_PMM`` returns ``PWR_METER_ERR_RETURN`` = 0xFFFFFFFF (AcpiPowerMeter.h), which an
  acpi_power_meter without the ``UNKNOWN_POWER`` check prints as 4294967295000 uW and one with it
  answers ENODATA.
* X-Gene / Ampere (drivers/hwmon/xgene-hwmon.c): hwmon ``name`` "apm_xgene" (an Ampere Altra
  workstation, System76 Thelio Astra, lists ``/sys/class/hwmon/hwmon1: apm_xgene`` in its fan-daemon
  notes; registered on the
  hwmon device itself, files in ``hwmonN/``), ``power1_label`` "CPU power", ``power2_label`` "IO
  power", ``power1_input``/``power2_input`` = mW x 1000 (uW), ``temp1_label`` "SoC Temperature".
* Ampere Altra SMpro (drivers/hwmon/smpro-hwmon.c, Documentation/hwmon/smpro-hwmon.rst): hwmon
  ``name`` "smpro", ``power1_input`` .. ``power5_input`` in uW labelled "power1 CORE VRD", "power2
  SoC", "power3 DIMM VRD1", "power4 DIMM VRD2", "power5 RCA VRD" (the rst's example: ``cat
  power5_input`` 19500000).
* arm64 topology: arch/arm64/kernel/cpuinfo.c prints no ``physical id``/``core id``/``model name``
  (``processor``, ``BogoMIPS``, ``Features``, ``CPU implementer``, ``CPU architecture``, ``CPU
  variant``, ``CPU part``, ``CPU revision``); sockets are ``/sys/devices/system/cpu/cpuN/topology/
  physical_package_id`` (Documentation/ABI/stable/sysfs-devices-system-cpu; from ACPI PPTT).
  ``CPU part 0xd4f`` = Neoverse V2 (Grace).
"""

from __future__ import annotations

import os

#: power1_average of a Grace meter whose firmware read failed (0xFFFFFFFF mW x 1000), uW.
FIRMWARE_ERROR_UW = 0xFFFFFFFF * 1000

GRACE_INTERVAL_MS = 50


def _w(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def acpi_power_meter(root, n: int, oem_info: str, average_uw: int, interval_ms: int = GRACE_INTERVAL_MS) -> str:
    """``root/hwmon<n>``: one ACPI power meter (attributes under ``device/``). Returns its directory."""
    d = os.path.join(str(root), f"hwmon{n}")
    _w(os.path.join(d, "name"), "power_meter")
    _w(os.path.join(d, "device", "power1_average"), str(average_uw))
    _w(os.path.join(d, "device", "power1_average_interval"), str(interval_ms))
    _w(os.path.join(d, "device", "power1_oem_info"), oem_info)
    _w(os.path.join(d, "device", "power1_model_number"), "")
    return d


def grace_socket(root, first_hwmon: int, socket: int, uw: dict[str, int]) -> None:
    """The meters of one Grace socket, ``uw`` = {"Module"|"Grace"|"CPU"|"SysIO": power1_average uW}
    (a Grace CPU superchip has no Module meter: leave it out)."""
    for i, (kind, v) in enumerate(uw.items()):
        acpi_power_meter(root, first_hwmon + i, f"{kind} Power Socket {socket}", v)


def set_average(root, n: int, uw: int) -> None:
    _w(os.path.join(str(root), f"hwmon{n}", "device", "power1_average"), str(uw))


def xgene(root, n: int, cpu_uw: int, io_uw: int) -> str:
    """``root/hwmon<n>``: an X-Gene/Ampere SoC monitor (xgene-hwmon)."""
    d = os.path.join(str(root), f"hwmon{n}")
    _w(os.path.join(d, "name"), "apm_xgene")
    _w(os.path.join(d, "power1_label"), "CPU power")
    _w(os.path.join(d, "power1_input"), str(cpu_uw))
    _w(os.path.join(d, "power2_label"), "IO power")
    _w(os.path.join(d, "power2_input"), str(io_uw))
    _w(os.path.join(d, "temp1_label"), "SoC Temperature")
    _w(os.path.join(d, "temp1_input"), "42000")
    return d


def arm64_node(root, sockets: int, cores_per_socket: int) -> tuple[str, str]:
    """An arm64 node: ``(cpuinfo path, sysfs cpu dir)``; CPU ``s * cores + c`` has package ``s``,
    core ``c`` (no SMT, as Grace and Altra)."""
    root = str(root)
    cpu_dir = os.path.join(root, "sys", "devices", "system", "cpu")
    lines = []
    for i in range(sockets * cores_per_socket):
        s, c = divmod(i, cores_per_socket)
        _w(os.path.join(cpu_dir, f"cpu{i}", "topology", "physical_package_id"), str(s))
        _w(os.path.join(cpu_dir, f"cpu{i}", "topology", "core_id"), str(c))
        lines.append(f"processor\t: {i}\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 "
                     f"atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve\n"
                     f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
                     f"CPU revision\t: 0\n\n")
    _w(os.path.join(cpu_dir, "online"), f"0-{sockets * cores_per_socket - 1}")
    info = os.path.join(root, "proc", "cpuinfo")
    _w(info, "".join(lines))
    return info, cpu_dir


SMPRO_LABELS = ("power1 CORE VRD", "power2 SoC", "power3 DIMM VRD1", "power4 DIMM VRD2", "power5 RCA VRD")


def smpro(root, n: int, uw: tuple[int, int, int, int, int]) -> str:
    """``root/hwmon<n>``: an Altra SMpro monitor, ``uw`` = power1..power5 inputs (uW)."""
    d = os.path.join(str(root), f"hwmon{n}")
    _w(os.path.join(d, "name"), "smpro")
    for i, (label, v) in enumerate(zip(SMPRO_LABELS, uw), start=1):
        _w(os.path.join(d, f"power{i}_label"), label)
        _w(os.path.join(d, f"power{i}_input"), str(v))
    return d

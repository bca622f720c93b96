"""Device information collector: static facts about the node (CPU, GPUs, RAM, OS, Python).

Read once per job by the sampler and kept in the node summary for the report; nothing here is
sampled.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import asdict

from slurm_energy.core import DeviceStatic

# psutil and platform are imported only by the fallbacks below: the Prolog writes this inventory,
# and importing them cost it more than reading /proc.


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU model name as the OS reports it ("Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz"); "" if unknown."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or ""


def cpu_family_model(cpuinfo: str = "/proc/cpuinfo") -> tuple[int, int] | None:
    """x86 ``(cpu family, model)`` of the first CPU in /proc/cpuinfo (decimal there), None elsewhere
    (arm64 has ``CPU implementer``/``CPU part`` instead)."""
    fam = model = None
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "cpu family" and fam is None:
                    fam = int(v)
                elif k == "model" and model is None:
                    model = int(v)
                elif k == "processor" and fam is not None:
                    break
    except (OSError, ValueError):
        return None
    return (fam, model) if fam is not None and model is not None else None


def cpu_topology(cpuinfo: str = "/proc/cpuinfo", sysfs_cpu: str = "/sys/devices/system/cpu") -> tuple[int, int, int]:
    """(sockets, physical cores per socket, logical CPUs) from /proc/cpuinfo; at least 1 each.

    arm64's /proc/cpuinfo has no ``physical id`` or ``core id`` (arch/arm64/kernel/cpuinfo.c prints
    ``CPU implementer``, ``CPU part``...): there the sockets and cores come from sysfs topology,
    ``<sysfs_cpu>/cpuN/topology/physical_package_id`` and ``core_id`` (Documentation/ABI/stable/
    sysfs-devices-system-cpu; ACPI PPTT sockets on servers), so a 4-socket ARM node counts 4."""
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    logical = 0
    phys = "0"
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "processor":
                    logical += 1
                elif k == "physical id":
                    phys = v
                    sockets.add(v)
                elif k == "core id":
                    cores.add((phys, v))
    except OSError:
        pass
    logical = logical or (os.cpu_count() or 1)
    if not sockets:
        topo = _sysfs_topology(sysfs_cpu)
        if topo is not None:
            pkgs, pairs, n_cpu = topo
            return len(pkgs), max(1, len(pairs) // len(pkgs)), max(logical, n_cpu)
    n_sockets = max(1, len(sockets))
    if not cores:  # no "core id" lines (some VMs, non-x86): psutil counts the sysfs core ids
        import psutil

        n_cores = psutil.cpu_count(logical=False) or logical
    else:
        n_cores = len(cores)
    return n_sockets, max(1, n_cores // n_sockets), logical


def _sysfs_topology(sysfs_cpu: str) -> tuple[set[str], set[tuple[str, str]], int] | None:
    """(package ids, (package, core) pairs, CPUs) from sysfs topology; None where no CPU has a
    package id >= 0 (a kernel without topology, or firmware that gives none: -1)."""
    import re

    pkgs: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    n = 0
    try:
        names = [e for e in os.listdir(sysfs_cpu) if re.fullmatch(r"cpu\d+", e)]
    except OSError:
        return None
    for e in names:
        d = os.path.join(sysfs_cpu, e, "topology")
        try:
            with open(os.path.join(d, "physical_package_id"), encoding="ascii") as f:
                pkg = f.read().strip()
        except OSError:
            continue
        if pkg.startswith("-"):
            continue
        n += 1
        pkgs.add(pkg)
        try:
            with open(os.path.join(d, "core_id"), encoding="ascii") as f:
                pairs.add((pkg, f.read().strip()))
        except OSError:
            pairs.add((pkg, e))
    return (pkgs, pairs, n) if pkgs else None


def os_name() -> str:
    """PRETTY_NAME from /etc/os-release, else platform's system + release."""
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    u = os.uname()
    return f"{u.sysname} {u.release}"  # platform.system() / platform.release()


def ram_total_bytes(meminfo: str = "/proc/meminfo") -> int:
    """The node's RAM (MemTotal, bytes; psutil's ``virtual_memory().total``)."""
    try:
        with open(meminfo, "rb") as f:
            for line in f:
                if line.startswith(b"MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import psutil

    return int(psutil.virtual_memory().total)


def collect_static(devices: Iterable[DeviceStatic] = ()) -> dict:
    """The node's static facts as a JSON-able dict.

    Keys: host, cpu_model, sockets, cores_per_socket, logical_cpus, ram_total_bytes, os, kernel,
    python, devices (list of DeviceStatic dicts: model, count, rated_power_w (W) and its source).
    """
    sockets, cps, logical = cpu_topology()
    return {
        "host": os.uname().nodename,  # what socket.gethostname() returns on Linux
        "cpu_model": cpu_model(),
        "sockets": sockets,
        "cores_per_socket": cps,
        "logical_cpus": logical,
        "ram_total_bytes": ram_total_bytes(),
        "os": os_name(),
        "kernel": os.uname().release,  # platform.release()
        "python": sys.version.split()[0],  # platform.python_version(), e.g. "3.11.7"
        "devices": [asdict(d) for d in devices],
        "pid": os.getpid(),
    }

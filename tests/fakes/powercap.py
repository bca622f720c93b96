"""Build fake powercap sysfs trees laid out like the kernel's.

Real layout: ``/sys/devices/virtual/powercap/<control type>/<zone>/<sub zone>`` and the flat class
directory ``/sys/class/powercap/<zone>`` whose entries are symlinks into that tree.
:func:`build_tree` makes both under ``tmp``; pass its return value (the class directory) as the
reader's ``root``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Zone:
    """One fake zone: ``key`` like ``intel-rapl:0:1``; attributes written as files."""

    key: str
    name: str | None
    energy_uj: int | None = 0
    max_energy_range_uj: int | None = 262_143_328_850
    max_power_uw: dict = field(default_factory=dict)  # constraint index -> uW


def build_tree(tmp, zones: list[Zone]) -> str:
    """Write ``zones`` under ``tmp``; returns the class directory path (reader root)."""
    tmp = str(tmp)
    devroot = os.path.join(tmp, "devices", "virtual", "powercap")
    cls = os.path.join(tmp, "class", "powercap")
    os.makedirs(cls, exist_ok=True)
    for z in zones:
        ctype, idx = z.key.split(":", 1)
        parts = idx.split(":")
        rel = [ctype] + [f"{ctype}:{':'.join(parts[: i + 1])}" for i in range(len(parts))]
        d = os.path.join(devroot, *rel)
        os.makedirs(d, exist_ok=True)
        if z.name is not None:
            _w(d, "name", z.name)
        if z.energy_uj is not None:
            _w(d, "energy_uj", str(z.energy_uj))
        if z.max_energy_range_uj is not None:
            _w(d, "max_energy_range_uj", str(z.max_energy_range_uj))
        for i, uw in z.max_power_uw.items():
            _w(d, f"constraint_{i}_max_power_uw", str(uw))
        link = os.path.join(cls, z.key)
        if not os.path.lexists(link):
            os.symlink(d, link)
        ct_link = os.path.join(cls, ctype)
        if not os.path.lexists(ct_link):
            os.symlink(os.path.join(devroot, ctype), ct_link)
    return cls


def zone_dir(root: str, key: str) -> str:
    """The real directory of zone ``key`` under a tree made by :func:`build_tree`."""
    return os.path.realpath(os.path.join(root, key))


def set_energy(root: str, key: str, energy_uj: int) -> None:
    """Advance (or wrap) a fake zone's counter."""
    _w(zone_dir(root, key), "energy_uj", str(energy_uj))


def _w(d: str, fname: str, text: str) -> None:
    with open(os.path.join(d, fname), "w") as f:
        f.write(text + "\n")


#: AMD ``max_energy_range_uj``: 0xFFFFFFFF x the kernel's energy unit for ESU 16 (1e9 / 65536 =
#: 15258 integer, intel_rapl_common.c rapl_unit_xlate) / 1000 = 65,532,610,987 uJ; as read on an
#: AMD EPYC 7543 (public fixtures quote it from /sys/class/powercap/intel-rapl:0/max_energy_range_uj).
AMD_RANGE_UJ = 65_532_610_987


def amd_zen4_per_ccd(socket_uj: list[int], ccds: int = 8) -> list[Zone]:
    """A 2-socket 8-CCD Zen 4 server under kernels 6.9-6.11, before linux 26096aed255f
    ("powercap/intel_rapl: Fix the energy-pkg event for AMD CPUs"), whose commit message lists its
    /sys/class/powercap: ``intel-rapl:0`` ... ``intel-rapl:f``, each with one sub-zone ``:0``.
    Zone ``i`` is CCD ``i % ccds`` of socket ``i // ccds``, named ``package-P-die-D`` (``rp->name``
    when topology_max_dies_per_package() > 1) and reads its socket's one package MSR
    (``socket_uj[P]``); the sub-zone is the core domain (AMD has package and core only). No
    constraint files: intel_rapl_common gives AMD no power limits."""
    zones = []
    for i in range(len(socket_uj) * ccds):
        p, d = divmod(i, ccds)
        zones.append(Zone(f"intel-rapl:{i:x}", f"package-{p}-die-{d}", energy_uj=socket_uj[p],
                          max_energy_range_uj=AMD_RANGE_UJ))
        zones.append(Zone(f"intel-rapl:{i:x}:0", "core", energy_uj=socket_uj[p] // 2, max_energy_range_uj=AMD_RANGE_UJ))
    return zones


def tpmi_two_sockets(pkg_uj: tuple[int, int], dram_uj: tuple[int, int], psys_uj: tuple[int, int]) -> list[Zone]:
    """A 2-socket TPMI Xeon (intel_rapl_tpmi.c: package, memory and system domains per socket,
    control type ``intel-rapl``). rapl_package_register_powercap registers the package zone, then
    the package's other domains in enum order (dram as the package's child, psys with ``parent =
    NULL``: a top-level zone), so psys sits between the packages: ``intel-rapl:0`` package-0,
    ``intel-rapl:0:0`` dram, ``intel-rapl:1`` psys, ``intel-rapl:2`` package-1, ``intel-rapl:2:0``
    dram, ``intel-rapl:3`` psys."""
    return [
        Zone("intel-rapl:0", "package-0", energy_uj=pkg_uj[0], max_power_uw={0: 350_000_000}),
        Zone("intel-rapl:0:0", "dram", energy_uj=dram_uj[0]),
        Zone("intel-rapl:1", "psys", energy_uj=psys_uj[0]),
        Zone("intel-rapl:2", "package-1", energy_uj=pkg_uj[1], max_power_uw={0: 350_000_000}),
        Zone("intel-rapl:2:0", "dram", energy_uj=dram_uj[1]),
        Zone("intel-rapl:3", "psys", energy_uj=psys_uj[1]),
    ]

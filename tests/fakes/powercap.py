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

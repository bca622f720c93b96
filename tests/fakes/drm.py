"""Fake DRM / hwmon / KFD sysfs trees in the drivers' real layouts (no AMD or Intel GPU here).

Shape (as on a real node; ``root`` stands for ``/sys``):

    root/devices/pci0000:00/0000:c1:00.0/           the PCI device (uevent, vendor, device, ...)
        hwmon/hwmon3/{name, power1_average, energy1_input, power1_cap, ...}
        drm/card0, drm/renderD128                   (not needed by the code; links below point here)
    root/class/drm/card0/device -> ../../../devices/pci0000:00/0000:c1:00.0
    root/class/drm/renderD128/device -> same
    root/class/kfd/kfd/topology/nodes/N/properties  (drm_render_minor, location_id, domain)

Partition render nodes of an AMD GPU in DPX/QPX/CPX mode link to a platform device
(``amdgpu_xcp.N``), not to the PCI device; only KFD says which card they belong to.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def _w(p: Path, v) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"{v}\n")


class FakeSysfs:
    """A fake ``/sys`` with ``drm_root`` and ``kfd_root`` to pass to the code under test."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.drm_root = self.root / "class" / "drm"
        self.kfd_root = self.root / "class" / "kfd" / "kfd" / "topology" / "nodes"
        self.drm_root.mkdir(parents=True, exist_ok=True)
        self.kfd_root.mkdir(parents=True, exist_ok=True)
        self._kfd_n = 0
        self._xcp = 0

    def _link(self, node: str, target: Path) -> None:
        d = self.drm_root / node
        d.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(target, d), d / "device")

    def _kfd(self, bdf: str, minor: int) -> None:
        dom, bus, devfn = bdf.split(":")
        dev, fn = devfn.split(".")
        loc = int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn, 16)
        if self._kfd_n == 0:  # node 0 is the CPU: no render minor
            _w(self.kfd_root / "0" / "properties", "cpu_cores_count 64\nsimd_count 0\ndrm_render_minor 0\n"
                                                 "location_id 0\ndomain 0")
            self._kfd_n = 1
        _w(self.kfd_root / str(self._kfd_n) / "properties",
           f"cpu_cores_count 0\nsimd_count 1216\ndrm_render_minor {minor}\nlocation_id {loc}\ndomain {int(dom, 16)}")
        self._kfd_n += 1

    def gpu(self, bdf: str, pci_id: str, driver: str, card: int, render: int, hwmon: dict,
            hwmon_name: Optional[str] = None, extra: Optional[dict] = None, partitions: int = 1,
            tiles: int = 0, kfd: bool = True) -> Path:
        """Add a GPU; returns its hwmon directory.

        Args:
            pci_id: "1002:74a1"; driver: amdgpu/xe/i915; hwmon: file name -> value (µW, µJ).
            extra: files in the PCI device dir (gpu_busy_percent, unique_id, current_compute_partition).
            partitions: >1 adds render nodes renderD<render+1>.. on amdgpu_xcp platform devices
                and one KFD node per partition (amdgpu).
            tiles: xe: tile0..tileN-1 dirs in the device; i915: cardN/gt/gt0.. dirs.
        """
        vid, did = pci_id.split(":")
        dev = self.root / "devices" / "pci0000:00" / bdf
        _w(dev / "uevent", f"DRIVER={driver}\nPCI_CLASS=38000\nPCI_ID={vid.upper()}:{did.upper()}\n"
                           f"PCI_SLOT_NAME={bdf}\nMODALIAS=pci:v0000{vid.upper()}d0000{did.upper()}")
        _w(dev / "vendor", f"0x{vid}")
        _w(dev / "device", f"0x{did}")
        for k, v in (extra or {}).items():
            _w(dev / k, v)
        hw = dev / "hwmon" / f"hwmon{card + 2}"
        _w(hw / "name", hwmon_name or driver)
        for k, v in hwmon.items():
            _w(hw / k, v)
        self._link(f"card{card}", dev)
        self._link(f"renderD{render}", dev)
        if driver == "amdgpu" and kfd:
            self._kfd(bdf, render)
        for p in range(1, partitions):
            xcp = self.root / "devices" / "platform" / f"amdgpu_xcp.{self._xcp}"
            self._xcp += 1
            xcp.mkdir(parents=True, exist_ok=True)
            self._link(f"renderD{render + p}", xcp)
            if kfd:
                self._kfd(bdf, render + p)
        for t in range(tiles):
            if driver == "xe":
                (dev / f"tile{t}" / f"gt{t}").mkdir(parents=True, exist_ok=True)
            else:
                (self.drm_root / f"card{card}" / "gt" / f"gt{t}").mkdir(parents=True, exist_ok=True)
        return hw

    def tile_hwmon(self, bdf: str, tile: int, files: dict) -> Path:
        """i915's per-tile hwmon (``name`` = ``i915_gt<tile>``, its own ``energy1_input``)."""
        hw = self.root / "devices" / "pci0000:00" / bdf / "hwmon" / f"hwmon{20 + tile}"
        _w(hw / "name", f"i915_gt{tile}")
        for k, v in files.items():
            _w(hw / k, v)
        return hw

    def other(self, bdf: str, pci_id: str, card: int) -> None:
        """A card the readers must skip (NVIDIA 10de, a BMC's ASPEED 1a03)."""
        vid, did = pci_id.split(":")
        dev = self.root / "devices" / "pci0000:00" / bdf
        _w(dev / "uevent", f"DRIVER=ast\nPCI_ID={vid.upper()}:{did.upper()}\nPCI_SLOT_NAME={bdf}")
        self._link(f"card{card}", dev)


def put(path: Path, value) -> None:
    """Replace a sysfs attribute atomically (as the kernel shows one value at a time)."""
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)

"""Fake DRM / hwmon / KFD sysfs trees in the drivers' real layouts (no AMD or Intel GPU here).

Shape (as on a real node; ``root`` stands for ``/sys``):

    root/devices/pci0000:00/0000:c1:00.0/           the PCI device (uevent, vendor, device, ...)
        hwmon/hwmon3/{name, power1_average | power1_input, power1_cap, ...}
    root/class/drm/card0/device -> ../../../devices/pci0000:00/0000:c1:00.0
    root/class/drm/renderD128/device -> same
    root/class/kfd/kfd/topology/nodes/N/properties  (one "name value" per line)

Where every path and value comes from (the capture wins over this project's own reading):

* PCI ``uevent`` keys DRIVER / PCI_CLASS / PCI_ID / PCI_SLOT_NAME / MODALIAS: ``drivers/pci/pci-driver.c``
  ``pci_uevent``; ``vendor``/``device`` files "0x1002"-style: ``Documentation/ABI/testing/sysfs-bus-pci``.
* amdgpu hwmon (``Documentation/gpu/amdgpu/thermal.rst``): ``power1_average`` / ``power1_input`` in
  uW ("average" / "instantaneous power used by the SoC"), ``power1_cap``, ``power1_cap_default``,
  ``power1_cap_max`` in uW. Which of the two power files exists depends on the SMU: MI300
  (``smu_v13_0_6_ppt.c`` ``read_sensor``) answers only ``AMDGPU_PP_SENSOR_GPU_INPUT_POWER``, so it has
  ``power1_input`` and no ``power1_average`` (:data:`MI300X_HWMON`); MI200 (``aldebaran_ppt.c``) reports
  ``AverageSocketPower`` -> ``power1_average``, and on the secondary die of a package 0 W with power
  limits 0 ("Valid power data is available only from primary die"; "For secondary die show the value
  as 0"): :data:`MI250X_PRIMARY_HWMON` / :data:`MI250X_SECONDARY_HWMON`. amdgpu registers no
  ``energyN_input``: its energy accumulator is read through AMD SMI (``tests/fakes/amdsmi.py``).
  560 W: MI250X's typical board power (AMD Instinct MI250X data sheet); 750 W: MI300X's.
* ``current_compute_partition`` (SPX/DPX/QPX/CPX), ``available_compute_partition``,
  ``current_memory_partition`` (NPS1/NPS4), ``available_memory_partition``: the amdgpu device
  attributes (``amdgpu_xcp`` / ``amdgpu_gfx.c`` / ``amdgpu_gmc.c``, ``sysfs-driver-amdgpu``). The
  non-primary partitions' render nodes hang off ``amdgpu_xcp.N`` platform devices (``amdxcp``),
  not the PCI device: only KFD ties them to their card.
* KFD ``properties`` (``kfd_topology.c`` ``node_show``): ``location_id`` = ``pci_dev_id`` (bus << 8
  | devfn) with the partition's node id ORed in on a multi-partition GPU -- ``| node_id`` (GC 9.4.3
  kernels, ``kfd_encoding="low"``, the default) or ``| node_id << 28`` (the kernels with "node id =
  location_id[31:28]", ``kfd_encoding="high"``); ``domain``; ``drm_render_minor``; ``unique_id`` the
  card's (``amdgpu_amdkfd_get_unique_id``, decimal); ``num_xcc`` XCDs per node (MI300X: 8 in SPX,
  1 in CPX); ``simd_count`` 4 per CU, MI300X 304 CUs (1216 SIMDs, 152 per CPX partition);
  ``gfx_target_version`` 90402 (gfx942); ``vendor_id`` 4098 (0x1002), ``device_id`` the PCI id.
  Node 0 is the CPU (``simd_count 0``, ``drm_render_minor 0``).
* xe hwmon (``Documentation/ABI/testing/sysfs-driver-intel-xe-hwmon``, ``xe_hwmon.c``): name ``xe``,
  ``energy1_input`` (card, uJ) with ``energy1_label`` "card", ``energy2_input`` (package) labelled
  "pkg", ``power1_rated_max`` (uW, "card default power limit (default TDP setting)"), ``power1_max``;
  no instantaneous power file. Tiles: ``<pci dev>/tile0/gt0, tile1/gt1`` (``xe_tile_sysfs.c``,
  ``xe_gt_sysfs.c``).
* i915 hwmon (``Documentation/ABI/testing/sysfs-driver-intel-i915-hwmon``): name ``i915`` with the
  device's ``energy1_input`` (uJ), ``power1_rated_max``, ``power1_max``; and on multi-tile parts one
  hwmon per GT named ``i915_gt0``, ``i915_gt1`` whose ``energy1_input`` "reflects energy input for
  the gt". Tiles: ``cardN/gt/gt0, gt1`` (``intel_gt_sysfs.c``). 600 W: Data Center GPU Max 1550's TDP.
"""

from __future__ import annotations

import os
from pathlib import Path

#: MI300X (gfx942, smu_v13_0_6): power1_input only (see module docstring); 750 W cap.
MI300X_HWMON = {"power1_input": 0, "power1_cap": 750_000_000, "power1_cap_default": 750_000_000,
                "power1_cap_max": 750_000_000}
#: MI250X primary GCD: the package's average power and the 560 W package cap.
MI250X_PRIMARY_HWMON = {"power1_average": 0, "power1_cap": 560_000_000, "power1_cap_default": 560_000_000,
                        "power1_cap_max": 560_000_000}
#: MI250X secondary GCD: everything the SMU reports for the package reads 0 on it.
MI250X_SECONDARY_HWMON = {"power1_average": 0, "power1_cap": 0, "power1_cap_default": 0, "power1_cap_max": 0}
#: xe (Data Center GPU Max / Battlemage): card and package energy, labelled; no power input.
XE_HWMON = {"energy1_input": 0, "energy1_label": "card", "energy2_input": 0, "energy2_label": "pkg",
            "power1_rated_max": 600_000_000, "power1_max": 600_000_000}
#: i915 device-level hwmon of a Data Center GPU Max 1550.
I915_HWMON = {"energy1_input": 0, "power1_rated_max": 600_000_000, "power1_max": 600_000_000}


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

    def _kfd(self, bdf: str, minor: int, pci_id: str, node_id: int = 0, n_nodes: int = 1,
             encoding: str = "low", unique_id: int = 0) -> None:
        dom, bus, devfn = bdf.split(":")
        dev, fn = devfn.split(".")
        loc = int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn, 16)  # pci_dev_id
        if n_nodes > 1:  # kfd_topology_add_device: the partition's node id in the location id
            loc |= node_id << 28 if encoding == "high" else node_id
        if self._kfd_n == 0:  # node 0 is the CPU: no render minor
            _w(self.kfd_root / "0" / "properties", "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n"
                                                 "drm_render_minor 0\nlocation_id 0\ndomain 0\nunique_id 0")
            self._kfd_n = 1
        vid, did = pci_id.split(":")
        n_xcc = max(1, 8 // n_nodes)
        _w(self.kfd_root / str(self._kfd_n) / "properties",
           f"cpu_cores_count 0\nsimd_count {1216 // n_nodes}\nmem_banks_count 1\ngfx_target_version 90402\n"
           f"vendor_id {int(vid, 16)}\ndevice_id {int(did, 16)}\nlocation_id {loc}\ndomain {int(dom, 16)}\n"
           f"drm_render_minor {minor}\nunique_id {unique_id}\nnum_xcc {n_xcc}")
        self._kfd_n += 1

    def gpu(self, bdf: str, pci_id: str, driver: str, card: int, render: int, hwmon: dict,
            hwmon_name: str | None = None, extra: dict | None = None, partitions: int = 1,
            tiles: int = 0, kfd: bool = True, kfd_encoding: str = "low") -> Path:
        """Add a GPU; returns its hwmon directory.

        Args:
            pci_id: "1002:74a1"; driver: amdgpu/xe/i915; hwmon: file name -> value (µW, µJ).
            extra: files in the PCI device dir (gpu_busy_percent, unique_id, current_compute_partition).
            partitions: >1 adds render nodes renderD<render+1>.. on amdgpu_xcp platform devices
                and one KFD node per partition (amdgpu).
            tiles: xe: tile0..tileN-1 dirs in the device; i915: cardN/gt/gt0.. dirs.
            kfd_encoding: where the kernel puts a partition's node id in ``location_id``:
                "low" (``| node_id``) or "high" (``| node_id << 28``); see the module docstring.
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
        uid = int((extra or {}).get("unique_id", "0"), 16)
        if driver == "amdgpu" and kfd:
            self._kfd(bdf, render, pci_id, 0, partitions, kfd_encoding, uid)
        for p in range(1, partitions):
            xcp = self.root / "devices" / "platform" / f"amdgpu_xcp.{self._xcp}"
            self._xcp += 1
            xcp.mkdir(parents=True, exist_ok=True)
            self._link(f"renderD{render + p}", xcp)
            if kfd:
                self._kfd(bdf, render + p, pci_id, p, partitions, kfd_encoding, uid)
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

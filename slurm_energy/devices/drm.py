"""AMD and Intel GPUs as the kernel's DRM and hwmon sysfs trees show them (no vendor library).

Read once per job (Prolog: resolution; sampler: reader set-up); pure ``os``/file reads, so it is
cheap enough for the Prolog. Layout (Linux ``Documentation/gpu/amdgpu/thermal.rst``,
``Documentation/ABI/testing/sysfs-driver-intel-{i915,xe}-hwmon``, ``Documentation/hwmon/sysfs-interface``):

* ``<drm_root>/cardN`` and ``<drm_root>/renderD<M>``: DRM nodes; ``device`` links to the PCI
  device directory, whose ``uevent`` holds ``DRIVER=amdgpu|xe|i915``, ``PCI_ID=1002:74A1`` and
  ``PCI_SLOT_NAME=0000:c1:00.0`` (the PCI bus id: the physical card's key here).
* ``<pci dev>/hwmon/hwmonK/``: ``name`` (``amdgpu``, ``xe``, ``i915``), ``energyN_input`` (µJ,
  cumulative), ``powerN_average`` / ``powerN_input`` (µW), ``power1_cap`` (µW, amdgpu),
  ``power1_rated_max`` (µW, i915/xe: the card's default TDP). xe labels its channels
  (``energy1_label`` = ``card``, ``energy2_label`` = ``pkg``).
* amdgpu: ``gpu_busy_percent`` (0..100), ``mem_info_vram_used`` (bytes), ``unique_id`` (the
  ``GPU-<hex>`` ROCm names a GPU by), ``current_compute_partition`` (SPX/DPX/TPX/QPX/CPX on
  MI300), ``current_memory_partition`` (NPS1/NPS2/NPS4, ``Documentation/gpu/amdgpu/amdgpu-glossary``
  / ``sysfs-driver-amdgpu``). A partitioned GPU shows one KFD topology node per partition
  (``/sys/class/kfd/kfd/topology/nodes/N/properties``: ``drm_render_minor``, ``location_id``,
  ``domain``), each with its own render node on an ``amdgpu_xcp.<n>`` platform device
  (``drivers/gpu/drm/amd/amdxcp``). ``location_id`` is ``pci_dev_id`` = bus << 8 | device << 3 |
  function (``kfd_topology.c`` ``kfd_topology_add_device``), and on a multi-partition GPU the
  kernel ORs the partition's node id in: ``location_id |= node_id`` (GC 9.4.3, later "num_nodes >
  1"), or, in the kernels that briefly carried "node id = location_id[31:28]", ``node_id << 28``.
  So partition 3 of card c1:00.0 is 0xc103 (or 0x3000c100), not 0xc100: the card is matched on
  domain, bus and device only, and the partition index is read back from those bits.
* Multi-die packages (MI250X/MI250: two GCDs, each its own PCI device and card): the SMU reports
  power for the package on the primary die only; the secondary die reads 0 W
  (``aldebaran_ppt.c``: "Valid power data is available only from primary die", ``AverageSocketPower``
  -> 0 on the secondary; power limits "For secondary die show the value as 0") and an energy
  counter of 0 (rocm-smi ``checkIfSecondaryDie``: power1_cap, its default and power1_average all 0,
  or, in ROCm 6, the energy counter 0; rocm-smi prints "N/A (Secondary die)", ROCm/rocm_smi_lib#149).
  No sysfs attribute names a die's package (rocm-smi's own TODO), so a secondary die is paired with
  the nearest primary die of the same PCI device id before it in PCI bus order; one left unpaired
  is unmeasured, never 0 J.
* Intel tiles (stacks): ``<pci dev>/tile0, tile1`` (xe) or ``cardN/gt/gt0, gt1`` (i915); i915 also
  registers a hwmon per tile (``name`` = ``i915_gt0``...) whose ``energy1_input`` is that tile's.

Model names: the PCI device id (table below, from the PCI ID Repository ``pci.ids``), so they match
the bundled GPU table's keys (``AMD Instinct MI300X`` -> ``mi300x``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

DEFAULT_DRM_ROOT = "/sys/class/drm"
DEFAULT_KFD_ROOT = "/sys/class/kfd/kfd/topology/nodes"

VENDORS = {"1002": "amd", "8086": "intel"}
HWMON_NAMES = ("amdgpu", "xe", "i915")

#: (vendor, device) PCI ids -> product, from the PCI ID Repository (pci.ids): AMD Instinct
#: (Arcturus 738c/738e, Aldebaran 7408/740c/740f, Aqua Vanjaram 74a0-74bd) and Intel Data Center
#: GPU Max (Ponte Vecchio 0bd5/0bd6: 1550, 0bd9/0bda/0bdb: 1100, 0b69: 1450) and Flex (56c0/56c1).
#: 740c is "MI250X/MI250" in pci.ids: its board power differs, so it is left unnamed (no guess).
PCI_PRODUCTS = {
    ("1002", "738c"): "AMD Instinct MI100", ("1002", "738e"): "AMD Instinct MI100",
    ("1002", "7408"): "AMD Instinct MI250X", ("1002", "740f"): "AMD Instinct MI210",
    ("1002", "74a0"): "AMD Instinct MI300A", ("1002", "74a1"): "AMD Instinct MI300X",
    ("1002", "74a2"): "AMD Instinct MI308X", ("1002", "74a5"): "AMD Instinct MI325X",
    ("1002", "74a9"): "AMD Instinct MI300X", ("1002", "74bd"): "AMD Instinct MI300X",
    ("8086", "0bd5"): "Intel Data Center GPU Max 1550", ("8086", "0bd6"): "Intel Data Center GPU Max 1550",
    ("8086", "0bd9"): "Intel Data Center GPU Max 1100", ("8086", "0bda"): "Intel Data Center GPU Max 1100",
    ("8086", "0bdb"): "Intel Data Center GPU Max 1100", ("8086", "0b69"): "Intel Data Center GPU Max 1450",
    ("8086", "56c0"): "Intel Data Center GPU Flex 170", ("8086", "56c1"): "Intel Data Center GPU Flex 140",
}

#: Compute partitions per mode (AMD Instinct MI300 "GPU partitioning" docs: SPX one, DPX two,
#: TPX three, QPX four; CPX one per XCD, so its count is taken from the KFD nodes, never assumed).
PARTITIONS_PER_MODE = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4}

_CARD_RE = re.compile(r"^card(\d+)$")
_RENDER_RE = re.compile(r"^renderD(\d+)$")


def read_text(path: str) -> str:
    """One sysfs attribute, stripped. Raises OSError / UnicodeDecodeError like ``open``."""
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _opt_text(path: str) -> str | None:
    try:
        return read_text(path)
    except (OSError, UnicodeDecodeError):
        return None


def _uevent(dev: str) -> dict[str, str]:
    out = {}
    for line in (_opt_text(os.path.join(dev, "uevent")) or "").splitlines():
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


@dataclass
class DrmGpu:
    """One physical AMD/Intel GPU (a PCI device driven by amdgpu, xe or i915)."""

    pci_bus_id: str  # "0000:c1:00.0": the key; never an in-job ordinal
    vendor: str  # "amd" | "intel"
    driver: str  # "amdgpu" | "xe" | "i915" | "" (unbound)
    pci_id: str  # "1002:74a1"
    model: str  # product from PCI_PRODUCTS, else "AMD GPU 1002:xxxx"
    card: str  # "card0"
    device_dir: str  # resolved PCI device directory
    render_minors: list = field(default_factory=list)  # every render node of this GPU (partitions too)
    hwmon: str | None = None  # hwmon directory of the whole card
    unique_id: str | None = None  # amdgpu unique_id (hex)
    partition_mode: str | None = None  # "SPX".."CPX" (amdgpu), None if not partitionable
    n_partitions: int = 1  # compute partitions this GPU is split into; 0 = partitioned, count unknown
    n_tiles: int = 1  # Intel tiles (stacks)
    tile_hwmon: dict = field(default_factory=dict)  # i915: tile -> its own hwmon dir (``i915_gt<N>``)
    memory_partition: str | None = None  # "NPS1".."NPS8" (amdgpu current_memory_partition)
    partition_of_minor: dict = field(default_factory=dict)  # render minor -> partition (KFD node id)
    secondary_die: bool = False  # a die that reads 0 W / 0 J for its package (MI200 secondary GCD)
    package: list = field(default_factory=list)  # PCI bus ids of the package's dies, primary first; [] = one die

    @property
    def ordered_minors(self) -> list[int]:
        return sorted(self.render_minors)


def _hwmons(dev: str) -> list[tuple[str, str]]:
    """``(hwmon directory, its name)`` of a PCI device, in directory order ([] when it has none)."""
    base = os.path.join(dev, "hwmon")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    return [(os.path.join(base, h), _opt_text(os.path.join(base, h, "name")) or "") for h in names]


def _hwmon_dir(dev: str) -> str | None:
    return next((d for d, name in _hwmons(dev) if name in HWMON_NAMES), None)


def _tile_hwmons(dev: str) -> dict[int, str]:
    """i915 registers one hwmon per GT (tile) named ``i915_gt<N>`` with that tile's ``energy1_input``."""
    return {int(m.group(1)): d for d, name in _hwmons(dev) if (m := re.match(r"^i915_gt(\d+)$", name))}


def _tiles(card_dir: str, dev: str) -> int:
    for d, pat in ((dev, r"^tile\d+$"), (os.path.join(card_dir, "gt"), r"^gt\d+$")):
        try:
            n = sum(1 for e in os.listdir(d) if re.match(pat, e))
        except OSError:
            continue
        if n:
            return n
    return 1


def kfd_location(loc: int, domain: int = 0) -> tuple[str, int]:
    """KFD ``location_id`` (and ``domain``) -> (PCI bus id of the card, partition index).

    ``location_id`` = ``pci_dev_id`` (bus << 8 | device << 3 | function) with the partition's node
    id ORed in on a multi-partition GPU: into bits 0-2 (``location_id |= node_id``) or bits 28-31
    (``node_id << 28``), depending on the kernel (module docstring). amdgpu's GPU is PCI function 0,
    so the function bits are the partition index, and the card is ``domain:bus:device.0``.
    """
    part = (loc >> 28) & 0xF or loc & 0x7
    return f"{domain:04x}:{loc >> 8 & 0xff:02x}:{loc >> 3 & 0x1f:02x}.0", part


def _kfd_render_minors(kfd_root: str) -> dict[str, dict[int, int]]:
    """PCI bus id -> {render minor: partition index} of the KFD GPU nodes of that card."""
    out: dict[str, dict[int, int]] = {}
    try:
        nodes = os.listdir(kfd_root)
    except OSError:
        return out
    for n in nodes:
        props: dict[str, str] = {}
        for line in (_opt_text(os.path.join(kfd_root, n, "properties")) or "").splitlines():
            k, _, v = line.partition(" ")
            props[k] = v.strip()
        try:
            minor, loc = int(props["drm_render_minor"]), int(props["location_id"])
            dom = int(props.get("domain", "0"))
        except (KeyError, ValueError):
            continue  # a CPU node has no render minor
        if minor <= 0:
            continue
        bdf, part = kfd_location(loc, dom)
        out.setdefault(bdf, {})[minor] = part
    return out


def _opt_int_file(path: str) -> int | None:
    v = _opt_text(path)
    try:
        return None if v is None else int(v)
    except ValueError:
        return None


def _is_secondary_die(g: DrmGpu) -> bool:
    """rocm-smi's ``checkIfSecondaryDie`` on the hwmon files: power1_cap 0, power1_cap_default 0
    (where present) and power1_average 0 -- a die whose package power is reported by its sibling."""
    if g.vendor != "amd" or not g.hwmon:
        return False
    cap = _opt_int_file(os.path.join(g.hwmon, "power1_cap"))
    default = _opt_int_file(os.path.join(g.hwmon, "power1_cap_default"))
    avg = _opt_int_file(os.path.join(g.hwmon, "power1_average"))
    return cap == 0 and default in (None, 0) and avg in (None, 0)


def _pair_packages(gpus: list[DrmGpu]) -> None:
    """Give each secondary die its package: the nearest primary die of the same PCI id before it
    in bus order that has no sibling yet (module docstring: no attribute names the package)."""
    free: dict[str, DrmGpu] = {}
    for g in sorted(gpus, key=lambda x: x.pci_bus_id):
        if g.vendor != "amd":
            continue
        if not g.secondary_die:
            free[g.pci_id] = g
            continue
        p = free.pop(g.pci_id, None)
        if p is not None:
            p.package = g.package = [p.pci_bus_id, g.pci_bus_id]


def discover_drm_gpus(drm_root: str = DEFAULT_DRM_ROOT, kfd_root: str = DEFAULT_KFD_ROOT) -> list[DrmGpu]:
    """Every AMD/Intel GPU under ``drm_root``, in PCI bus id order.

    NVIDIA cards (vendor 10de) and display-only parts (e.g. a BMC's ASPEED, 1a03) are skipped.
    Never raises: unreadable entries are skipped; a missing root gives [].
    """
    try:
        entries = os.listdir(drm_root)
    except OSError:
        return []
    by_dev: dict[str, DrmGpu] = {}
    renders: dict[str, list[int]] = {}
    for e in entries:
        dev = os.path.realpath(os.path.join(drm_root, e, "device"))
        if _RENDER_RE.match(e):
            renders.setdefault(dev, []).append(int(_RENDER_RE.match(e).group(1)))  # type: ignore[union-attr]
            continue
        if not _CARD_RE.match(e) or dev in by_dev:
            continue
        ue = _uevent(dev)
        vid, _, did = (ue.get("PCI_ID") or "").lower().partition(":")
        if not vid:
            vid = (_opt_text(os.path.join(dev, "vendor")) or "").lower().removeprefix("0x")
            did = (_opt_text(os.path.join(dev, "device")) or "").lower().removeprefix("0x")
        vendor = VENDORS.get(vid)
        if vendor is None:
            continue
        bdf = ue.get("PCI_SLOT_NAME") or os.path.basename(dev)
        model = PCI_PRODUCTS.get((vid, did)) or f"{vendor.upper()} GPU {vid}:{did}"
        g = DrmGpu(bdf, vendor, ue.get("DRIVER", ""), f"{vid}:{did}", model, e, dev,
                   hwmon=_hwmon_dir(dev), unique_id=_opt_text(os.path.join(dev, "unique_id")))
        if vendor == "amd":
            g.partition_mode = (_opt_text(os.path.join(dev, "current_compute_partition")) or "").upper() or None
            g.memory_partition = (_opt_text(os.path.join(dev, "current_memory_partition")) or "").upper() or None
            g.secondary_die = _is_secondary_die(g)
        else:
            g.n_tiles = _tiles(os.path.join(drm_root, e), dev)
            g.tile_hwmon = _tile_hwmons(dev)
        by_dev[dev] = g
    kfd = _kfd_render_minors(kfd_root)
    for dev, g in by_dev.items():
        parts = kfd.get(g.pci_bus_id, {})
        g.render_minors = sorted(set(renders.get(dev, [])) | set(parts))
        # partition index = the node id the kernel encoded; a kernel that wrote one location id for
        # every partition (ids not distinct) leaves render-minor order as the index
        g.partition_of_minor = dict(parts) if len(parts) > 1 and len(set(parts.values())) == len(parts) else {}
        if g.partition_mode:  # CPX without KFD nodes to count: 0 = unknown (never taken as 1)
            g.n_partitions = PARTITIONS_PER_MODE.get(g.partition_mode) or len(parts)
    _pair_packages(list(by_dev.values()))
    return sorted(by_dev.values(), key=lambda g: g.pci_bus_id)

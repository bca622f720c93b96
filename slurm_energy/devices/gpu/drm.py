"""The ``drm`` GPU backend: resolve a job's AMD/Intel GPUs to physical cards (PCI bus ids), once, in the Prolog.

Names Slurm and the runtimes use, and what each one is:

* ``SLURM_JOB_GPUS`` (Prolog/Epilog): Slurm's GRES indices on this node -- physical. With
  ``AutoDetect=rsmi`` or a ``gres.conf`` listing ``File=/dev/dri/renderD[128-...]`` the index
  order is the render nodes' order, so GRES index *i* = the *i*-th AMD/Intel render node by minor
  number (a partitioned MI300 has one render node per compute partition, each its own GRES; cards
  without hwmon files, i.e. integrated graphics, are not counted). A
  token may also be a device file (``/dev/dri/renderD129``, ``/dev/dri/card1``): unambiguous.
* ``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` (in the job): ``GPU-<unique_id>`` names a card
  outright; a number is an *in-job ordinal* (renumbered from 0 under ``ConstrainDevices``), mapped
  through the job's allocation (ordinal k = the k-th of SLURM_JOB_GPUS in index order), never read
  as a physical index.
* ``ZE_AFFINITY_MASK`` (Intel Level Zero, in the job): what an ordinal counts depends on
  ``ZE_FLAT_DEVICE_HIERARCHY`` (Level Zero spec, "Device Hierarchy"; Intel, "Flattening GPU Tile
  Hierarchy", 2023; compute-runtime: FLAT "returns all sub devices which have no sub devices ...
  flattened out in order"):

  - ``COMPOSITE``: a root device is a card, its tiles are sub-devices: ``k`` = the job's k-th card
    (whole), ``k.t`` = tile t of that card.
  - ``FLAT`` (the default since late 2023, so on Data Center GPU Max when unset): every tile is a
    root device, in card order: ``k`` = the job's k-th tile counting tile 0..n-1 of each of its
    cards in turn (card c, tile t is ordinal c x tiles + t). A ``k.t`` names a sub-device of tile k
    (a compute-engine split), which is measured as its tile.
  - ``COMBINED``: root devices are tiles as in FLAT (the composite card is reached only through
    ``zeDeviceGetRootDevice``), so ordinals count tiles as in FLAT.

  A card with one tile (Flex, Arc) is the same in every mode. Mapped through the allocation like
  the above.

The job cgroup's device list is no help here: it does not exist yet while the Prolog runs, and
with Slurm 22.05 on cgroup v1 (``ConstrainDevices=yes``) a GPU job's ``devices.list`` reads
``a *:* rwm`` (default-allow; the denied devices are not listed) -- checked on the test cluster;
cgroup v2 enforces devices with eBPF and has no such file.

A compute partition of an AMD GPU (SPX/DPX/TPX/QPX/CPX) or one tile of an Intel GPU is a labelled
share of the card: ``fraction`` = 1 / partitions (or tiles). Spatial partitions split the XCDs
evenly (AMD Instinct MI300 partitioning docs), so this is the partition's share of the card's
compute; the card's energy x fraction is charged, flagged as an estimate (like a MIG slice). The
memory partition mode (NPS1/NPS4) does not change the compute split; it is shown in the detail.
A partition's index is the KFD node id the kernel encodes in its ``location_id``
(:func:`slurm_energy.devices.drm.kfd_location`), not the order of its render minor.

One die of a multi-die package (MI250X: 2 GCDs, power reported by the primary die for both) is a
``package`` share: the package's energy (read from the primary die) x 1 / dies. The jobs on the
package's dies share it; the secondary die's own 0 W / 0 J is never read as a measurement.

Shares of one card never sum to more than the card: a card chosen whole is not also charged
through one of its tiles or partitions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from slurm_energy.devices.drm import DEFAULT_DRM_ROOT, DEFAULT_KFD_ROOT, DrmGpu, discover_drm_gpus
from slurm_energy.devices.gpu import Gpu, GpuResolveError, ResolvedGpus, split_tokens

if TYPE_CHECKING:
    from slurm_energy.devices.hardware import HardwareConfig


def _slots(gpus: list[DrmGpu]) -> list[tuple[int, DrmGpu, int]]:
    """(render minor, card, partition index) for every render node, by minor: the GRES order.

    Cards without hwmon files (integrated graphics) are left out: Slurm's AutoDetect (rsmi,
    oneapi) lists compute GPUs only, and such a card has nothing to measure."""
    out = []
    for g in gpus:
        if not g.hwmon:
            continue
        for i, m in enumerate(g.ordered_minors):
            out.append((m, g, g.partition_of_minor.get(m, i)))
    return sorted(out, key=lambda s: s[0])


def _whole_or_partition(g: DrmGpu, part: int, src: str) -> Gpu:
    r = Gpu("drm", g.vendor, g.pci_bus_id, g.model, bus_id=g.pci_bus_id, source=src)
    if g.partition_mode and g.n_partitions != 1:
        r.device_id, r.share, r.index = f"{g.pci_bus_id}/xcp{part}", "partition", part
        nps = f", {g.memory_partition}" if g.memory_partition else ""
        if g.n_partitions > 1:
            r.fraction = 1.0 / g.n_partitions
            r.share_detail = f"{g.partition_mode} {part}/{g.n_partitions}{nps}"
        else:
            r.fraction_unknown, r.share_detail = True, f"{g.partition_mode} partition count unknown"
    if len(g.package) > 1:  # one die of a package whose power its primary die reports
        die = g.package.index(g.pci_bus_id)
        r.fraction = (r.fraction or 1.0) / len(g.package)
        r.share = "package" if not r.share else r.share
        r.share_detail = (f"{r.share_detail}; " if r.share_detail else "") + (
            f"die {die}/{len(g.package)} of package {g.package[0]}")
    elif g.secondary_die:  # its package's power is reported by a die we could not pair it with
        r.fraction_unknown, r.share = True, "package"
        r.share_detail = "secondary die, package power on an unpaired primary die"
    return r


def _tile(base: Gpu, g: DrmGpu, tile: int, src: str) -> Gpu:
    if tile >= g.n_tiles:
        raise GpuResolveError(f"{src}: {g.model} at {g.pci_bus_id} has {g.n_tiles} tile(s), no tile {tile}")
    if g.n_tiles == 1:
        return base
    return Gpu("drm", g.vendor, f"{g.pci_bus_id}/tile{tile}", g.model, bus_id=g.pci_bus_id,
               fraction=1.0 / g.n_tiles, share="tile", share_detail=f"tile {tile}/{g.n_tiles}", index=tile,
               source=src)


_DEVFILE_RE = re.compile(r"^(?:/dev/dri/)?(renderD|card)(\d+)$")


def _physical(tok: str, slots: list[tuple[int, DrmGpu, int]], gpus: list[DrmGpu], var: str) -> Gpu:
    src = f"{var}={tok}"
    m = _DEVFILE_RE.match(tok)
    if m and m.group(1) == "card":
        hits = [g for g in gpus if g.card == f"card{m.group(2)}"]
        if not hits:
            raise GpuResolveError(f"{src}: no AMD/Intel GPU is /dev/dri/card{m.group(2)} on this node")
        return _whole_or_partition(hits[0], 0, src)
    if m:
        slot_hits = [s for s in slots if s[0] == int(m.group(2))]
        if not slot_hits:
            raise GpuResolveError(f"{src}: no AMD/Intel GPU has render node renderD{m.group(2)}")
        return _whole_or_partition(slot_hits[0][1], slot_hits[0][2], src)
    if tok.isdigit():
        i = int(tok)
        if i >= len(slots):
            raise GpuResolveError(f"{src}: GRES index {i} but this node has {len(slots)} AMD/Intel GPU render "
                                  "node(s); check gres.conf against ls /dev/dri")
        return _whole_or_partition(slots[i][1], slots[i][2], src)
    return _by_uuid(tok, gpus, src)


def _by_uuid(tok: str, gpus: list[DrmGpu], src: str) -> Gpu:
    want = tok.lower().removeprefix("gpu-").removeprefix("0x")
    hits = [g for g in gpus if g.unique_id and g.unique_id.lower().removeprefix("0x") == want]
    if not hits:
        raise GpuResolveError(f"{src}: no AMD GPU has unique_id {want!r} (cat /sys/class/drm/card*/device/unique_id)")
    if hits[0].partition_mode and hits[0].n_partitions != 1:
        raise GpuResolveError(f"{src}: {tok} names a partitioned GPU ({hits[0].partition_mode}); "
                              "resolve from the Prolog's SLURM_JOB_GPUS")
    return _whole_or_partition(hits[0], 0, src)


def _ordinal(tok: str, base: list[Gpu], var: str) -> Gpu:
    k = int(tok)
    if not base:
        raise GpuResolveError(f"{var}={tok}: a numeric {var} is a job-relative ordinal, not a physical index; "
                              "resolve from the Prolog's SLURM_JOB_GPUS")
    if k >= len(base):
        raise GpuResolveError(f"{var}={tok}: ordinal {k} but the job has {len(base)} GPU(s)")
    return base[k]


#: ``ZE_FLAT_DEVICE_HIERARCHY`` values (Level Zero spec) and the one a runtime uses when it is unset.
ZE_HIERARCHIES = ("COMPOSITE", "FLAT", "COMBINED")
ZE_DEFAULT_HIERARCHY = "FLAT"


def _ze_roots(chosen: list[Gpu], gpus: list[DrmGpu], mode: str) -> list[tuple[Gpu, DrmGpu, int | None]]:
    """The root devices Level Zero shows the job, in order: (base, card, tile or None for the card)."""
    out: list[tuple[Gpu, DrmGpu, int | None]] = []
    for base in chosen:
        g = next(x for x in gpus if x.pci_bus_id == base.bus_id)
        if mode == "COMPOSITE" or g.n_tiles == 1 or base.share:
            out.append((base, g, None))
        else:  # FLAT / COMBINED: every tile of the card is a root device
            out.extend((base, g, t) for t in range(g.n_tiles))
    return out


def _ze_select(ze: list[str], chosen: list[Gpu], gpus: list[DrmGpu], mode: str) -> list[Gpu]:
    roots = _ze_roots(chosen, gpus, mode)
    out = []
    for t in ze:
        dev, _, sub = t.partition(".")
        if not dev.isdigit() or (sub and not sub.isdigit()):
            raise GpuResolveError(f"ZE_AFFINITY_MASK={t}: expected <device>[.<sub-device>] (e.g. 0.1)")
        if not roots:
            _ordinal(dev, [], "ZE_AFFINITY_MASK")
        k = int(dev)
        if k >= len(roots):
            unit = "card(s)" if mode == "COMPOSITE" else "tile(s) (ZE_FLAT_DEVICE_HIERARCHY=" + mode + ")"
            raise GpuResolveError(f"ZE_AFFINITY_MASK={t}: ordinal {k} but the job has {len(roots)} {unit}")
        base, g, tile = roots[k]
        src = f"ZE_AFFINITY_MASK={t} ({mode})"
        if tile is not None:
            out.append(_tile(base, g, tile, src))
        elif sub and mode == "COMPOSITE":
            out.append(_tile(base, g, int(sub), src))
        else:
            out.append(base)
    return out


def _no_double_count(res: list[Gpu]) -> list[Gpu]:
    """Duplicates removed; a card chosen whole drops its tiles/partitions chosen beside it."""
    whole = {r.bus_id for r in res if not r.share}
    seen: set[str] = set()
    out = []
    for r in res:
        if r.device_id in seen or (r.share in ("tile", "partition") and r.bus_id in whole):
            continue
        seen.add(r.device_id)
        out.append(r)
    return out


def resolve_drm_gpus(slurm_job_gpus: str | None = None, rocr_visible_devices: str | None = None,
                     hip_visible_devices: str | None = None, ze_affinity_mask: str | None = None,
                     drm_root: str = DEFAULT_DRM_ROOT, kfd_root: str = DEFAULT_KFD_ROOT,
                     all_if_unset: bool = False, ze_flat_device_hierarchy: str | None = None) -> ResolvedGpus:
    """Resolve the job's AMD/Intel GPUs to physical cards (module docstring gives the rules).

    Args:
        slurm_job_gpus: ``SLURM_JOB_GPUS`` (GRES indices or device files).
        rocr_visible_devices, hip_visible_devices: ROCm's variables (``GPU-<id>`` or in-job ordinals).
        ze_affinity_mask: Level Zero's ``k`` / ``k.t`` list (in-job ordinals, tiles).
        ze_flat_device_hierarchy: the job's ``ZE_FLAT_DEVICE_HIERARCHY`` (COMPOSITE, FLAT,
            COMBINED; unset = FLAT): what a ``ZE_AFFINITY_MASK`` ordinal counts (module docstring).
        drm_root, kfd_root: sysfs roots (``hardware.drm_root`` / ``hardware.kfd_root``).
        all_if_unset: no allocation at all -> every GPU of the node that has hwmon files
            (``slurm-energy run`` outside Slurm, where ordinals are the node's own).

    Returns:
        :class:`ResolvedGpus` of :class:`Gpu`, duplicates removed; empty with ``reason``
        when nothing was allocated or the node has no AMD/Intel GPU.

    Raises:
        GpuResolveError: a token names no device, an in-job ordinal with no allocation to map it
            through, or an unknown hierarchy mode. The message names the variable, the token and the fix.
    """
    mode = (ze_flat_device_hierarchy or ZE_DEFAULT_HIERARCHY).strip().upper()
    if mode not in ZE_HIERARCHIES:
        raise GpuResolveError(f"ZE_FLAT_DEVICE_HIERARCHY={ze_flat_device_hierarchy}: expected one of "
                              f"{', '.join(ZE_HIERARCHIES)} (unset means {ZE_DEFAULT_HIERARCHY})")
    gpus = discover_drm_gpus(drm_root, kfd_root)
    if not gpus:
        return ResolvedGpus([], f"no AMD/Intel GPU under {drm_root}")
    slots = _slots(gpus)
    sjg = split_tokens(slurm_job_gpus)
    if sjg:
        alloc = [_physical(t, slots, gpus, "SLURM_JOB_GPUS") for t in sorted(sjg, key=_gres_key)]
    elif all_if_unset:
        alloc = [_whole_or_partition(g, i, "all GPUs") for _, g, i in slots]
    else:
        alloc = []
    chosen = alloc
    for var, val in (("ROCR_VISIBLE_DEVICES", rocr_visible_devices), ("HIP_VISIBLE_DEVICES", hip_visible_devices)):
        toks = split_tokens(val)
        if toks:
            chosen = [_ordinal(t, chosen, var) if t.isdigit() else _by_uuid(t, gpus, f"{var}={t}") for t in toks]
    ze = split_tokens(ze_affinity_mask)
    if ze:
        chosen = _ze_select(ze, chosen, gpus, mode)
    if not chosen:
        return ResolvedGpus([], "no GPUs allocated (SLURM_JOB_GPUS, ROCR/HIP_VISIBLE_DEVICES, ZE_AFFINITY_MASK empty)")
    return ResolvedGpus(_no_double_count(chosen))


def _gres_key(tok: str) -> tuple[int, int, str]:
    """GRES indices sort numerically (in-job ordinals follow the allocation's index order)."""
    return (0, int(tok), "") if tok.isdigit() else (1, 0, tok)


class DrmBackend:
    """AMD (amdgpu) and Intel (i915, xe) GPUs from the kernel's DRM and hwmon sysfs (no vendor library).

    In the Prolog: ``SLURM_JOB_GPUS``, then ``ROCR/HIP_VISIBLE_DEVICES`` and ``ZE_AFFINITY_MASK``;
    slurmd writes the Prolog's ``ZE_AFFINITY_MASK`` from the GRES allocation itself
    (``gres_common.c``: one local index per GRES device, i.e. per card named by gres.conf's
    ``File=/dev/dri/renderD*``), so its ordinals count cards (COMPOSITE), whatever the runtime's
    FLAT default, unless slurmd's environment names a mode. In a job or outside Slurm: every GPU of
    the node when nothing is allocated, the runtime's own default hierarchy.
    """

    name = "drm"
    reader = "slurm_energy.sampling.readers.drm_hwmon:open_gpu_readers"

    def resolve(self, env: Mapping[str, str], hw: HardwareConfig, *, in_prolog: bool) -> ResolvedGpus:
        """See :class:`slurm_energy.devices.gpu.GpuBackend`."""
        ze_mode = env.get("ZE_FLAT_DEVICE_HIERARCHY") or ("COMPOSITE" if in_prolog else None)
        return resolve_drm_gpus(env.get("SLURM_JOB_GPUS"), env.get("ROCR_VISIBLE_DEVICES"),
                                env.get("HIP_VISIBLE_DEVICES"), env.get("ZE_AFFINITY_MASK"),
                                hw.drm_root, hw.kfd_root, all_if_unset=not in_prolog,
                                ze_flat_device_hierarchy=ze_mode)

    def node_count(self, hw: HardwareConfig) -> int | None:
        """The AMD/Intel render nodes Slurm's GRES order counts (a partitioned card: one per
        partition; integrated graphics left out); None where there is none."""
        return len(_slots(discover_drm_gpus(hw.drm_root, hw.kfd_root))) or None


#: the registry's entry (:data:`slurm_energy.devices.gpu.GPU_BACKENDS`)
BACKEND = DrmBackend()

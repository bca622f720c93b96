"""AMD (amdgpu) and Intel (xe, i915) GPU energy from the kernel's hwmon files, for the job's GPUs.

Per card, the best source its hwmon directory has, chosen once at start (the counter wins):

1. ``energyN_input`` -- µJ, cumulative -> ``method="counter"``. i915 and xe have it (xe: the
   ``card`` channel when labelled so, else ``pkg``); amdgpu's hwmon has none (its accumulator is
   read through AMD SMI, :mod:`.amdsmi_reader`), a file there would be read the same way. The
   drivers keep the 32-bit hardware register in a 64-bit software accumulator and account one
   register wrap between two reads (``sysfs-driver-intel-i915-hwmon``: a 1 W load wraps the
   register in about 3 days, so reads every few seconds never miss one); the value read here
   therefore does not wrap (``max_energy_range_uj=None``). It restarts from 0 only when the driver
   reloads: accounting drops, never negates, an interval where a counter went backwards.
2. ``power1_average`` then ``power1_input`` -- µW -> ``method="power_integration"``, ``power_w``
   (amdgpu: the SMU's average socket power on MI200 and earlier; the current socket power on MI300,
   whose SMU answers no average, ``smu_v13_0_6_ppt.c``).
3. Neither: ``method="unavailable"`` (flag ``no_energy_or_power``; energy ``None``, never 0), or
   ``tdp_estimate`` with the site's ``gpu_fallback_w`` x utilisation, flagged ``gpu_fallback_w``.

A file present at start that later cannot be read gives ``unavailable`` with ``eacces`` or
``read_error`` for that sample. Utilisation: amdgpu ``gpu_busy_percent``; VRAM in use:
``mem_info_vram_used``. Rated power (:meth:`DrmHwmonReader.devices`): amdgpu ``power1_cap``
(µW, the enforced cap), i915/xe ``power1_rated_max`` (µW, the card's default TDP).

A compute partition or tile reads its card's counter/power and is flagged ``share_estimated`` and
``partition_fraction:<f>`` / ``tile_fraction:<f>`` (accounting multiplies by f, as for a MIG slice).
A die of a multi-die package (MI250X) reads the *primary* die's files, which report the package
(:mod:`slurm_energy.devices.drm`), flagged ``package_fraction:<f>`` (f = 1 / dies): the secondary
die's own 0 W is never integrated into 0 J. A power file that reads exactly 0 W while the GPU's
``gpu_busy_percent`` is above 0 is not a measurement (a busy GPU draws power; a die whose package
power its sibling reports reads 0): that sample is ``unavailable``, flag ``zero_power_while_busy``;
a partition whose count is unknown is ``unavailable`` (``partition_fraction_unknown``). A tile of
an i915 card is read from its own hwmon (``i915_gt<N>/energy1_input``) where the driver registers
one: measured, flagged ``tile_counter``, no share applied.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slurm_energy.devices.drm import DEFAULT_DRM_ROOT, DEFAULT_KFD_ROOT, DrmGpu, discover_drm_gpus, read_text
from slurm_energy.devices.gpu import Gpu
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading, UnavailableReader

if TYPE_CHECKING:
    from slurm_energy.devices.hardware import HardwareConfig


def _read_int(path: str) -> int:
    return int(read_text(path))


def _opt_int(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return _read_int(path)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def energy_file(hwmon: str) -> str | None:
    """The card's cumulative energy file: the channel labelled ``card``, else ``pkg``, else the
    lowest-numbered ``energyN_input``; None if the driver has none."""
    try:
        names = os.listdir(hwmon)
    except OSError:
        return None
    chans = sorted(int(m.group(1)) for n in names if (m := re.match(r"^energy(\d+)_input$", n)))
    if not chans:
        return None
    labels = {}
    for c in chans:
        try:
            labels[read_text(os.path.join(hwmon, f"energy{c}_label")).lower()] = c
        except (OSError, UnicodeDecodeError):
            pass
    c = labels.get("card", labels.get("pkg", chans[0]))
    return os.path.join(hwmon, f"energy{c}_input")


def power_file(hwmon: str) -> str | None:
    """``power1_average`` if present, else ``power1_input`` (µW); None if neither exists."""
    for n in ("power1_average", "power1_input"):
        p = os.path.join(hwmon, n)
        if os.path.exists(p):
            return p
    return None


@dataclass
class _Target:
    gpu: Gpu
    card: DrmGpu | None
    mode: str  # counter | power_integration | tdp_estimate | unavailable
    path: str | None = None  # the energy or power file read
    error: str = ""
    rated_w: float | None = None
    rated_src: str = ""
    own_counter: bool = False  # a tile read from its own counter (i915_gt<N>): measured, no share
    src: DrmGpu | None = None  # the die whose hwmon is read (the package's primary die), else the card


class DrmHwmonReader(Reader):
    """Reads the job's AMD/Intel GPUs from hwmon sysfs files.

    Args:
        gpus: the job's GPUs, :class:`~slurm_energy.devices.gpu.Gpu` s or their dicts (from the Prolog context).
        drm_root, kfd_root: sysfs roots (site config ``hardware.drm_root`` / ``hardware.kfd_root``).
        fallback_w: site's rated W per GPU for cards with no energy or power file (labelled
            ``tdp_estimate``); None = leave them unmeasured.

    Raises:
        ValueError: ``fallback_w`` negative (names the field).
    """

    name = "drm-hwmon"
    device_class = "gpu"

    def __init__(self, gpus: list[Gpu | dict[str, Any]], drm_root: str = DEFAULT_DRM_ROOT,
                 kfd_root: str = DEFAULT_KFD_ROOT, fallback_w: float | None = None):
        if fallback_w is not None and fallback_w < 0:
            raise ValueError(f"fallback_w: GPU fallback wattage must be >= 0 W, got {fallback_w!r}")
        self.fallback_w = fallback_w
        cards = {g.pci_bus_id: g for g in discover_drm_gpus(drm_root, kfd_root)}
        self.targets = [self._target(Gpu.of(g), cards)
                        for g in gpus]

    def _target(self, g: Gpu, cards: dict[str, DrmGpu]) -> _Target:
        card = cards.get(g.bus_id)
        if card is None:
            return _Target(g, None, "unavailable", error="gpu_not_found")
        t = _Target(g, card, "unavailable")
        src = cards.get(card.package[0], card) if len(card.package) > 1 else card
        t.src = src
        if src.hwmon:
            cap = _opt_int(os.path.join(src.hwmon, "power1_rated_max" if card.vendor == "intel" else "power1_cap"))
            if cap:
                t.rated_w = cap / 1e6
                t.rated_src = f"hwmon {'power1_rated_max' if card.vendor == 'intel' else 'power1_cap'}"
        if g.fraction_unknown:
            t.error = "partition_fraction_unknown"
            return t
        tile_hw = card.tile_hwmon.get(g.index) if g.share == "tile" and g.index is not None else None
        e = energy_file(tile_hw) if tile_hw else None
        if e is not None:
            t.mode, t.path, t.own_counter = "counter", e, True
            return t
        e = energy_file(src.hwmon) if src.hwmon else None
        p = power_file(src.hwmon) if src.hwmon else None
        if e is not None:
            t.mode, t.path = "counter", e
        elif p is not None:
            t.mode, t.path = "power_integration", p
        elif self.fallback_w is not None:
            t.mode = "tdp_estimate"
        else:
            t.error = "no_hwmon" if not card.hwmon else "no_energy_or_power"
        return t

    def devices(self) -> list[DeviceStatic]:
        """One :class:`DeviceStatic` per GPU / partition / tile; rated power x share fraction (W)."""
        out = []
        for t in self.targets:
            g = t.gpu
            rated, src = t.rated_w, t.rated_src
            if t.mode == "tdp_estimate":
                rated, src = self.fallback_w, "site config gpu_fallback_w"
            if rated is not None and g.fraction is not None:
                rated, src = rated * g.fraction, f"{src} x {g.share} fraction"
            extra: dict[str, Any] = {"energy_source": t.mode, "pci_bus_id": g.bus_id, "vendor": g.vendor,
                     "driver": t.card.driver if t.card else "", "energy_file": t.path or ""}
            if g.share:
                extra.update(share=g.share, share_detail=g.share_detail, share_fraction=g.fraction)
            if t.error:
                extra["error"] = t.error
            out.append(DeviceStatic("gpu", g.device_id, model=g.model, rated_power_w=rated,
                                    rated_power_source=src, extra=extra))
        return out

    def read(self) -> list[Reading]:
        """One :class:`Reading` per GPU, now. Never raises. Each file is read once per call, so
        the partitions of one card (up to 8 in CPX) share one reading of its counter."""
        self._seen: dict[str, object] = {}
        try:
            return [self._read_one(t) for t in self.targets]
        finally:
            self._seen = {}

    def _int(self, path: str) -> int:
        """``_read_int(path)`` once per :meth:`read` (the value, or the same exception again)."""
        if path not in self._seen:
            try:
                self._seen[path] = _read_int(path)
            except (OSError, ValueError, UnicodeDecodeError) as e:
                self._seen[path] = e
        v = self._seen[path]
        if isinstance(v, BaseException):
            raise v
        return v  # type: ignore[return-value]

    def _opt(self, path: str) -> int | None:
        try:
            return self._int(path)
        except (OSError, ValueError, UnicodeDecodeError):
            return None

    def _read_one(self, t: _Target) -> Reading:
        g = t.gpu
        flags: list[str] = []
        if t.own_counter:
            flags.append("tile_counter")  # the tile's own energy: measured, not a share of the card
        elif g.share:
            flags.append("share_estimated")
            if g.fraction is not None:
                flags.append(f"{g.share}_fraction:{g.fraction:.6g}")
        if t.mode == "unavailable" or t.card is None:
            return Reading("gpu", g.device_id, "unavailable", flags=flags + [t.error or "unavailable"])
        dev = t.card.device_dir
        r = Reading("gpu", g.device_id, t.mode, flags=flags)
        busy = self._opt(os.path.join(dev, "gpu_busy_percent"))
        r.util = None if busy is None else busy / 100.0
        r.mem_bytes = self._opt(os.path.join(dev, "mem_info_vram_used"))
        try:
            if t.mode == "counter":
                assert t.path is not None  # a counter mode has its file
                r.energy_uj = self._int(t.path)
                pf = power_file(os.path.dirname(t.path))
                pw = self._opt(pf) if pf else None
                if pw is not None:  # power beside the counter: accounting cross-checks a lying counter
                    r.power_w = pw / 1e6
            elif t.mode == "power_integration":
                r.power_w = self._int(t.path) / 1e6  # type: ignore[arg-type]
                if r.power_w == 0 and r.util:  # busy but 0 W: not a reading of this GPU's power
                    return Reading("gpu", g.device_id, "unavailable", util=r.util, mem_bytes=r.mem_bytes,
                                   flags=flags + ["zero_power_while_busy"])
            else:
                u = r.util
                if u is None:
                    u = 1.0
                    flags.append("util_unknown_assumed_1")
                r.mean_power_w = self.fallback_w * u  # type: ignore[operator]
                flags.append("gpu_fallback_w")
        except PermissionError as exc:
            fl = "eacces" if exc.errno in (errno.EACCES, errno.EPERM, None) else "read_error"
            return Reading("gpu", g.device_id, "unavailable", util=r.util, mem_bytes=r.mem_bytes, flags=flags + [fl])
        except (OSError, ValueError, UnicodeDecodeError):
            return Reading("gpu", g.device_id, "unavailable", util=r.util, mem_bytes=r.mem_bytes,
                           flags=flags + ["read_error"])
        return r


def open_gpu_readers(hw: HardwareConfig, gpus: list[Gpu], notes: list[str], light: bool = False) -> list[Reader]:
    """The ``drm`` backend's reader factory (:class:`~slurm_energy.devices.gpu.GpuBackend`): the
    hwmon reader for the job's AMD/Intel GPUs, wrapped by the amdsmi reader for AMD GPUs where
    ``amdsmi`` is installed; ``unavailable`` stand-ins if it fails.

    ``light`` (the Prolog's own reading): where amdsmi is installed the AMD GPUs are left out of
    that row (not imported in the Prolog), so a device's series comes from one source (the
    sampler's first sample starts it)."""
    import importlib.util

    smi = any(g.vendor == "amd" for g in gpus) and importlib.util.find_spec("amdsmi") is not None  # no import
    if light and smi:
        notes.append("amdsmi: AMD GPU readings start with the sampler (not imported in the Prolog)")
        return []
    try:
        hwmon = DrmHwmonReader(list[Gpu | dict[str, Any]](gpus), hw.drm_root, hw.kfd_root,
                               fallback_w=hw.gpu_fallback_w)
        if not smi:
            return [hwmon]
        from slurm_energy.sampling.readers.amdsmi_reader import AmdSmiReader

        r = AmdSmiReader(hwmon)
        if r.reason:
            notes.append(f"amdsmi: {r.reason}; hwmon files read instead")
        return [r]
    except Exception as e:
        notes.append(f"drm-hwmon: {type(e).__name__}: {e}")
        return [UnavailableReader("gpu", [g.device_id for g in gpus], f"reader_error:{type(e).__name__}")]

"""RAPL energy counters from the Linux powercap sysfs tree (``/sys/class/powercap``).

Zones are enumerated by their sysfs directory name, which is also their key (``device_id``):
``intel-rapl:N`` (top-level: a package, a die of a package, or psys), ``intel-rapl:N:M`` (sub-zones:
core, uncore, dram), ``intel-rapl-mmio:N`` (the same package read through MMIO on some Intel client
parts). The kernel names a zone ``"%s:%x"`` (parent name, zone id in *hex*: drivers/powercap/
powercap_sys.c, ``powercap_register_zone``), so the 11th package is ``intel-rapl:a`` and its first
sub-zone ``intel-rapl:a:0``. AMD Zen CPUs are exposed by the same ``intel_rapl_msr`` driver under the
same ``intel-rapl`` control type, and so are the TPMI-based zones of newer Xeons (intel_rapl_tpmi.c
registers the control type ``intel-rapl`` too; ``intel-rapl-tpmi`` is accepted as well). Names are
the only thing that says what a zone measures (``package-0``, ``package-0-die-1``, ``dram``, ``core``,
``uncore``, ``psys``), and psys may sit anywhere in the list (TPMI registers one per package as a
top-level zone between the packages). Zones sort by their numeric path (``intel-rapl:a`` after
``intel-rapl:9``), so any number of sockets works. The ``name`` file is used
only to classify a zone, never as a key: names repeat (``dram`` under every socket, ``package-0``
under both ``intel-rapl`` and ``intel-rapl-mmio``).

Overlap policy (zones are nested, so adding every zone would count energy twice or three times;
see Linux Documentation/power/powercap/powercap.rst and the hierarchy ``package ⊃ core, uncore``;
``psys ⊃ package + dram`` on platforms that have psys; dram is *not* inside package):

* every ``package-*`` zone of ``intel-rapl`` -> one ``cpu`` device (sockets and dies are disjoint);
* every ``dram`` zone -> one ``ram`` device;
* ``core`` and ``uncore`` are inside their package: never reported;
* ``intel-rapl-mmio`` (and ``intel-rapl-tpmi``) package zones duplicate the ``intel-rapl`` package
  of the same name: reported only when no ``intel-rapl`` zone has that name;
* ``psys`` contains package and dram: reported (as ``cpu``, flagged ``psys``) only when there is no
  package zone at all;
* zones with other names are ignored;
* package zones that read one counter (AMD Zen with kernels 6.9-6.11 list one ``package-P-die-D``
  zone per CCD, each reading the socket's one package MSR: kernel commit 26096aed255f
  "powercap/intel_rapl: Fix the energy-pkg event for AMD CPUs", whose before/after listing of a
  2-socket 8-CCD Zen 4 server the fakes copy) are found by their counters, not by vendor: zones
  of one package number whose ``energy_uj`` agree within :data:`SAME_COUNTER_UJ` in two passes
  read back to back are one counter; the first is reported, the others are not
  (``why = "reads the same counter as ..."``).

Wrap detection is bounded by the zone's highest ``constraint_*_max_power_uw``; a zone with an energy
range but no readable power limit (AMD: intel_rapl_common gives AMD no limit registers) takes the
CPU's rated power (:meth:`RaplReader.bound_wraps`, the bundled table or the site config) and says so
in its device's ``extra["wrap_bound"]``: a gap longer than range / rated power is then flagged
``possible_multiple_wrap`` as for a zone with a limit.

DRAM energy units: Intel servers count DRAM in a fixed 15.3 uJ unit (intel_rapl_common.c
``rapl_defaults_hsw_server.dram_domain_energy_unit = 15300``), except Sapphire Rapids, whose DRAM
domain uses the package's unit (MSR_RAPL_POWER_UNIT). Kernels 5.9 (2d798d9f5967, SPR support) to
6.0 applied the 15.3 uJ quirk to SPR too, until 4c081324df56 ("powercap: intel_rapl: Use standard
Energy Unit for SPR Dram RAPL domain", 6.1, backported to 5.9+ stable). The true unit is not
readable from sysfs, so the value is not corrected: the DRAM zones of a Sapphire Rapids CPU (family
6 model 0x8F) under a kernel older than 6.1 are flagged ``dram_unit_suspect:<commit>``.

Errors never escape :meth:`RaplReader.read`: ``energy_uj`` unreadable by the sampler's user (kernel
>= 5.10 makes it root-only, ``EACCES``) gives ``method="unavailable"`` with flag ``eacces`` (the
sampler then falls back to the labelled TDP model); other read errors give flag ``read_error``. An
unreadable ``max_energy_range_uj`` gives flag ``range_unreadable`` (accounting then drops, never
negates, an interval where the counter went backwards).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass, field

from slurm_energy.sampling.files import KeptFiles
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurm_energy.sampling.files import FileSource

DEFAULT_ROOT = "/sys/class/powercap"

#: Control types we read. ``intel-rapl`` also covers AMD Zen (driver intel_rapl_msr).
CONTROL_TYPES = ("intel-rapl", "intel-rapl-tpmi", "intel-rapl-mmio")

#: Zone ids are hex (``"%s:%x"``, drivers/powercap/powercap_sys.c).
_ZONE_RE = re.compile(r"^(intel-rapl|intel-rapl-tpmi|intel-rapl-mmio):([0-9a-f]+(?::[0-9a-f]+)*)$")
_PKG_RE = re.compile(r"^package-(\d+)(?:-die-(\d+))?$")

#: Two package zones whose counters differ by at most this much (uJ) in two passes read back to
#: back read one counter. 1 J: an AMD package counter (15.3 uJ units, updated every ~1 ms) moves
#: well under 1 J between two sysfs reads; two real sockets agree within 1 J by chance about once
#: in 65,000 (a 65.7 kJ range).
SAME_COUNTER_UJ = 1_000_000

#: Intel Sapphire Rapids (family 6, model 0x8F): DRAM unit quirk wrongly applied by kernels 5.9-6.0.
SPR_FAMILY_MODEL = (6, 0x8F)
SPR_DRAM_FIXED_IN = (6, 1)
SPR_DRAM_FLAG = "dram_unit_suspect:linux-4c081324df56"


def read_text(path: str) -> str:
    """Read one sysfs attribute (module-level so tests can simulate EACCES on a root-run box)."""
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _read_int(path: str) -> int:
    return int(read_text(path))


@dataclass
class RaplZone:
    """One powercap zone: ``key`` e.g. ``intel-rapl:0:0``, ``kind`` package/dram/core/uncore/psys/other."""

    key: str
    path: str  # absolute directory
    control_type: str
    index: tuple[int, ...]  # numeric path, e.g. (0, 0)
    name: str  # content of the ``name`` file ("" if unreadable)
    kind: str
    reported: bool = False
    device_class: str = ""
    why: str = ""  # why (not) reported, for ``slurm-energy doctor``
    flags: list[str] = field(default_factory=list)


def _kind(name: str, depth: int) -> str:
    if name.startswith("package"):
        return "package"
    if name in ("dram", "core", "uncore", "psys"):
        return name
    if name == "" and depth == 1:
        return "package"  # name unreadable on a top-level zone: treat as a package, flagged
    return "other"


def discover_zones(root: str = DEFAULT_ROOT) -> list[RaplZone]:
    """Find RAPL zones under ``root`` and apply the overlap policy (module docstring).

    ``root`` may be the flat class directory (``/sys/class/powercap``, whose entries are links to
    the nested tree) or the nested tree itself; zones found twice are kept once by key.

    Returns:
        Every zone found, in (control type, numeric path) order, each with ``reported``,
        ``device_class`` ("cpu"/"ram") and ``why``. Empty if ``root`` does not exist.
    """
    if not os.path.isdir(root):
        return []
    zones = [_zone(key, path) for key, path in _zone_dirs(root).items()]
    zones.sort(key=lambda z: (CONTROL_TYPES.index(z.control_type), z.index))
    _apply_overlap_policy(zones)
    return zones


def _zone_dirs(root: str) -> dict[str, str]:
    """``{zone key: directory}`` of every RAPL zone under ``root`` (first path found per key)."""
    found: dict[str, str] = {}
    stack = [(root, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for e in entries:
            p = os.path.join(d, e)
            if _ZONE_RE.match(e):
                found.setdefault(e, p)
                if depth < 6:
                    stack.append((p, depth + 1))
            elif e in CONTROL_TYPES and depth == 0:
                stack.append((p, depth + 1))
    return found


def _zone(key: str, path: str) -> RaplZone:
    """The zone ``key`` (e.g. ``intel-rapl:0:1``) at ``path``: control type, index, name, kind."""
    m = _ZONE_RE.match(key)
    assert m is not None  # keys come from _zone_dirs, which matched them
    ctype, idx = m.group(1), tuple(int(x, 16) for x in m.group(2).split(":"))
    try:
        name = read_text(os.path.join(path, "name"))
    except (OSError, UnicodeDecodeError):
        name = ""
    z = RaplZone(key, path, ctype, idx, name, _kind(name, len(idx)))
    if name == "":
        z.flags.append("name_unreadable")
    return z


def _apply_overlap_policy(zones: list[RaplZone]) -> None:
    """Mark which zones are reported (and as which device class) and why the others are not."""
    msr_pkg_names = {z.name for z in zones if z.control_type == "intel-rapl" and z.kind == "package"}
    any_pkg = any(z.kind == "package" for z in zones)
    for z in zones:
        if z.kind == "package":
            if z.control_type != "intel-rapl" and z.name in msr_pkg_names:
                z.why = f"duplicates intel-rapl {z.name} ({z.control_type} view of the same package)"
            else:
                z.reported, z.device_class, z.why = True, "cpu", "package"
        elif z.kind == "dram":
            z.reported, z.device_class, z.why = True, "ram", "dram (not inside package)"
        elif z.kind in ("core", "uncore"):
            z.why = f"{z.kind} is inside its package"
        elif z.kind == "psys":
            if any_pkg:
                z.why = "psys contains package and dram, which are reported"
            else:
                z.reported, z.device_class, z.why = True, "cpu", "psys: no package zone"
                z.flags.append("psys")
        else:
            z.why = f"unknown zone name {z.name!r}"


def _package_number(name: str) -> int | None:
    m = _PKG_RE.match(name)
    return int(m.group(1)) if m else None


def _drop_same_counter(zones: list[RaplZone]) -> None:
    """Unreport package zones that read the same counter as an earlier zone of the same package
    number (module docstring): counters within :data:`SAME_COUNTER_UJ` in two passes."""
    pkgs = [z for z in zones if z.reported and z.kind == "package" and _package_number(z.name) is not None]
    if len(pkgs) < 2:
        return
    passes = []
    for _ in range(2):
        vals: dict[str, int | None] = {}
        for z in pkgs:
            try:
                vals[z.key] = _read_int(os.path.join(z.path, "energy_uj"))
            except (OSError, ValueError, UnicodeDecodeError):
                vals[z.key] = None  # EACCES etc.: nothing says they are one counter
        passes.append(vals)
    kept: list[RaplZone] = []
    for z in pkgs:
        for k in kept:
            if _package_number(k.name) != _package_number(z.name):
                continue
            if all(_same(p[z.key], p[k.key]) for p in passes):
                z.reported, z.device_class = False, ""
                z.why = f"reads the same counter as {k.key} ({k.name}): one package counter behind several zones"
                break
        else:
            kept.append(z)


def _same(a: int | None, b: int | None) -> bool:
    """Two counter values that one counter gave (within :data:`SAME_COUNTER_UJ`); unread: False."""
    return a is not None and b is not None and abs(a - b) <= SAME_COUNTER_UJ


def _kernel_version(release: str) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _flag_dram_unit(zones: list[RaplZone], cpuinfo: str, kernel_release: str | None) -> None:
    """Flag the DRAM zones of a Sapphire Rapids CPU under a kernel that applied the 15.3 uJ quirk
    to it (:data:`SPR_FAMILY_MODEL`, :data:`SPR_DRAM_FIXED_IN`)."""
    dram = [z for z in zones if z.device_class == "ram"]
    if not dram:
        return
    from slurm_energy.devices.info import cpu_family_model

    if cpu_family_model(cpuinfo) != SPR_FAMILY_MODEL:
        return
    ver = _kernel_version(os.uname().release if kernel_release is None else kernel_release)
    if ver is not None and ver >= SPR_DRAM_FIXED_IN:
        return
    for z in dram:
        z.flags.append(SPR_DRAM_FLAG)


def _max_power_w(path: str) -> tuple[float | None, float | None]:
    """(long-term constraint max power, highest constraint max power), W; None if absent/0."""
    first = None
    best = None
    for i in range(8):
        p = os.path.join(path, f"constraint_{i}_max_power_uw")
        if not os.path.exists(p):
            continue
        try:
            w = _read_int(p) / 1e6
        except (OSError, ValueError):
            continue
        if w <= 0:
            continue
        if i == 0:
            first = w
        best = w if best is None else max(best, w)
    return first, best


class RaplReader(Reader):
    """Reads the reported RAPL zones' ``energy_uj`` counters (method ``counter``).

    Args:
        root: powercap class directory (default ``/sys/class/powercap``; tests pass a fake tree).
        files: where the counters (``energy_uj``, a ``max_energy_range_uj`` unreadable at the
            start) are read at each :meth:`read` (default: descriptors kept open,
            :class:`~slurm_energy.sampling.files.KeptFiles`; the Prolog's reading records or
            replays them). The zones' names and limits are read once, here, from the files.
        cpuinfo, kernel_release: where the CPU's family/model and the kernel's version come from
            (the DRAM unit check; default /proc/cpuinfo and ``os.uname().release``).

    Attributes:
        zones: every zone found with the policy decision (see :func:`discover_zones`).
        reason: why no zone is reported ("" when some are), e.g. ``"/sys/class/powercap absent"``.
    """

    name = "rapl"
    device_class = "cpu"

    def __init__(self, root: str = DEFAULT_ROOT, files: FileSource | None = None,
                 cpuinfo: str = "/proc/cpuinfo", kernel_release: str | None = None):
        self.root = root
        self._kept: KeptFiles | None = None  # the reader's own (closed by close()), when none is passed
        if files is None:
            files = self._kept = KeptFiles()
        self.files: FileSource = files
        self.zones = discover_zones(root)
        _drop_same_counter(self.zones)
        self._reported = [z for z in self.zones if z.reported]
        self._range: dict[str, int | None] = {}
        self._maxp: dict[str, tuple[float | None, float | None]] = {}
        self._wrap_bound: dict[str, str] = {}
        for z in self._reported:
            self._range[z.key] = self._try_range(z, None)
            self._maxp[z.key] = _max_power_w(z.path)
        _flag_dram_unit(self._reported, cpuinfo, kernel_release)
        if not os.path.isdir(root):
            self.reason = f"{root} absent (no powercap/RAPL driver on this node)"
        elif not self._reported:
            self.reason = f"no RAPL package/dram zone under {root}"
        else:
            self.reason = ""

    def unbounded_zones(self) -> list[str]:
        """Keys of the reported package zones with an energy range but no readable power limit:
        their wrap detection needs :meth:`bound_wraps`."""
        return [z.key for z in self._reported if z.device_class == "cpu" and self._range[z.key] is not None
                and self._maxp[z.key][1] is None]

    def bound_wraps(self, rated_w: float, source: str) -> None:
        """Bound the wrap detection of :meth:`unbounded_zones` by ``rated_w`` (W per package, e.g.
        the CPU's TDP from the bundled table; ``source`` says where it came from)."""
        if rated_w <= 0:
            return
        for key in self.unbounded_zones():
            self._maxp[key] = (None, float(rated_w))
            self._wrap_bound[key] = f"rated power {rated_w:g} W ({source})"

    @property
    def available(self) -> bool:
        """True when at least one zone is reported (its counter may still be EACCES)."""
        return bool(self._reported)

    def _energy_uj(self, z: RaplZone) -> int:
        """The zone's counter, uJ, read through :attr:`files`. Raises OSError, ValueError."""
        return int(self.files.read(os.path.join(z.path, "energy_uj"), 64))

    def close(self) -> None:
        """Close the kept descriptors (of the reader's own :class:`KeptFiles`)."""
        if self._kept is not None:
            self._kept.close()

    def _try_range(self, z: RaplZone, files: FileSource | None) -> int | None:
        path = os.path.join(z.path, "max_energy_range_uj")
        try:
            v = int(files.read(path, 64)) if files is not None else _read_int(path)
            return v if v > 0 else None
        except (OSError, ValueError):
            return None

    def devices(self) -> list[DeviceStatic]:
        """One :class:`DeviceStatic` per reported zone; rated power = constraint_0 max power (W)."""
        out: list[DeviceStatic] = []
        for z in self._reported:
            long_w, _ = self._maxp[z.key]
            out.append(
                DeviceStatic(
                    device_class=z.device_class,
                    device_id=z.key,
                    model=z.name,
                    rated_power_w=long_w,
                    rated_power_source="RAPL constraint_0_max_power_uw" if long_w else "",
                    extra={"zone_path": z.path, "zone_name": z.name, "max_energy_range_uj": self._range[z.key],
                           **({"wrap_bound": self._wrap_bound[z.key]} if z.key in self._wrap_bound else {})},
                )
            )
        return out

    def read(self) -> list[Reading]:
        """One :class:`Reading` per reported zone. Never raises (see module docstring for flags)."""
        out: list[Reading] = []
        for z in self._reported:
            flags = list(z.flags)
            rng = self._range.get(z.key)
            if rng is None:
                rng = self._range[z.key] = self._try_range(z, self.files)
                if rng is None:
                    flags.append("range_unreadable")
            _, max_w = self._maxp[z.key]
            try:
                e = self._energy_uj(z)
            except PermissionError as exc:
                fl = "eacces" if exc.errno in (errno.EACCES, errno.EPERM, None) else "read_error"
                out.append(Reading(z.device_class, z.key, "unavailable", flags=flags + [fl]))
                continue
            except (OSError, ValueError, UnicodeDecodeError):
                out.append(Reading(z.device_class, z.key, "unavailable", flags=flags + ["read_error"]))
                continue
            out.append(
                Reading(
                    z.device_class,
                    z.key,
                    "counter",
                    energy_uj=e,
                    max_energy_range_uj=rng,
                    max_power_w=max_w,
                    flags=flags,
                )
            )
        return out

"""RAPL energy counters from the Linux powercap sysfs tree (``/sys/class/powercap``).

Zones are enumerated by their sysfs directory name, which is also their key (``device_id``):
``intel-rapl:N`` (top-level: a package, a die of a package, or psys), ``intel-rapl:N:M`` (sub-zones:
core, uncore, dram), ``intel-rapl-mmio:N`` (the same package read through MMIO on some Intel client
parts). AMD Zen CPUs are exposed by the same ``intel_rapl_msr`` driver under the same
``intel-rapl`` control type; names are the only thing that says what a zone measures (``package-0``,
``package-0-die-1``, ``dram``, ``core``, ``uncore``, ``psys``). Zones sort by their numeric path
(``intel-rapl:10`` after ``intel-rapl:9``), so any number of sockets works. The ``name`` file is used
only to classify a zone, never as a key: names repeat (``dram`` under every socket, ``package-0``
under both ``intel-rapl`` and ``intel-rapl-mmio``).

Overlap policy (zones are nested, so adding every zone would count energy twice or three times;
see Linux Documentation/power/powercap/powercap.rst and the hierarchy ``package ⊃ core, uncore``;
``psys ⊃ package + dram`` on platforms that have psys; dram is *not* inside package):

* every ``package-*`` zone of ``intel-rapl`` -> one ``cpu`` device (sockets and dies are disjoint);
* every ``dram`` zone -> one ``ram`` device;
* ``core`` and ``uncore`` are inside their package: never reported;
* ``intel-rapl-mmio`` package zones duplicate the MSR package: reported only when no ``intel-rapl``
  zone has the same name;
* ``psys`` contains package and dram: reported (as ``cpu``, flagged ``psys``) only when there is no
  package zone at all;
* zones with other names are ignored.

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
CONTROL_TYPES = ("intel-rapl", "intel-rapl-mmio")

_ZONE_RE = re.compile(r"^(intel-rapl|intel-rapl-mmio):(\d+(?::\d+)*)$")


def _read_text(path: str) -> str:
    """Read one sysfs attribute (module-level so tests can simulate EACCES on a root-run box)."""
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _read_int(path: str) -> int:
    return int(_read_text(path))


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
    ctype, idx = m.group(1), tuple(int(x) for x in m.group(2).split(":"))
    try:
        name = _read_text(os.path.join(path, "name"))
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
            if z.control_type == "intel-rapl-mmio" and z.name in msr_pkg_names:
                z.why = f"duplicates intel-rapl {z.name} (MMIO view of the same package)"
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

    Attributes:
        zones: every zone found with the policy decision (see :func:`discover_zones`).
        reason: why no zone is reported ("" when some are), e.g. ``"/sys/class/powercap absent"``.
    """

    name = "rapl"
    device_class = "cpu"

    def __init__(self, root: str = DEFAULT_ROOT, files: FileSource | None = None):
        self.root = root
        self._kept: KeptFiles | None = None  # the reader's own (closed by close()), when none is passed
        if files is None:
            files = self._kept = KeptFiles()
        self.files: FileSource = files
        self.zones = discover_zones(root)
        self._reported = [z for z in self.zones if z.reported]
        self._range: dict[str, int | None] = {}
        self._maxp: dict[str, tuple[float | None, float | None]] = {}
        for z in self._reported:
            self._range[z.key] = self._try_range(z, None)
            self._maxp[z.key] = _max_power_w(z.path)
        if not os.path.isdir(root):
            self.reason = f"{root} absent (no powercap/RAPL driver on this node)"
        elif not self._reported:
            self.reason = f"no RAPL package/dram zone under {root}"
        else:
            self.reason = ""

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
                    extra={"zone_path": z.path, "zone_name": z.name, "max_energy_range_uj": self._range[z.key]},
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

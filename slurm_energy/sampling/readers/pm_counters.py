"""HPE/Cray ``pm_counters``: the node's own in-band power and energy counters (HPE Cray EX).

HPE's documentation (Cray-HPE docs-csm, operations/power_management/
User_Access_to_Compute_Node_Power_Data.md) lists the files in ``/sys/cray/pm_counters/``:

* ``energy`` -- accumulated node energy, J (includes ``accel_energy``); ``power`` -- point-in-time
  node power, W. Each value file reads ``<value> <unit> <timestamp> us`` (e.g. ``5405478 J
  1650358478836428 us``): the first token is the value, as every public reader takes it
  (SIRIUS ``src/utils/power.hpp``, energymon ``energymon-cray-pm``, Arbor ``hw/power.cpp``).
* ``cpu_energy``/``cpu_power``, ``memory_energy``/``memory_power``, ``accel_energy``/``accel_power``
  (``accel<N>_*`` per accelerator where several): the domains inside the node.
* ``freshness`` -- a free-running counter at about 10 Hz: a value that does not move between two
  reads far enough apart means the counters are stale.
* ``generation`` -- increments each time a power cap changes; ``startup`` -- a startup counter that
  changes when the node controller restarts its counters (the energy counter may restart then).

The reader reports the node's ``energy`` as a counter (J x 1e6 = uJ, never wraps) and ``power``
beside it, flags a stale ``freshness`` (``meter_stale``) and a changed ``generation``/``startup``
(``meter_generation_changed``: the interval across it is not trusted).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading

DEFAULT_ROOT = "/sys/cray/pm_counters"
DEVICE_ID = "pm_counters"
#: HPE: freshness counts at about 10 Hz; two reads this far apart with no change = stale.
STALE_AFTER_S = 2.0


def _value(root: str, name: str) -> float | None:
    """The first token of ``root/name`` as a number; None where absent or unreadable."""
    try:
        with open(os.path.join(root, name), encoding="ascii", errors="replace") as f:
            text = f.read(256)
    except OSError:
        return None
    parts = text.split()
    try:
        return float(parts[0]) if parts else None
    except ValueError:
        return None


def present(root: str = DEFAULT_ROOT) -> bool:
    """True where ``root/energy`` exists (an HPE Cray EX node)."""
    return os.path.exists(os.path.join(root, "energy"))


class PmCountersReader(Reader):
    """The node's ``pm_counters`` energy counter (``counter``, uJ) with its power beside it.

    Args:
        root: the ``pm_counters`` directory (tests point it at a fake tree).
        clock: a monotonic clock (tests step it), seconds.
    """

    name = "pm_counters"
    device_class = "node"

    def __init__(self, root: str = DEFAULT_ROOT, clock: Callable[[], float] | None = None):
        import time

        self.root = root
        self._clock = clock or time.monotonic
        self._fresh: tuple[float, float] | None = None  # (freshness value, clock when it last moved)
        self._gen: tuple[float | None, float | None] | None = None

    def devices(self) -> list[DeviceStatic]:
        domains = sorted(f[:-7] for f in _listdir(self.root) if f.endswith("_energy"))
        return [DeviceStatic("node", DEVICE_ID, model="HPE Cray EX pm_counters", extra={
            "meter_path": self.root, "covers": "whole node (HPE pm_counters energy: includes accelerators)",
            "domains": domains, "version": _value(self.root, "version"),
            "raw_scan_hz": _value(self.root, "raw_scan_hz")})]

    def domains(self) -> dict[str, float]:
        """The domain counters now, J: ``{"cpu": .., "memory": .., "accel0": ..}`` (those present)."""
        out: dict[str, float] = {}
        for f in _listdir(self.root):
            if f.endswith("_energy"):
                v = _value(self.root, f)
                if v is not None:
                    out[f[:-7]] = v
        return out

    def read(self) -> list[Reading]:
        energy = _value(self.root, "energy")
        power = _value(self.root, "power")
        if energy is None:
            return [Reading("node", DEVICE_ID, "unavailable", flags=["read_error"])]
        flags: list[str] = []
        now = self._clock()
        fresh = _value(self.root, "freshness")
        if fresh is not None:
            if self._fresh is None or fresh != self._fresh[0]:
                self._fresh = (fresh, now)
            elif now - self._fresh[1] >= STALE_AFTER_S:
                flags.append("meter_stale")
        gen = (_value(self.root, "generation"), _value(self.root, "startup"))
        if self._gen is not None and gen != self._gen:
            flags.append("meter_generation_changed")
        self._gen = gen
        return [Reading("node", DEVICE_ID, "counter", energy_uj=round(energy * 1e6),
                        max_energy_range_uj=None, power_w=power, energy_resolution_uj=1_000_000, flags=flags)]


def _listdir(d: str) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []

"""A fake HPE/Cray ``/sys/cray/pm_counters`` tree.

Files and formats from HPE's documentation (Cray-HPE docs-csm,
operations/power_management/User_Access_to_Compute_Node_Power_Data.md: ``power``, ``energy``,
``cpu_power``, ``cpu_energy``, ``memory_power``, ``memory_energy``, ``accel_power``, ``accel_energy``,
``generation``, ``startup``, ``freshness``, ``version``, ``power_cap``, ``raw_scan_hz``); value files
read ``<value> <unit> <timestamp> us`` (the first token the value, as SIRIUS ``src/utils/power.hpp``
and energymon ``energymon-cray-pm`` read it); ``freshness``, ``generation``, ``startup`` one integer.
"""

from __future__ import annotations

import os

TS_US = 1650358478836428


def _w(root, name: str, text: str) -> None:
    os.makedirs(str(root), exist_ok=True)
    with open(os.path.join(str(root), name), "w") as f:
        f.write(text + "\n")


def tree(root, energy_j: int, power_w: int, *, cpu_j: int = 0, memory_j: int = 0, accel_j: int | None = None,
         freshness: int = 1000, generation: int = 3, startup: int = 1650300000) -> str:
    """``root``: a pm_counters directory. Returns it."""
    _w(root, "energy", f"{energy_j} J {TS_US} us")
    _w(root, "power", f"{power_w} W {TS_US} us")
    _w(root, "cpu_energy", f"{cpu_j} J {TS_US} us")
    _w(root, "cpu_power", f"0 W {TS_US} us")
    _w(root, "memory_energy", f"{memory_j} J {TS_US} us")
    _w(root, "memory_power", f"0 W {TS_US} us")
    if accel_j is not None:
        _w(root, "accel_energy", f"{accel_j} J {TS_US} us")
        _w(root, "accel_power", f"0 W {TS_US} us")
    _w(root, "freshness", str(freshness))
    _w(root, "generation", str(generation))
    _w(root, "startup", str(startup))
    _w(root, "version", "1")
    _w(root, "power_cap", f"0 W {TS_US} us")
    _w(root, "raw_scan_hz", "10")
    return str(root)


def step(root, energy_j: int, power_w: int, freshness: int, generation: int = 3) -> None:
    """The counters a later read sees."""
    _w(root, "energy", f"{energy_j} J {TS_US} us")
    _w(root, "power", f"{power_w} W {TS_US} us")
    _w(root, "freshness", str(freshness))
    _w(root, "generation", str(generation))

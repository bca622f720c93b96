"""Look-ups in the bundled grid carbon-intensity table (``carbon/data/grid_intensity.csv``).

The table is built by ``scripts/build_tables.py`` from public data (see ``carbon/data/NOTICE``);
columns: ``zone, kind, name, iso_alpha2, iso_alpha3, g_per_kwh, year, basis, source, licence``.

* ``kind=country`` rows: zone = ISO 3166 alpha-2 (``FR``), with alpha-3 (``FRA``); OWID/Ember,
  latest year, lifecycle basis.
* ``kind=region`` rows: sub-national grid zones (``US-CA``, ``CA-QC``, ``AU-VIC``) from
  Green Algorithms ``CI_aggregated.csv``.
* ``kind=cloud`` rows: cloud regions (``gcp:europe-west1``) from Google's region-carbon-info.

Read with the ``csv`` module only (no pandas on the hook path); parsed once per process.
"""

from __future__ import annotations

import csv
import functools
import os
from dataclasses import dataclass
from typing import Any

from slurm_energy.units import DEFAULT_CI_G_PER_KWH

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
GRID_TABLE = os.path.join(DATA_DIR, "grid_intensity.csv")

#: World average used when nothing else is known: 475 gCO2e/kWh (IEA Global Energy & CO2 Status
#: Report 2019; also Green Algorithms' "WORLD" row and CodeCarbon's default).
WORLD_AVERAGE_G_PER_KWH = DEFAULT_CI_G_PER_KWH
WORLD_AVERAGE_SOURCE = "IEA Global Energy & CO2 Status Report 2019 (world average)"


@dataclass(frozen=True)
class IntensityRow:
    """One bundled intensity value, gCO2e/kWh, with its provenance."""

    zone: str
    kind: str  # "country" | "region" | "cloud"
    name: str
    iso_alpha2: str
    iso_alpha3: str
    g_per_kwh: float
    year: int | None
    basis: str  # "lifecycle" | "direct" | "" (unknown/mixed)
    source: str
    licence: str

    def describe(self) -> str:
        """Human label, e.g. ``bundled table: France (FR) 2024, Ember via OWID (CC BY 4.0)``."""
        yr = f" {self.year}" if self.year else ""
        return f"bundled table: {self.name} ({self.zone}){yr}, {self.source} ({self.licence})"


@functools.lru_cache(maxsize=4)
def load_grid_table(path: str = GRID_TABLE) -> dict[str, IntensityRow]:
    """Parse the bundled table into ``{UPPER-CASE key: row}``.

    Keys: zone (``FR``, ``US-CA``, ``GCP:EUROPE-WEST1``) and, for countries, ISO alpha-3 (``FRA``).

    :raises FileNotFoundError: table missing (run ``scripts/build_tables.py``).
    """
    out: dict[str, IntensityRow] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            d: dict[str, Any] = {**r, "g_per_kwh": float(r["g_per_kwh"]), "year": int(r["year"]) if r["year"] else None}
            row = IntensityRow(**d)
            out.setdefault(row.zone.upper(), row)
            if row.kind == "country" and row.iso_alpha3:
                out.setdefault(row.iso_alpha3.upper(), row)
    return out


def lookup_country(code: str) -> IntensityRow | None:
    """Country intensity by ISO 3166 alpha-2 or alpha-3 code (case-insensitive); None if unknown."""
    row = load_grid_table().get(str(code).strip().upper())
    return row if row is not None and row.kind == "country" else None


def lookup_zone(zone: str) -> IntensityRow | None:
    """Intensity of a sub-national zone (``US-CA``) or cloud region (``gcp:europe-west1``, or the
    bare region name ``europe-west1``); None if unknown. Countries are not returned here."""
    z = str(zone).strip().upper()
    tab = load_grid_table()
    row = tab.get(z) or tab.get("GCP:" + z)
    return row if row is not None and row.kind != "country" else None

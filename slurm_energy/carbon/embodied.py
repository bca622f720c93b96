"""Embodied-emission factors (kgCO2e per unit of hardware) and SCI's M = TE x (TS / EL) x RS.

The Green Software Foundation's SCI (v1.1, ISO/IEC 21031:2024) charges a job the part of its
hardware's embodied emissions (manufacture, transport, end of life) that its use reserves:

    M = TE x (TS / EL) x RS

TE: the unit's total embodied emissions, kgCO2e; TS: the time the job reserved it, s; EL: the
unit's expected lifetime, s (years x 8760 h x 3600 s); RS: the share of the unit reserved (1 for a
whole GPU, 16 / 64 for 16 of a socket's 64 cores).

Factors: the bundled table (``data/embodied.csv``, each row with its source; ``data/NOTICE``), then
the site's (``embodied:`` in site.yaml), which add to or replace any bundled one. A unit without a
factor gets no M (absent, never 0).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from functools import lru_cache

#: hours in a year of expected lifetime (SCI's worked examples: 365 x 24)
HOURS_PER_YEAR = 8760.0
#: Default expected lifetime, years, of every component: 3 (26280 h, BoaviztAPI's component
#: archetypes' hours_life_time for GPU, CPU, RAM and case, boaviztapi/data/archetypes/components/).
DEFAULT_LIFETIME_YEARS = {"gpu": 3.0, "cpu": 3.0, "ram": 3.0, "chassis": 3.0}
DEFAULT_LIFETIME_SOURCE = "default lifetime 3 years (26280 h, BoaviztAPI's component archetypes)"
COMPONENTS = ("gpu", "cpu", "ram", "chassis")
#: what one unit of each component is
UNIT = {"gpu": "GPU", "cpu": "CPU socket", "ram": "GB of DRAM", "chassis": "server chassis"}


@dataclass(frozen=True)
class EmbodiedFactor:
    """TE (kgCO2e per unit) of a component ``model`` (``*`` = any model of the component), its
    expected lifetime in years (None = the component's default) and where they came from."""

    component: str
    model: str
    kg_per_unit: float
    lifetime_years: float | None
    source: str


def _bundled_path() -> str:
    return os.path.join(os.path.dirname(__file__), "data", "embodied.csv")


@lru_cache(maxsize=1)
def bundled_factors() -> tuple[EmbodiedFactor, ...]:
    """The bundled factors (``data/embodied.csv``), each labelled ``bundled: <source>``."""
    with open(_bundled_path(), newline="", encoding="utf-8") as f:
        return tuple(EmbodiedFactor(r["component"], r["model"], float(r["kgco2e_per_unit"]),
                                    float(r["lifetime_years"]) if r["lifetime_years"] else None,
                                    f"bundled: {r['source']}") for r in csv.DictReader(f))


def _tokens(name: str) -> set[str]:
    return set(name.lower().replace("-", " ").replace("_", " ").split())


def find_factor(factors: tuple[EmbodiedFactor, ...], component: str, model: str) -> EmbodiedFactor | None:
    """The factor for ``component`` of ``model``: among those whose model's words (case-insensitive,
    ``-``/``_`` as spaces) all appear in ``model`` (``NVIDIA A100 SXM4 40GB`` matches NVML's
    ``NVIDIA A100-SXM4-40GB``), the one with the most words, the later on a tie (site factors come
    after the bundled ones, so they win); else the component's ``*`` factor (the last); else None."""
    have = _tokens(model)
    best: EmbodiedFactor | None = None
    for f in factors:
        if (f.component == component and f.model != "*" and _tokens(f.model) <= have
                and (best is None or len(_tokens(f.model)) >= len(_tokens(best.model)))):
            best = f
    if best is None:
        best = next((f for f in reversed(factors) if f.component == component and f.model == "*"), None)
    return best


def embodied_kg(te_kg: float, time_s: float, lifetime_years: float, share: float = 1.0) -> float:
    """SCI's M = TE x (TS / EL) x RS, kgCO2e: ``te_kg`` per unit, ``time_s`` reserved, lifetime in
    years (EL = years x 8760 h x 3600 s), ``share`` of the unit reserved.

    Raises ValueError: a negative TE, time or share, a share above 1, or a lifetime <= 0 (names it)."""
    if te_kg < 0 or time_s < 0 or not 0 <= share <= 1 or lifetime_years <= 0:
        raise ValueError(f"embodied: need TE >= 0 kgCO2e, TS >= 0 s, 0 <= RS <= 1 and EL > 0 years; got TE={te_kg}, "
                         f"TS={time_s}, RS={share}, EL={lifetime_years}: fix embodied in site.yaml")
    return te_kg * time_s / (lifetime_years * HOURS_PER_YEAR * 3600.0) * share

#!/usr/bin/env python3
"""Rebuild the GPU rows of slurm_energy/carbon/data/embodied.csv from BoaviztAPI's published data.

    python3 scripts/build_embodied.py BOAVIZTAPI_CHECKOUT > gpu_rows.csv

BoaviztAPI (github.com/Boavizta/boaviztapi, AGPL-3.0) computes a GPU card's embedded impact bottom
up (docs/docs/Explanations/components/gpu.md): the sum of casing (kg), heatsink (kg), printed
wiring board (cm2), GPU die (effective mm2, wafer losses included), VRAM dies (effective mm2:
capacity x 15.5 mm2/GB over the dies, each through the circular-wafer yield model) and upstream
transport (card kg), distribution by boat, truck and plane (km x card kg) and end of life (card kg),
each x its GWP factor in boaviztapi/data/factors.yml. The card dimensions are its
boaviztapi/data/crowdsourcing/gpu_specs.csv. This script reads those two files and applies that
sum, written from the documentation (no BoaviztAPI code is copied); its default archetype (an
80 GB, 6-die card: boaviztapi/data/archetypes/components/gpu.csv) gives 575.1 kgCO2eq, the value
BoaviztAPI's own tests/api/test_component.py::test_empty_gpu expects.
"""

from __future__ import annotations

import csv
import math
import os
import sys

import yaml

WAFER_D = 300.0  # mm
KERF = 0.2  # mm
VRAM_MM2_PER_GB = 15.5


def effective_area(die_mm2: float) -> float:
    """Wafer area a good die costs: the die with kerf, the wafer's edge loss and the yield exp(-sqrt(A x 0.1 / 100))."""
    wafer = math.pi * (WAFER_D / 2) ** 2
    a = (math.sqrt(die_mm2) + KERF) ** 2
    n = wafer / a - math.pi * WAFER_D / math.sqrt(2 * a)
    return a * wafer / (n * a) / math.exp(-math.sqrt(a / 100 * 0.1))


def card_gwp(f: dict, casing_kg: float, heatsink_kg: float, pwb_cm2: float, die_mm2: float, vram_gb: float,
             vram_dies: int, mass_kg: float, boat_km: float = 19000, truck_km: float = 1000, plane_km: float = 0) -> float:
    g = {k: next(iter(v.values()))["gwp"]["impact"] for k, v in f["gpu"].items()}  # manufacture/distribution/eol
    vram_mm2 = effective_area(vram_gb * VRAM_MM2_PER_GB / vram_dies) * vram_dies
    return (g["casing"] * casing_kg + g["heatsink"] * heatsink_kg + g["pwb"] * pwb_cm2 + g["gpu"] * die_mm2
            + g["vram"] * vram_mm2 + g["upstream_transport"] * mass_kg
            + (g["transport_boat"] * boat_km + g["transport_truck"] * truck_km + g["transport_plane"] * plane_km) * mass_kg
            + g["end_of_life"] * mass_kg)


def main(root: str) -> int:
    with open(os.path.join(root, "boaviztapi/data/factors.yml"), encoding="utf-8") as fh:
        f = yaml.safe_load(fh)
    w = csv.writer(sys.stdout, lineterminator="\n")
    # the default archetype (gpu_surface 814 mm2 raw -> effective; BoaviztAPI's test expects 575.1)
    w.writerow(["gpu", "*", round(card_gwp(f, 0.79, 0.90, 296, effective_area(814), 80, 6, 1.69), 1), "GPU", "",
                "BoaviztAPI default GPU archetype (80 GB, 6 VRAM dies, 814 mm2 die, 1.69 kg)", "AGPL-3.0 data"])
    with open(os.path.join(root, "boaviztapi/data/crowdsourcing/gpu_specs.csv"), encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            kg = card_gwp(f, float(r["mass_casing"]), float(r["mass_heatsink"]), float(r["pwb_surface"]),
                          float(r["die_surface"]), float(r["vram"]), int(r["number"]), float(r["mass"]),
                          float(r["distance_boat"]), float(r["distance_truck"]), float(r["distance_plane"]))
            w.writerow(["gpu", r["name"], round(kg, 1), "GPU", "", "BoaviztAPI gpu_specs.csv + factors.yml (bottom-up)",
                        "AGPL-3.0 data"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

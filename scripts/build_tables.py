#!/usr/bin/env python3
"""Build slurm-energy's bundled tables from public reference data. One command refresh:

    python scripts/build_tables.py [--data-dir ../shared/data] [--out-root slurm_energy]

Inputs (``--data-dir``, default ``$SLURM_ENERGY_REFDATA`` or ``/work/shared/data``), unmodified:

* ``owid/derived_latest_by_country.csv`` (+ ``carbon-intensity-electricity.csv`` to cross-check)
  -> country rows (latest year, ISO alpha-2 and alpha-3), lifecycle basis, CC BY 4.0.
* ``green-algorithms/CI_aggregated.csv`` -> sub-national zones (US states, CA provinces, AU states).
* ``gcp-region-carbon-info/<year>.csv`` -> Google Cloud regions, latest year per region.
* ``green-algorithms/cloudProviders_datacenters.csv`` -> Azure regions, each given the intensity of
  the grid location Green Algorithms maps it to (AWS is not in that file).
* ``green-algorithms/TDP_cpu.csv`` + ``codecarbon/cpu_power.csv`` -> CPU TDP per socket.
* ``epoch/ml_hardware.csv`` + ``green-algorithms/TDP_gpu.csv`` -> GPU board power, dense FLOP/s;
  ``scripts/data/gpu_specs_supplement.csv`` (kept in this repo: AMD Instinct MI100/MI210/MI250 and
  Intel Data Center GPU Flex, which neither source lists; every row names its source) fills gaps only.

Outputs: ``carbon/data/grid_intensity.csv``, ``carbon/data/NOTICE``, ``devices/data/cpu_tdp.csv``,
``devices/data/gpu_specs.csv``, ``devices/data/NOTICE``. Every row carries ``source``, ``year``
(data year for intensities; release year for hardware, empty when the source gives none) and
``licence``. pandas is used here only; run-time look-ups read the CSVs with the csv module.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys

import pandas as pd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Accelerators neither Epoch AI nor Green Algorithms lists (AMD Instinct MI100/MI210/MI250, Intel
#: Flex), with the source of every figure; kept in the repo, used only where the sources have no row.
SUPPLEMENT_GPU = os.path.join(REPO, "scripts", "data", "gpu_specs_supplement.csv")
sys.path.insert(0, REPO)
from slurm_energy.devices.hwtables import normalize_cpu_model, normalize_gpu_model  # noqa: E402

OWID_SRC = ("Ember Yearly Electricity Data (2025); Ember Yearly Electricity Data Europe (2025); "
            "Energy Institute Statistical Review of World Energy (2024); processed by Our World in Data")
GA_SRC = "Green Algorithms (Lannelongue, Grealey & Inouye, Adv. Sci. 2021)"
GCP_SRC = "Google Cloud region-carbon-info"
CC_SRC = "CodeCarbon cpu_power.csv"
EPOCH_SRC = "Epoch AI, Data on Machine Learning Hardware"

NOTICE_CARBON = """Bundled grid carbon-intensity table (grid_intensity.csv), built by scripts/build_tables.py.
Values are gCO2e/kWh. Each row names its source, year, basis and licence.

Country rows (kind=country), CC BY 4.0:
  Carbon intensity of electricity generation (gCO2e/kWh). Source: Ember - Yearly Electricity Data
  (2025); Ember - Yearly Electricity Data Europe (2025); Energy Institute - Statistical Review of
  World Energy (2024) - with major processing by Our World in Data.
  https://ourworldindata.org/grapher/carbon-intensity-electricity
  Changes: latest year per country kept; ISO 3166 alpha-2 codes added.

Sub-national rows (kind=region), CC BY 4.0:
  Green Algorithms data (Lannelongue, Grealey & Inouye, Adv. Sci. 2021, doi:10.1002/advs.202100707).
  Changes: only rows of Type=Region kept; data year parsed from the source text where stated.

Cloud-region rows (kind=cloud), Apache License 2.0:
  Carbon free energy for Google Cloud regions, Google LLC,
  https://github.com/GoogleCloudPlatform/region-carbon-info
  Changes: latest year per region kept. The Apache-2.0 licence text is at
  https://www.apache.org/licenses/LICENSE-2.0 (copy shipped in the reference data folder).

World average default (not in the table): 475 gCO2e/kWh, IEA Global Energy & CO2 Status Report 2019.
"""

NOTICE_DEVICES_HEAD = """Bundled hardware tables (cpu_tdp.csv, gpu_specs.csv), built by scripts/build_tables.py.
Power in W (TDP per CPU socket; GPU board power), FLOP/s dense. Each row names its source and licence.

Green Algorithms rows, CC BY 4.0:
  Green Algorithms data (Lannelongue, Grealey & Inouye, Adv. Sci. 2021, doi:10.1002/advs.202100707).

Epoch AI rows, CC BY 4.0:
  Epoch AI, 'Data on Machine Learning Hardware', https://epoch.ai/data/machine-learning-hardware
  Changes: GPUs with a TDP only; FP32, TF32 and Tensor-FP16/BF16 columns kept.

Supplement rows (scripts/data/gpu_specs_supplement.csv), vendor figures as reported by the source
named on each row: AMD Instinct MI100, MI210, MI250; Intel Data Center GPU Flex 140/170.

CodeCarbon rows, MIT licence (text below):
  codecarbon/data/hardware/cpu_power.csv, https://github.com/mlco2/codecarbon

"""

#: NVML device names that do not reduce to a table key by themselves, mapped to the table model
#: they are (SXM boards report no form factor in their NVML name). Keys are normalized names.
GPU_ALIASES = {
    "h100 80gb hbm3": "NVIDIA H100 SXM5 80GB",
    "h100 sxm5 80gb": "NVIDIA H100 SXM5 80GB",
    "h200": "NVIDIA H200 SXM",
    "a100 sxm4 80gb": "NVIDIA A100 SXM4 80 GB",
    "a100 sxm4 40gb": "NVIDIA A100 SXM4 40 GB",
    "v100 sxm2 16gb": "NVIDIA Tesla V100 SXM2 16 GB",
    "v100 sxm2 32gb": "NVIDIA Tesla V100 SXM2 32 GB",
    "v100 pcie 16gb": "NVIDIA Tesla V100 PCIe 16 GB",
    "v100 pcie 32gb": "NVIDIA Tesla V100 PCIe 32 GB",
}


def _year_from_text(*texts) -> str:
    for t in texts:
        m = re.search(r"data from (\d{4})", str(t), re.I) or re.search(r"\((?:\w+ )?(\d{4})\)", str(t))
        if m:
            return m.group(1)
    return ""


def build_grid(d: str) -> pd.DataFrame:
    """Country, sub-national and cloud-region intensity rows (gCO2e/kWh)."""
    owid = pd.read_csv(os.path.join(d, "owid/derived_latest_by_country.csv"), keep_default_na=False)
    raw = pd.read_csv(os.path.join(d, "owid/carbon-intensity-electricity.csv"))
    raw = raw.rename(columns={raw.columns[3]: "v"})
    latest = raw.dropna(subset=["Code"]).sort_values("Year").groupby("Code").tail(1).set_index("Code")
    rows = []
    for r in owid.itertuples():
        a3 = r.iso_alpha3
        if a3 in latest.index:  # cross-check the derived file against the raw OWID file
            lr = latest.loc[a3]
            assert int(lr.Year) == int(r.year) and abs(float(lr.v) - float(r.gco2e_per_kwh)) < 0.01, a3
        if a3 == "OWID_WRL":
            rows.append(dict(zone="WORLD", kind="world", name=r.entity, iso_alpha2="", iso_alpha3="",
                             g_per_kwh=r.gco2e_per_kwh, year=r.year, basis="lifecycle", source=OWID_SRC,
                             licence="CC BY 4.0"))
            continue
        if not r.iso_alpha2:
            continue
        rows.append(dict(zone=r.iso_alpha2, kind="country", name=r.entity, iso_alpha2=r.iso_alpha2,
                         iso_alpha3=a3, g_per_kwh=r.gco2e_per_kwh, year=r.year, basis="lifecycle",
                         source=OWID_SRC, licence="CC BY 4.0"))
    countries = {x["zone"] for x in rows}
    ga = pd.read_csv(os.path.join(d, "green-algorithms/CI_aggregated.csv"), header=1, keep_default_na=False)
    for r in ga.itertuples():
        if r.Type != "Region" or r.location in countries:
            continue
        a2 = r.location.split("-")[0]
        rows.append(dict(zone=r.location, kind="region", name=f"{r.regionName} ({r.countryName})",
                         iso_alpha2=a2 if len(a2) == 2 else "", iso_alpha3="",
                         g_per_kwh=float(r.carbonIntensity), year=_year_from_text(r.source, r.comments),
                         basis="", source=f"{GA_SRC}: {r.source}"[:200], licence="CC BY 4.0"))
    gcp: dict[str, dict] = {}
    for f in sorted(glob.glob(os.path.join(d, "gcp-region-carbon-info/[0-9]*.csv"))):
        year = int(os.path.basename(f)[:4])
        g = pd.read_csv(f)
        col = next(c for c in g.columns if "carbon intensity" in c.lower())
        basis = "lifecycle" if "lifecycle" in col.lower() else ""
        for r in g.itertuples(index=False):
            v = r._3
            if pd.isna(v):
                continue
            gcp[r[0]] = dict(zone=f"gcp:{r[0]}", kind="cloud", name=f"{r[1]} (Google Cloud {r[0]})",
                             iso_alpha2="", iso_alpha3="", g_per_kwh=float(v), year=year, basis=basis,
                             source=f"{GCP_SRC} {year}.csv", licence="Apache-2.0")
    rows.extend(gcp[k] for k in sorted(gcp))
    # Azure regions: Green Algorithms maps each to a grid location; its intensity is that location's
    # row above (GCP regions keep Google's own figures)
    by_zone = {x["zone"]: x for x in rows}
    dcs = pd.read_csv(os.path.join(d, "green-algorithms/cloudProviders_datacenters.csv"), header=1,
                      keep_default_na=False)
    for r in dcs.itertuples():
        if r.provider != "azure" or r.location not in by_zone:
            continue
        grid = by_zone[r.location]
        # Azure programmatic region names: "West Europe" -> "westeurope"
        rows.append(dict(zone=f"azure:{r.Name.lower().replace(' ', '')}", kind="cloud",
                         name=f"{r.location_freeForm.strip() or r.location} (Azure {r.Name})",
                         iso_alpha2=grid["iso_alpha2"], iso_alpha3=grid["iso_alpha3"], g_per_kwh=grid["g_per_kwh"],
                         year=grid["year"], basis=grid["basis"],
                         source=f"grid {r.location}: {grid['source']}; region->location: {GA_SRC}",
                         licence="CC BY 4.0"))
    return pd.DataFrame(rows)


def build_cpu(d: str) -> pd.DataFrame:
    """CPU TDP per socket (W): Green Algorithms rows (with core counts) first, then CodeCarbon."""
    rows: dict[str, dict] = {}
    ga = pd.read_csv(os.path.join(d, "green-algorithms/TDP_cpu.csv"), header=1, keep_default_na=False)
    for r in ga.itertuples():
        if r.model == "Any" or r.TDP == "":
            continue
        k = normalize_cpu_model(r.model)
        rows.setdefault(k, dict(key=k, model=r.model, tdp_w=float(r.TDP),
                                n_cores=int(float(r.n_cores)) if r.n_cores != "" else "",
                                source=f"Green Algorithms TDP_cpu.csv ({r.source or 'no URL'})"[:200],
                                year=int(float(r.Release_year)) if r.Release_year != "" else "",
                                licence="CC BY 4.0"))
    cc = pd.read_csv(os.path.join(d, "codecarbon/cpu_power.csv"), keep_default_na=False)
    for r in cc.itertuples():
        try:
            tdp = float(r.TDP)
        except ValueError:
            continue
        k = normalize_cpu_model(r.Name)
        if not k or tdp <= 0:
            continue
        rows.setdefault(k, dict(key=k, model=r.Name, tdp_w=tdp, n_cores="", source=CC_SRC, year="",
                                licence="MIT"))
    return pd.DataFrame(sorted(rows.values(), key=lambda x: x["key"]))


def build_gpu(d: str) -> pd.DataFrame:
    """GPU board power (W) and dense FP32/TF32/BF16 FLOP/s."""
    ep = pd.read_csv(os.path.join(d, "epoch/ml_hardware.csv"))
    ep = ep[(ep["Type"] == "GPU") & ep["TDP (W)"].notna()]
    rows: dict[str, dict] = {}
    by_model: dict[str, dict] = {}
    for _, r in ep.iterrows():
        k = normalize_gpu_model(r["Hardware name"])

        def num(c, r=r):
            v = r[c]
            return "" if pd.isna(v) else float(v)

        row = dict(key=k, model=r["Hardware name"], rated_w=float(r["TDP (W)"]),
                   fp32_flops=num("FP32 (single precision) performance (FLOP/s)"),
                   tf32_flops=num("TF32 (TensorFloat-32) performance (FLOP/s)"),
                   bf16_flops=num("Tensor-FP16/BF16 performance (FLOP/s)"),
                   source=EPOCH_SRC, year=str(r["Release date"])[:4] if not pd.isna(r["Release date"]) else "",
                   licence="CC BY 4.0")
        rows.setdefault(k, row)
        by_model[r["Hardware name"]] = row
    ga = pd.read_csv(os.path.join(d, "green-algorithms/TDP_gpu.csv"), header=1, keep_default_na=False)
    for r in ga.itertuples():
        if r.model == "Any" or r.TDP == "":
            continue
        k = normalize_gpu_model(r.model)
        rows.setdefault(k, dict(key=k, model=r.model, rated_w=float(r.TDP), fp32_flops="", tf32_flops="",
                                bf16_flops="", source=f"Green Algorithms TDP_gpu.csv ({r.source or 'no URL'})"[:200],
                                year="", licence="CC BY 4.0"))
    sup = pd.read_csv(SUPPLEMENT_GPU, keep_default_na=False)
    for r in sup.itertuples():
        k = normalize_gpu_model(r.model)
        rows.setdefault(k, dict(key=k, model=r.model, rated_w=float(r.rated_w), fp32_flops=r.fp32_flops,
                                tf32_flops=r.tf32_flops, bf16_flops=r.bf16_flops, source=r.source,
                                year=str(r.year), licence=r.licence))
    for alias, model in GPU_ALIASES.items():
        if alias not in rows and model in by_model:
            rows[alias] = dict(by_model[model], key=alias,
                               source=f"{EPOCH_SRC} (NVML name alias of {model})")
    return pd.DataFrame(sorted(rows.values(), key=lambda x: x["key"]))


def main(argv=None) -> int:
    """Build all tables; prints row counts. Returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("SLURM_ENERGY_REFDATA", "/work/shared/data"))
    ap.add_argument("--out-root", default=os.path.join(REPO, "slurm_energy"))
    a = ap.parse_args(argv)
    cdir = os.path.join(a.out_root, "carbon", "data")
    ddir = os.path.join(a.out_root, "devices", "data")
    os.makedirs(cdir, exist_ok=True)
    os.makedirs(ddir, exist_ok=True)
    grid, cpu, gpu = build_grid(a.data_dir), build_cpu(a.data_dir), build_gpu(a.data_dir)
    grid.to_csv(os.path.join(cdir, "grid_intensity.csv"), index=False)
    cpu.to_csv(os.path.join(ddir, "cpu_tdp.csv"), index=False)
    gpu.to_csv(os.path.join(ddir, "gpu_specs.csv"), index=False)
    with open(os.path.join(cdir, "NOTICE"), "w") as fh:
        fh.write(NOTICE_CARBON)
    with open(os.path.join(a.data_dir, "codecarbon", "LICENSE")) as fh:
        mit = fh.read()
    with open(os.path.join(ddir, "NOTICE"), "w") as fh:
        fh.write(NOTICE_DEVICES_HEAD + mit)
    print(f"grid_intensity.csv: {len(grid)} rows ({(grid.kind == 'country').sum()} countries, "
          f"{(grid.kind == 'region').sum()} regions, {(grid.kind == 'cloud').sum()} cloud regions)")
    print(f"cpu_tdp.csv: {len(cpu)} rows; gpu_specs.csv: {len(gpu)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())

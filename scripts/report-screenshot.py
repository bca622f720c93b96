"""docs/img/report.png: the HTML report of a synthetic training job, rendered by the product's own
report code (reporting.report.render_html) and photographed by headless Chromium (Debian's
`chromium` package).

    python scripts/report-screenshot.py [OUT.png]

The record is made up, and the numbers hold together (checked by hand): a 2 h job on one node with
an A100 read by its NVML energy counter (250 W mean: 1.8e6 J = 0.5 kWh) and a CPU read by RAPL
(120 W: 8.64e5 J = 0.24 kWh), RAM by the TDP model (10 W: 0.02 kWh); IT 0.76 kWh x PUE 1.2 = 0.912 kWh
x 56 gCO2e/kWh = 0.0511 kgCO2e; three epochs as track() phases.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: slurm_energy and tests.helpers

from slurm_energy.model import CarbonFacts, Method, WindowEnergy  # noqa: E402
from slurm_energy.reporting.report import render_html  # noqa: E402
from tests.helpers.jobrecord_factory import device, job_record  # noqa: E402

T0 = 1_764_000_000.0  # 2025-11-24 16:00 UTC
SPAN = 7200.0
GPU_J, CPU_J, RAM_J = 250.0 * SPAN, 120.0 * SPAN, 10.0 * SPAN
IT_KWH = (GPU_J + CPU_J + RAM_J) / 3.6e6
PUE, CI = 1.2, 56.0


def _window(kind: str, name: str, a: float, b: float, **kw) -> WindowEnergy:
    share = (b - a) / SPAN
    e = {"gpu": GPU_J * share, "cpu": CPU_J * share, "ram": RAM_J * share}
    return WindowEnergy(kind=kind, name=name, start_time=T0 + a, end_time=T0 + b, energy_it_j=e,
                        methods={"gpu": Method.COUNTER, "cpu": Method.COUNTER, "ram": Method.TDP_ESTIMATE},
                        it_j=sum(e.values()), coverage=1.0, co2e_kg=sum(e.values()) / 3.6e6 * PUE * CI / 1000, **kw)


def record():
    # a power trace every 60 s: GPU around 250 W with dips at each epoch's evaluation, CPU ~120 W
    trace = [[T0 + t, 120.0 + 8 * math.sin(t / 400), 250.0 + 40 * math.sin(t / 300) - (60 if t % 2400 > 2100 else 0),
              10.0] for t in range(60, int(SPAN) + 1, 60)]
    phases = [_window("phase", f"epoch {i}", 2400 * i, 2400 * (i + 1)) for i in range(3)]
    devices = [device("gpu", GPU_J, method=Method.COUNTER, device_id="GPU-5f1c9a2e", model="NVIDIA A100-SXM4-80GB",
                      device_energy_j=GPU_J, rated_power_w=400.0, mean_power_w=250.0, duration_s=SPAN),
               device("cpu", CPU_J, method=Method.COUNTER, device_id="package-0", model="AMD EPYC 7763",
                      device_energy_j=2 * CPU_J, rated_power_w=280.0, mean_power_w=120.0, duration_s=SPAN),
               device("ram", RAM_J, device_id="ram", model="256 GiB", device_energy_j=4 * RAM_J, mean_power_w=10.0,
                      duration_s=SPAN)]
    return job_record("4711", devices, node="gpu017", start=T0, end=T0 + SPAN, expected=("gpu017",),
                      node_fields={"power_trace": trace}, cluster="hpc", partition="gpu", job_name="bert-small",
                      energy_it_j={"gpu": GPU_J, "cpu": CPU_J, "ram": RAM_J},
                      methods={"gpu": Method.COUNTER, "cpu": Method.COUNTER, "ram": Method.TDP_ESTIMATE},
                      it_kwh=IT_KWH, facility_kwh=IT_KWH * PUE, co2e_kg=IT_KWH * PUE * CI / 1000,
                      carbon=CarbonFacts(pue=PUE, pue_source="site config: datacenters.dc1.pue (2024 audit)",
                                         ci_g_per_kwh=CI, ci_source="bundled table: France (FR) 2024, Ember",
                                         ci_basis="lifecycle", ci_year=2024, datacenter="dc1"),
                      phases=phases, phase_totals=[_window("in_phases", "all phases (nested counted once)", 0, SPAN)])


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "img" / "report.png"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: apt-get install chromium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "energy-4711.html"
        html.write_text(render_html(record()))
        r = subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={tmp}/profile", "--window-size=1100,1500",
                            f"--screenshot={out}", html.as_uri()], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or not out.is_file():
        print(r.stderr[-2000:], file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

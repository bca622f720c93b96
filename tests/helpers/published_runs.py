"""Published training runs whose papers give the prediction's inputs and the energy they report.

Each row: the inputs ``slurm-energy predict`` takes, the energy the paper reports, and the source
(paper, table or section) of every number. Facts only, checked against the papers' text.

Papers:

* [P21] Patterson, Gonzalez, Le, Liang, Munguia, Rothchild, So, Texier, Dean, "Carbon Emissions and
  Large Neural Network Training", arXiv:2104.10350 (2021), Table 4 and its footnote 12 (peak
  TFLOP/s: 46 TPU v2, 123 TPU v3, 125 V100). The power per accelerator is the *measured system
  average power per accelerator, including memory, network interface, fans, host CPU*: the
  paper's measurement covers the node overhead too, so it is given as ``--gpu-watts`` with
  ``--power-frac 1`` and no separate node term (the split is not published).
* [T23] Touvron et al., "LLaMA: Open and Efficient Foundation Language Models", arXiv:2302.13971
  (2023): section 2.4 (65B: ~380 tokens/s/GPU on 2048 A100-80GB, 1.4T tokens, ~21 days), Table 2
  (65.2B parameters), section 6 / Table 15 (Wh = GPU-h x 400 W x PUE 1.1; 0.385 kgCO2e/kWh; GPU-hours
  and MWh per model; OPT-175B recomputed there from its logbook: 992 A100-80GB x 34 days).
  Their 400 W is the A100 TDP assumed drawn in full: ``--power-frac 1``.
* [L22] Luccioni, Viguier, Ligozat, "Estimating the Carbon Footprint of BLOOM, a 176B Parameter
  Language Model", arXiv:2211.02001 (2022), JMLR 24(253) 2023: final training 1,082,990 A100
  GPU-hours at the 400 W TDP = 433,196 kWh of dynamic consumption, 24.7 tCO2e at 57 gCO2e/kWh (the
  French grid); that figure has no PUE applied, so the check compares IT energy (``basis="it"``).

Units: FLOPs, FLOP/s per accelerator, W per accelerator, kWh, gCO2e/kWh.
"""

from __future__ import annotations

P21 = "Patterson et al. 2021, arXiv:2104.10350, Table 4"
T23 = "Touvron et al. 2023 (LLaMA), arXiv:2302.13971"
L22 = "Luccioni et al. 2022 (BLOOM), arXiv:2211.02001"
A100_BF16 = 312e12  # dense BF16 FLOP/s, NVIDIA A100 SXM (bundled table, Epoch AI)


def _patterson(name, flops, chips, peak, achieved, watts, pue, ci_kg, mwh):
    return dict(
        name=name, flops=flops, gpu_hours=None, n=chips, peak_flops=peak, flops_frac=achieved / peak,
        watts=watts, power_frac=1.0, pue=pue, ci=ci_kg * 1000, reported_kwh=mwh * 1000, basis="facility",
        measured=True,  # "Measured System Average Power per Accelerator" (Table 4)
        source={
            "flops": f"{P21}: Total Computation", "n": f"{P21}: Number of Chips",
            "peak_flops": "ibid. footnote 12 (peak TFLOP/s)", "flops_frac": f"{P21}: Measured Performance "
            f"{achieved / 1e12:g} TFLOP/s / peak", "watts": f"{P21}: Measured System Average Power per "
            "Accelerator (incl. host)", "pue": f"{P21}: Datacenter PUE", "ci": f"{P21}: Net CO2e/KWh",
            "reported_kwh": f"{P21}: Energy Consumption (MWh)",
        },
    )


RUNS = [
    _patterson("Evolved Transformer NAS (TPU v2)", 2.91e21, 200, 46e12, 24.8e12, 208, 1.10, 0.431, 7.5),
    _patterson("T5 (TPU v3)", 4.05e22, 512, 123e12, 45.6e12, 310, 1.12, 0.545, 85.7),
    _patterson("Meena (TPU v3)", 1.12e23, 1024, 123e12, 42.3e12, 289, 1.09, 0.415, 232),
    _patterson("GShard-600B (TPU v3)", 1.33e22, 1024, 123e12, 48.0e12, 288, 1.09, 0.177, 24.1),
    _patterson("Switch Transformer (TPU v3)", 8.22e22, 1024, 123e12, 34.4e12, 245, 1.10, 0.330, 179),
    _patterson("GPT-3 175B (V100)", 3.14e23, 10000, 125e12, 24.6e12, 330, 1.10, 0.429, 1287),
    dict(
        name="LLaMA-65B (A100-80GB, from FLOPs)", flops=6 * 65.2e9 * 1.4e12, gpu_hours=None, n=2048,
        peak_flops=A100_BF16, flops_frac=6 * 65.2e9 * 380 / A100_BF16, watts=400, power_frac=1.0, pue=1.1,
        ci=385.0, reported_kwh=449_000, basis="facility", measured=False,  # 400 W TDP assumed
        source={
            "flops": f"6 N D (Kaplan 2020): N 65.2e9 ({T23}, Table 2), D 1.4e12 tokens (section 2.4)",
            "n": f"{T23}, section 2.4: 2048 A100-80GB", "peak_flops": "bundled table (Epoch AI): A100 dense BF16",
            "flops_frac": f"{T23}, section 2.4: 380 tokens/s/GPU x 6 x 65.2e9 FLOPs/token / 312e12",
            "watts": f"{T23}, Table 15: 400 W (A100 TDP)", "pue": f"{T23}, section 6: PUE 1.1",
            "ci": f"{T23}, section 6: 0.385 kgCO2e/kWh", "reported_kwh": f"{T23}, Table 15: 449 MWh",
        },
    ),
]
for _name, _hours, _mwh in (("LLaMA-7B", 82_432, 36), ("LLaMA-13B", 135_168, 59), ("LLaMA-33B", 530_432, 233),
                            ("OPT-175B (recomputed in LLaMA Table 15)", 809_472, 356)):
    RUNS.append(dict(
        name=f"{_name} (A100-80GB, GPU-hours)", flops=None, gpu_hours=_hours, n=2048 if "LLaMA" in _name else 992,
        peak_flops=A100_BF16, flops_frac=None, watts=400, power_frac=1.0, pue=1.1, ci=385.0,
        reported_kwh=_mwh * 1000, basis="facility", measured=False,  # 400 W TDP assumed
        source={"gpu_hours": f"{T23}, Table 15", "watts": f"{T23}, Table 15: 400 W", "pue": f"{T23}, section 6",
                "ci": f"{T23}, section 6", "reported_kwh": f"{T23}, Table 15: {_mwh} MWh",
                "n": "does not change the energy (E = GPU-h x W x PUE); 2048 (LLaMA, section 2.4) / 992 (OPT)"},
    ))
RUNS.append(dict(
    name="BLOOM-176B (A100-80GB, GPU-hours)", flops=None, gpu_hours=1_082_990, n=384, peak_flops=A100_BF16,
    flops_frac=None, watts=400, power_frac=1.0, pue=1.0, ci=57.0, reported_kwh=433_196, basis="it",
    measured=False,  # 400 W TDP assumed (the paper's "dynamic consumption")
    source={"gpu_hours": f"{L22}: 1,082,990 GPU-hours", "watts": f"{L22}: A100 TDP 400 W",
            "pue": "not applied: the paper's dynamic consumption is IT energy", "ci": f"{L22}: 57 gCO2e/kWh",
            "reported_kwh": f"{L22}: 433,196 kWh dynamic consumption (24.7 tCO2e)",
            "n": "384 A100 (BLOOM model card); does not change the energy"},
))

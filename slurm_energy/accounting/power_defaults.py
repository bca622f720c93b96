"""The default GPU power fraction (drawn / rated power) for the prediction, with its sources.

Used only when neither the user (``--power-frac``) nor the site's own measured jobs
(:mod:`slurm_energy.accounting.calibration`) give a power fraction. A default is a published
measurement of hardware under training load, never the FLOP/s fraction: a large-model run that
achieves 20-50 % of rated FLOP/s still draws most of its rated power.

Published measurements behind the GPU default (each a fraction of rated power under training):

* Newkirk et al. 2025, "Empirically-Calibrated H100 Node Power Models for Reducing Uncertainty in
  AI Training Energy Estimation", arXiv:2506.14551 (abstract): 8-GPU H100 nodes at Brookhaven
  National Laboratory, compute-intensive training "operate at only 76 % of the 10.2 kW TDP rating".
* Latif et al. 2024, "Empirical Measurements of AI Training Power Demand on a GPU-Accelerated
  Node", arXiv:2412.08602 / IEEE Access 13 (2025) 61740 (abstract): Llama2-13b and ResNet training
  on an 8x H100 HGX node, peak 8.4 kW = 82 % of the rated 10.2 kW "even with GPUs near full
  utilization" (peak, so an upper value for the mean).
* Patterson et al. 2021, "Carbon Emissions and Large Neural Network Training", arXiv:2104.10350,
  Table 4: measured system average power per accelerator incl. host share: TPU v3 245-310 W of
  450 W TDP (0.54-0.69), GPT-3 on V100 330 W per 300 W GPU (host included).

Both H100 figures are node power / node rating; no per-GPU split is published, so the node figure
(0.76) is used as the GPU fraction, and node overhead (CPU, RAM, network, fans) is a separate
term that the user gives (``--node-watts``) or the site's jobs measured. Published LLM reports that
assume the GPUs draw their full TDP (LLaMA, Llama 2, BLOOM: GPU-hours x 400 W) correspond to
``--power-frac 1``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PowerDefault:
    """A documented power fraction for a device class: ``power_frac`` in (0, 1] and its ``source``."""

    device_class: str
    power_frac: float
    source: str


#: GPU under ML training: 0.76 of rated power (Newkirk et al. 2025, arXiv:2506.14551, measured on
#: 8x H100 nodes; Latif et al. 2024, arXiv:2412.08602: peak 0.82). See the module docstring.
GPU_TRAINING = PowerDefault(
    "gpu", 0.76,
    "default: GPUs under training draw 76 % of rated power (measured, 8x H100 nodes: Newkirk et al. "
    "2025, arXiv:2506.14551; peak 82 %: Latif et al. 2024, arXiv:2412.08602)",
)

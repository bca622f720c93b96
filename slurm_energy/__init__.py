"""slurm-energy: energy (kWh) and carbon (kgCO2e) accounting for Slurm batch jobs.

Four parts, one module tree each:

* device information collector  -> :mod:`slurm_energy.devices`
* carbon information collector  -> :mod:`slurm_energy.carbon`
* hardware sampler              -> :mod:`slurm_energy.sampling`
* energy/carbon output          -> :mod:`slurm_energy.accounting`, :mod:`slurm_energy.reporting`

Slurm is only the host (:mod:`slurm_energy.slurm`); the same sampler runs without it
(``slurm-energy run -- CMD``, or ``from slurm_energy import track`` inside a training script).
One data model (:mod:`slurm_energy.model`) flows through all of them.
"""

from slurm_energy._version import __version__

__all__ = ["Result", "__version__", "track"]


def __getattr__(name: str):
    """``from slurm_energy import track`` (and ``Result``, what ``track().result()`` returns and
    its repr names) imports :mod:`slurm_energy.api` only then (keeps ``import slurm_energy`` light
    for the hooks)."""
    if name == "track":
        from slurm_energy.api import track

        return track
    if name == "Result":
        from slurm_energy.api import Result

        return Result
    raise AttributeError(f"module 'slurm_energy' has no attribute {name!r}")

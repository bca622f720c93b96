"""Slurm's commands and their text, in one place: which client runs (absolute paths, timeouts,
environment: :mod:`.command`), what its text means (pure parsers: :mod:`.sacct`, :mod:`.scontrol`,
:mod:`.formats`, :mod:`.timespec`), and the one interface the rest of the package asks Slurm's
facts through (:class:`.facts.SlurmFacts`). Nothing here imports the rest of
``slurm_energy.slurm``: the hooks, the sampler and the job's end sit above it.
"""

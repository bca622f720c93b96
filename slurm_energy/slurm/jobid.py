"""Moved to :mod:`slurm_energy.jobid` (job id forms are data the store and the CLI share, not
Slurm glue); kept so older imports keep working."""

from slurm_energy.jobid import JobSpec, display_id, matches, parse_jobid, parse_jobids, split_reused

__all__ = ["JobSpec", "display_id", "matches", "parse_jobid", "parse_jobids", "split_reused"]

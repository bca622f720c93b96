"""Outputs (sinks) of a finished or running job record: store, report, Prometheus, Slurm write-back."""

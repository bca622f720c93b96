"""Report templates (jinja2), installed as package data of ``slurm_energy.templates``."""

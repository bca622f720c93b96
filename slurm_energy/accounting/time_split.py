"""A job's share of a time window (a rollup's month): energy and CO2e used inside it.

A job across a month boundary is charged to each month by the energy it used in that month, from
the record's hourly IT energy (:attr:`slurm_energy.model.NodeSummary.hourly_energy_j`, UTC hours,
summed over nodes). An hour the window cuts (a zone with a :30 offset) is split in proportion to the
part of the job's time in that hour that lies inside the window (power taken as constant within the
hour). A record without hourly energy (no samples) is split by wall time, the same assumption over
the whole job.

CO2e: with hourly carbon intensity (``record.carbon.hourly``) the window's share is the CO2e of its
hours (facility kWh x that hour's CI) over the CO2e of all the job's hours; otherwise (one CI for the
job) it is the energy share. Either way the shares of consecutive windows covering the job sum to
the record's own totals, so months add up to the stored job.

The store applies this rule in SQL to its summary rows (:mod:`slurm_energy.store.rollup`);
``tests/helpers/rollup_oracle.py`` applies it to whole records, the reference the SQL is checked against.
Here: the job's hourly IT energy (:func:`hourly_it_j`), which the record's hourly CO2e and the
store's ``job_hours`` rows are made of.
"""

from __future__ import annotations

from slurm_energy.model import JobRecord


def hourly_it_j(rec: JobRecord) -> dict[str, float]:
    """The job's IT energy per UTC hour, J, summed over its nodes (``{"2026-11-01T00:00:00Z": J}``)."""
    out: dict[str, float] = {}
    for node in rec.nodes:
        for h, e in node.hourly_energy_j.items():
            out[h] = out.get(h, 0.0) + e
    return out

"""The report's per-device-class rows (pure): the job's share of energy, whole-device energy, mean
power over the measured time, coverage and method per class, and the total row. Shared by the HTML
and CSV reports (:mod:`slurm_energy.reporting.report`); never turns unmeasured (``None``) into 0."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from slurm_energy.model import DEVICE_CLASSES, DeviceEnergy, JobRecord, Method, worst_method
from slurm_energy.units import J_PER_KWH, sum_known

#: Below this coverage the report says a mean power is "over the measured X % of the job"
#: (the same threshold as accounting.formulas.COVERAGE_COMPLETE).
MEAN_POWER_NOTE_BELOW = 0.95


@dataclass
class ClassRow:
    """One device class (or the total) of one job, for the report tables and CSV.

    Energies in J (``None`` = unmeasured or no such device), powers in W, time in s, coverage in
    [0, 1] (``None`` = no device of this class).
    """

    device_class: str
    n_devices: int = 0
    method: Method = Method.UNAVAILABLE
    coverage: float | None = None
    energy_it_j: float | None = None
    device_energy_j: float | None = None
    mean_power_w: float | None = None  # job-share energy / measured time, W
    mean_power_coverage: float | None = None  # fraction of the job the mean power is over
    rated_power_w: list[float] = field(default_factory=list)  # distinct P_i, W
    mean_util: float | None = None  # count-weighted mean u_i
    duration_s: float | None = None  # longest t_i
    facility_kwh: float | None = None
    co2e_kg: float | None = None  # net of alpha (x alpha)
    co2e_gross_kg: float | None = None  # location-based, offsets excluded
    models: list[str] = field(default_factory=list)

    @property
    def energy_it_kwh(self) -> float | None:
        return None if self.energy_it_j is None else self.energy_it_j / J_PER_KWH

    @property
    def device_energy_kwh(self) -> float | None:
        return None if self.device_energy_j is None else self.device_energy_j / J_PER_KWH


def _mean_power_measured(devs: list[DeviceEnergy], elapsed_s: float) -> tuple[float | None, float | None]:
    """(W, coverage): sum over measured devices of E_j / (coverage x t), t = the device's
    ``duration_s`` (its node's elapsed time) or ``elapsed_s``; coverage = the lowest coverage
    among those devices. (None, None) when no device has energy and measured time.

    Dividing by the measured time, not the whole elapsed time, keeps a device whose sampler died
    early from reading as a low-power device: unmeasured time is not counted as 0 W.
    """
    total, covs = 0.0, []
    for d in devs:
        t = (d.duration_s or elapsed_s) * d.coverage
        if d.energy_j is None or t <= 0:
            continue
        total += d.energy_j / t
        covs.append(d.coverage)
    return (total, min(covs)) if covs else (None, None)


def _mean_or_none(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights) if v is not None]
    tw = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / tw if pairs and tw > 0 else None


def class_rows(record: JobRecord) -> list[ClassRow]:
    """Per device class the job had (cpu, gpu, ram, in that order) then a ``total`` row.

    Energies are the record's totals (``record.energy_it_j`` / ``record.device_energy_j``, J);
    coverage is the lowest device coverage in the class (a class is only as covered as its
    least-covered device); ``mean_power_w`` = job-share energy / measured time (coverage x elapsed,
    W, summed over devices and nodes; see :func:`_mean_power_measured`) with
    ``mean_power_coverage`` the fraction of the job it is over. Facility kWh = IT kWh x PUE. kgCO2e per
    class is the record's ``co2e_kg`` split in
    proportion to IT energy, which equals facility x CI x alpha / 1000 for a flat intensity and
    stays consistent with the total when the record used hourly intensity.

    The total row's mean power is the sum of the class mean powers (each over its own measured
    time), its ``mean_power_coverage`` the lowest of theirs. The total row's method is the worst over the
    classes its energy sums; its coverage the lowest over every class with devices (an unmeasured class
    makes it 0). The total row's energy is ``record.it_kwh`` (partial totals are flagged by
    ``record.coverage_complete``, never padded); its device energy is ``None`` unless every class
    with devices has one.
    """
    elapsed = record.elapsed_s
    it_total_j = None if record.it_kwh is None else record.it_kwh * J_PER_KWH
    rows: list[ClassRow] = []
    for cls in DEVICE_CLASSES:
        devs = [d for n in record.nodes for d in n.devices if d.device_class == cls]
        if not devs and cls not in record.energy_it_j:
            continue  # the job had no device of this class (e.g. no GPU): no row, not "unavailable"
        e = record.energy_it_j.get(cls)
        mp, mp_cov = _mean_power_measured(devs, elapsed)
        if mp is None and e is not None and not devs and elapsed > 0:
            mp, mp_cov = e / elapsed, None  # totals without per-device detail: elapsed time only
        row = ClassRow(
            device_class=cls,
            n_devices=sum(d.count for d in devs),
            method=Method(record.methods.get(cls, worst_method(d.method for d in devs))),
            coverage=min((d.coverage for d in devs), default=None),
            energy_it_j=e,
            device_energy_j=record.device_energy_j.get(cls),
            mean_power_w=mp,
            mean_power_coverage=mp_cov,
            rated_power_w=sorted({d.rated_power_w for d in devs if d.rated_power_w is not None}),
            mean_util=_mean_or_none([d.mean_util for d in devs], [d.count for d in devs]),
            duration_s=max((d.duration_s for d in devs), default=None),
            models=sorted({d.model for d in devs if d.model}),
        )
        if e is not None:
            row.facility_kwh = e / J_PER_KWH * record.carbon.pue
            if record.co2e_kg is not None and it_total_j:
                row.co2e_kg = record.co2e_kg * e / it_total_j
            if record.co2e_gross_kg is not None and it_total_j:
                row.co2e_gross_kg = record.co2e_gross_kg * e / it_total_j
        rows.append(row)

    with_devices = [r for r in rows if r.n_devices > 0 or r.energy_it_j is not None]
    dev_parts = [r.device_energy_j for r in with_devices]
    powered = [r.mean_power_w for r in rows if r.mean_power_w is not None]
    power_covs = [r.mean_power_coverage for r in rows if r.mean_power_w is not None and r.mean_power_coverage is not None]
    total = ClassRow(
        device_class="total",
        n_devices=sum(r.n_devices for r in rows),
        # the method of the total number: worst over the classes it sums (unmeasured ones are
        # excluded from the sum and show up in coverage and record.coverage_complete instead)
        method=worst_method(r.method for r in with_devices if r.energy_it_j is not None),
        coverage=min((r.coverage for r in with_devices if r.coverage is not None), default=None),
        energy_it_j=it_total_j,
        device_energy_j=sum_known(dev_parts) if dev_parts and None not in dev_parts else None,
        mean_power_w=sum(powered) if powered else None,
        mean_power_coverage=min(power_covs) if power_covs else None,
        facility_kwh=record.facility_kwh,
        co2e_kg=record.co2e_kg,
        co2e_gross_kg=record.co2e_gross_kg,
    )
    rows.append(total)
    return rows


# ---------------------------------------------------------------------------------------- CSV

"""What :meth:`slurm_energy.api.Tracker.result` returns: energy, CO2e, method and coverage per
device class, so far or final, with the phases and stages (from a JobRecord)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class ClassResult:
    """One device class: job-share energy (kWh, None = not measured), its share of kgCO2e, the
    method (counter / power_integration / tdp_estimate / unavailable) and coverage in [0, 1]."""

    device_class: str
    energy_kwh: Optional[float]
    co2e_kg: Optional[float]
    method: str
    coverage: Optional[float]


@dataclass
class Result:
    """Energy so far (``final`` False) or final: IT kWh, facility kWh (x PUE), kgCO2e, per class,
    the phases and stages so far (``WindowEnergy`` objects) and the record itself (None when the
    numbers are not available here: ``note`` says why and where to look)."""

    final: bool
    source: str  # "local sampler" | "slurm store" | "unavailable" | "other rank"
    elapsed_s: float = 0.0
    it_kwh: Optional[float] = None
    facility_kwh: Optional[float] = None
    co2e_kg: Optional[float] = None
    classes: dict[str, ClassResult] = field(default_factory=dict)
    phases: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    record: Any = None
    note: str = ""

    def cite(self, phase: str = "", fmt: str = "all", training_type: str = "") -> str:
        """A methods paragraph (text and LaTeX), a citation line and a Hugging Face model-card
        ``co2_eq_emissions`` block for this measurement (``phase``: one phase or stage only, e.g.
        ``"fine-tuning"``; ``fmt``: ``all``, ``text``, ``latex``, ``line`` or ``modelcard``)
        (:mod:`slurm_energy.reporting.cite`). Raises CiteError (a ValueError) when there is no
        record here (``note`` says where the numbers are) or no such phase."""
        from slurm_energy.reporting.cite import CiteError, citation, render

        if self.record is None:
            raise CiteError(f"nothing to cite here: {self.note or self.source}")
        return render(citation([self.record], phase=phase, training_type=training_type), fmt)

    @classmethod
    def from_record(cls, rec, final: bool, source: str, note: str = "") -> "Result":
        from slurm_energy.reporting.report import class_rows

        classes = {}
        for r in class_rows(rec)[:-1]:
            classes[r.device_class] = ClassResult(r.device_class, r.energy_it_kwh, r.co2e_kg, r.method.value, r.coverage)
        return cls(final=final, source=source, elapsed_s=rec.elapsed_s, it_kwh=rec.it_kwh,
                   facility_kwh=rec.facility_kwh, co2e_kg=rec.co2e_kg, classes=classes, phases=list(rec.phases),
                   stages=list(rec.stages), record=rec, note=note)


def from_store(job_id: str) -> Result:
    """The job's latest record in the site's store (interim while it runs), as a Result; ``source``
    ``unavailable`` with a note when this user cannot read it (never raises)."""
    note = (f"measured by the node's sampler; the numbers appear in the store about a minute into the job "
            f"and finally after it: jobenergy {job_id}")
    try:
        from slurm_energy.config import load_site_config_for_hooks
        from slurm_energy.store import open_store

        cfg, _ = load_site_config_for_hooks(save=False)
        st = open_store(cfg.paths.store_url, readonly=True)
        try:
            recs = st.get_job(job_id)
        finally:
            st.close()
    except Exception as e:  # the store may be unreadable to users: numbers come after the job
        return Result(final=False, source="unavailable", note=f"{note} (store: {type(e).__name__}: {e})")
    if not recs:
        return Result(final=False, source="unavailable", note=note)
    rec = max(recs, key=lambda r: (r.restart_count, r.end_time))
    return Result.from_record(rec, rec.status.value != "running", "slurm store", note)


__all__ = ["ClassResult", "Result", "from_store"]

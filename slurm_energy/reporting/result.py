"""What ``track()``'s :meth:`~slurm_energy.api.Tracker.result` returns: a record's totals for a
person (one line for a print or a notebook, a small table for Jupyter, a citation), or why there is
no number here and where to look."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord, WindowEnergy


@dataclass
class ClassResult:
    """One device class: job-share energy (kWh, None = not measured), its share of kgCO2e, the
    method (counter / power_integration / tdp_estimate / unavailable) and coverage in [0, 1]."""

    device_class: str
    energy_kwh: float | None
    co2e_kg: float | None
    method: str
    coverage: float | None


@dataclass
class Result:
    """Energy so far (``final`` False) or final: IT kWh, facility kWh (x PUE), kgCO2e, per class,
    the phases and stages so far (``WindowEnergy`` objects) and the record itself (None when the
    numbers are not available here: ``note`` says why and where to look)."""

    final: bool
    source: str  # "local sampler" | "slurm store" | "unavailable" | "other rank" | "slurm-energy run"
    elapsed_s: float = 0.0
    it_kwh: float | None = None
    facility_kwh: float | None = None
    co2e_kg: float | None = None
    classes: dict[str, ClassResult] = field(default_factory=dict)
    phases: list[WindowEnergy] = field(default_factory=list)
    stages: list[WindowEnergy] = field(default_factory=list)
    record: JobRecord | None = field(default=None, repr=False)
    note: str = ""
    covers: str = ""  # what was measured: "process 123 and its children", "torchrun launcher ..."

    def _summary_parts(self) -> tuple[str, list[str]]:
        """(the headline, per-class parts) of :meth:`__repr__` and :meth:`_repr_html_`."""
        when = "final" if self.final else "so far"
        if self.it_kwh is None and self.record is None:  # the numbers are elsewhere: the note says where
            return f"{when}, {self.source}: no energy ({self.note or 'not measured'})", []
        if self.it_kwh is None:  # a record, nothing in it measured (yet)
            why = "no device could be measured" if self.final else \
                "no sampling interval measured yet (each device needs two readings)"
            return f"{when}, {self.elapsed_s:.3g} s: no energy: {why}", []
        rec = self.record
        head = f"{when}, {self.elapsed_s:.3g} s: IT {self.it_kwh:.3g} kWh"
        if rec is not None and rec.carbon is not None:
            c = rec.carbon
            pue = f"PUE {c.pue:g}{' DEFAULT' if 'pue' in c.defaults_used else ''}"
            ci = f"CI {c.ci_g_per_kwh:g} g/kWh{' DEFAULT' if 'ci' in c.defaults_used else ''}"
            head += f" -> facility {_g3(self.facility_kwh)} kWh ({pue}) -> {_g3(self.co2e_kg)} kgCO2e ({ci})"
            head += f"; status {rec.status_text}"
        parts = [f"{c.device_class} {'n/a' if c.energy_kwh is None else f'{c.energy_kwh:.3g} kWh'} {c.method}"
                 + ("" if c.coverage is None else f" cov {c.coverage:.2f}") for c in self.classes.values()]
        return head, parts

    def __repr__(self) -> str:
        """One line (a notebook's or a print's view): IT, facility and CO2e with PUE/CI (DEFAULT
        marked), the status, then per class energy, method and coverage; the record is ``.record``."""
        head, parts = self._summary_parts()
        cut = sum("interval_cut" in w.flags for w in self.phases)
        extra = [f"{len(self.phases)} phases" + (f" ({cut} cut from sampling intervals: flag interval_cut)" if cut else "")
                 ] if self.phases else []
        extra += [f"{len(self.stages)} stages"] if self.stages else []
        tail = f" [{', '.join(parts + extra)}]" if parts or extra else ""
        return f"<slurm_energy.Result {head}{tail}>"

    def _repr_html_(self) -> str:
        """A small table for Jupyter: the headline, then one row per device class."""
        from html import escape

        head, _ = self._summary_parts()
        rows = "".join(
            f"<tr><td>{escape(c.device_class)}</td><td>{'n/a' if c.energy_kwh is None else f'{c.energy_kwh:.4g}'}</td>"
            f"<td>{escape(c.method)}</td><td>{'' if c.coverage is None else f'{c.coverage:.2f}'}</td></tr>"
            for c in self.classes.values())
        table = ("<table><tr><th>class</th><th>kWh (IT)</th><th>method</th><th>coverage</th></tr>"
                 f"{rows}</table>") if rows else ""
        note = f"<br><small>{escape(self.note)}</small>" if self.note else ""
        covers = f"<br><small>measures: {escape(self.covers)}</small>" if self.covers else ""
        return f"<div><b>slurm-energy</b> {escape(head)}{table}{covers}{note}</div>"

    def cite(self, phase: str = "", fmt: str = "all", training_type: str = "") -> str:
        """A methods paragraph (text and LaTeX), a citation line and a Hugging Face model-card
        ``co2_eq_emissions`` block for this measurement (``phase``: one phase or stage only, e.g.
        ``"fine-tuning"``; ``fmt``: ``all``, ``text``, ``latex``, ``line`` or ``modelcard``)
        (:mod:`slurm_energy.reporting.cite`). Raises CiteError (a ValueError) when there is no
        record here (``note`` says where the numbers are) or no such phase."""
        from slurm_energy.errors import CiteError
        from slurm_energy.reporting.cite import citation, render

        if self.record is None:
            raise CiteError(f"nothing to cite here: {self.note or self.source}")
        return render(citation([self.record], phase=phase, training_type=training_type), fmt)

    @classmethod
    def from_record(cls, rec: JobRecord, final: bool, source: str, note: str = "", covers: str = "") -> Result:
        """``rec``'s totals, per class (:func:`slurm_energy.reporting.rows.class_rows`), phases and stages."""
        from slurm_energy.reporting.rows import class_rows

        classes = {r.device_class: ClassResult(r.device_class, r.energy_it_kwh, r.co2e_kg, r.method.value, r.coverage)
                   for r in class_rows(rec)[:-1]}
        return cls(final=final, source=source, elapsed_s=rec.elapsed_s, it_kwh=rec.it_kwh,
                   facility_kwh=rec.facility_kwh, co2e_kg=rec.co2e_kg, classes=classes, phases=list(rec.phases),
                   stages=list(rec.stages), record=rec, note=note, covers=covers)


def _g3(x: float | None) -> str:
    """``x`` to 3 significant digits; ``n/a`` for None (a facility or CO2e total not computed)."""
    return "n/a" if x is None else f"{x:.3g}"

"""A result a researcher can cite: a methods paragraph (plain text and LaTeX), a citation line and
a Hugging Face model-card ``co2_eq_emissions`` block, for one job, a list of jobs, the jobs of one
``track(label=...)``, or one phase / stage of them ("fine-tuning only").

Formatting only: every number is the records' (energy per class with its method and coverage,
facility energy = IT x PUE, CO2e, PUE and CI with their sources); a phase's are its
:class:`~slurm_energy.model.WindowEnergy`'s. Unmeasured stays "not measured", never 0.

Model card: the ``co2_eq_emissions`` keys of the Hugging Face Hub model card
(huggingface.co/docs/hub/model-cards-co2: ``emissions`` in grams of CO2e, ``source``,
``training_type``, ``geographical_location``, ``hardware_used``), written as the card's YAML
front matter (``---`` ... ``---``) by PyYAML, which ``huggingface_hub.metadata_load`` reads back.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slurm_energy._version import __version__
from slurm_energy.accounting.sci import SciScore, functional_units, scores, window_embodied_kg
from slurm_energy.config.overrides import GIVEN_DATACENTER
from slurm_energy.errors import CiteError
from slurm_energy.model import JobRecord, Method, WindowEnergy
from slurm_energy.reporting.job_facts import ran_outside_slurm
from slurm_energy.units import J_PER_KWH, sum_known

TOOL = "slurm-energy"
MEASURED = (Method.COUNTER, Method.POWER_INTEGRATION)
_METHOD_WORDS = {
    Method.COUNTER: "read from the hardware's energy counter",
    Method.POWER_INTEGRATION: "integrated from sampled power",
    Method.TDP_ESTIMATE: "estimated from rated power x utilisation x time (not measured)",
    Method.UNAVAILABLE: "not measured",
}


@dataclass
class ClassPart:
    """One device class over the cited jobs: job-share energy (kWh; None = none measured), the
    methods behind it and the lowest coverage (fraction of the time measured)."""

    device_class: str
    kwh: float | None = None
    methods: set[str] = field(default_factory=set)
    coverage: float | None = None


@dataclass
class Citation:
    """What the texts are made of (see :func:`citation`). Energies kWh, CO2e kg, times epoch s."""

    jobs: list[str]
    what: str  # "job 42", "3 jobs of track(label='bert')", + " , phase 'fine-tuning'"
    it_kwh: float | None
    facility_kwh: float | None
    co2e_kg: float | None  # location-based: facility energy x CI, offsets excluded
    classes: dict[str, ClassPart]
    pue: list[tuple[float, str]]
    ci: list[tuple[float, str]]
    locations: list[str]
    hardware: list[str]
    start: float
    end: float
    training_type: str  # "" = not known: left out of the model card
    complete: bool
    co2e_net_kg: float | None = None  # x alpha; None when every job's alpha is 1 (the same number)
    alphas: list[tuple[float, str]] = field(default_factory=list)  # (alpha, source) where alpha is not 1
    embodied_kg: float | None = None  # SCI's M of the hardware reserved (a phase: its time's share)
    sci_ai: list[SciScore] = field(default_factory=list)  # accounting.sci.SciScore; [] without FLOPs/tokens/parameters
    where: str = "on the Slurm cluster's nodes"  # where the records were measured, for the methods text
    defaults: list[str] = field(default_factory=list)  # "PUE 1.58", "CI 475 gCO2e/kWh": documented defaults used
    noun: str = "job"  # "run" for process trees measured outside Slurm
    version: str = __version__


def _window(rec: JobRecord, name: str) -> WindowEnergy | None:
    for w in list(rec.phases) + list(rec.stages):
        if w.name == name:
            return w
    return None


def _hardware(records: Sequence[JobRecord]) -> list[str]:
    """``"8 x NVIDIA A100-SXM4-80GB"``, ``"2 nodes with Intel Xeon ..."``: the distinct hardware the
    jobs ran on (GPUs by model, each (node, device) once; CPUs by node model, each node once), so two
    jobs on one node are one node, not two."""
    gpus: dict[str, dict[tuple[str, str], int]] = {}
    cpus: dict[str, set[str]] = {}
    for r in records:
        for n in r.nodes:
            for d in n.devices:
                if d.device_class == "gpu":
                    seen = gpus.setdefault(d.model or "GPU", {})
                    key = (n.node, d.device_id)
                    seen[key] = max(seen.get(key, 0), d.count)
            cm = n.static.get("cpu_model") if n.static else None
            if cm:
                cpus.setdefault(str(cm), set()).add(n.node)
    out = [f"{sum(k.values())} x {m}" for m, k in sorted(gpus.items())]
    out += [f"{len(k)} node{'s' if len(k) > 1 else ''} with {m}" for m, k in sorted(cpus.items())]
    return out


def _training_type(name: str) -> str:
    """``fine-tuning`` / ``pre-training`` when the phase or label name says so, else "" (unknown:
    the model card leaves the key out rather than guess)."""
    low = name.lower().replace("_", "-").replace(" ", "-")
    if "fine-tun" in low or "finetun" in low:
        return "fine-tuning"
    if "pre-train" in low or "pretrain" in low:
        return "pre-training"
    return ""


_PLACE = re.compile(r"\b(region|country) ([A-Za-z0-9_-]+)")


def _location(rec: JobRecord) -> str:
    """Where the job's electricity was drawn, as the record holds it: its datacenter's name (not the
    catch-all of carbon facts given as arguments) and the region or country its carbon intensity
    was looked up for (``FR``, ``region DE-BW``); "" when the record names no place (a CI given as a
    number, or the world-average default)."""
    parts = [rec.carbon.datacenter] if rec.carbon.datacenter and rec.carbon.datacenter != GIVEN_DATACENTER else []
    m = _PLACE.search(rec.carbon.ci_source) if not rec.carbon.ci_source.startswith("DEFAULT") else None
    if m:
        parts.append(m.group(2) if m.group(1) == "country" else f"region {m.group(2)}")
    return ", ".join(parts)


def _where(recs: Sequence[JobRecord]) -> str:
    """"on the Slurm cluster's nodes", or for process trees measured outside Slurm "on host vm"."""
    if not all(ran_outside_slurm(r) for r in recs):
        return "on the Slurm cluster's nodes"
    hosts = sorted({n.node for r in recs for n in r.nodes})
    return f"on host{'s' if len(hosts) > 1 else ''} {', '.join(hosts)} (a process tree measured outside Slurm)"


def _defaults(recs: Sequence[JobRecord]) -> list[str]:
    """The documented defaults the records' CO2e rests on: ``PUE 1.58``, ``CI 475 gCO2e/kWh``."""
    out: list[str] = []
    out += sorted({f"PUE {r.carbon.pue:g}" for r in recs if "pue" in r.carbon.defaults_used})
    out += sorted({f"CI {r.carbon.ci_g_per_kwh:g} gCO2e/kWh" for r in recs if "ci" in r.carbon.defaults_used})
    return out


def citation(records: Sequence[JobRecord], *, phase: str = "", label: str = "",
             training_type: str = "") -> Citation:
    """The cited totals of ``records`` (the jobs' records, final or interim), or of the phase or
    stage named ``phase`` in each of them; ``label``: the ``track(label=...)`` they were selected
    by (for the text); ``training_type``: the model card's (default from the phase / label name:
    ``fine-tuning``, ``pre-training``, else the name).

    Raises CiteError: no records, or none with the phase."""
    if not records:
        raise CiteError("nothing to cite: no job selected (give job ids, or --label with a track() label)")
    recs = list(records)
    if phase:
        with_w = [(r, _window(r, phase)) for r in recs]
        with_w = [(r, w) for r, w in with_w if w is not None]
        if not with_w:
            have = sorted({w.name for r in recs for w in list(r.phases) + list(r.stages)})
            raise CiteError(f"--phase {phase!r}: no selected job marked a phase or stage of that name"
                            + (f" (they have: {', '.join(have)})" if have else " (they marked none)"))
        recs = [r for r, _ in with_w]
    classes: dict[str, ClassPart] = {}
    it: list[float | None] = []
    fac: list[float | None] = []
    co2: list[float | None] = []
    net: list[float | None] = []
    emb: list[float | None] = []
    complete = True
    for r in recs:
        w = _window(r, phase) if phase else None
        energies = w.energy_it_j if w is not None else r.energy_it_j
        methods = w.methods if w is not None else r.methods
        for cls, j in energies.items():
            part = classes.setdefault(cls, ClassPart(cls))
            part.kwh = sum_known([part.kwh, None if j is None else j / J_PER_KWH])
            part.methods.add(Method(methods.get(cls, Method.UNAVAILABLE)).value)
            cov = w.coverage if w is not None else min((d.coverage for n in r.nodes for d in n.devices
                                                       if d.device_class == cls), default=0.0)
            part.coverage = cov if part.coverage is None else min(part.coverage, cov)
        if w is not None:
            it_kwh = None if w.it_j is None else w.it_j / J_PER_KWH
            it.append(it_kwh)
            fac.append(None if it_kwh is None else it_kwh * r.carbon.pue)
            a = r.carbon.alpha  # a window built before the location-based share existed: net / alpha
            co2.append(w.co2e_gross_kg if w.co2e_gross_kg is not None
                       else (w.co2e_kg / a if w.co2e_kg is not None and a > 0 else None))
            net.append(w.co2e_kg)
            emb.append(window_embodied_kg(r, w))
        else:
            it.append(r.it_kwh)
            fac.append(r.facility_kwh)
            co2.append(r.co2e_gross_kg)
            net.append(r.co2e_kg)
            emb.append(r.embodied_kg)
        complete = complete and r.coverage_complete
    noun = "run" if all(ran_outside_slurm(r) for r in recs) else "job"  # a laptop run is no Slurm job
    what = f"{noun} {recs[0].job_id}" if len(recs) == 1 else f"{len(recs)} {noun}s"
    if label:
        what += f" of the run set track(label={label!r})"
    if phase:
        what += f", phase {phase!r} only"
    alphas = sorted({(r.carbon.alpha, r.carbon.alpha_source) for r in recs if r.carbon.alpha != 1})
    embodied = None if any(e is None for e in emb) else sum_known(emb)  # M of every job, or none
    # SCI for AI: one training run's functional units (its tags); several jobs only when each job
    # is one part of the run and they declare the run's totals alike, so none is scored then
    units = functional_units(recs[0]) if len(recs) == 1 else []
    return Citation(
        co2e_net_kg=sum_known(net) if alphas else None, alphas=alphas, embodied_kg=embodied,
        sci_ai=scores(sum_known(co2), embodied, units),
        jobs=[r.job_id for r in recs], what=what, it_kwh=sum_known(it), facility_kwh=sum_known(fac), co2e_kg=sum_known(co2),
        classes=classes, pue=sorted({(r.carbon.pue, r.carbon.pue_source) for r in recs}),
        ci=sorted({(r.carbon.ci_g_per_kwh, r.carbon.ci_source) for r in recs}),
        locations=sorted({loc for r in recs if (loc := _location(r))}), hardware=_hardware(recs),
        start=min(r.start_time for r in recs), end=max(r.end_time for r in recs),
        training_type=training_type or _training_type(phase or label), complete=complete,
        where=_where(recs), defaults=_defaults(recs), noun=noun,
    )


def _day(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.timezone.utc).strftime("%Y-%m-%d")


def _span(c: Citation) -> str:
    """``2024-03-01``, or ``2024-03-01 to 2024-03-04`` when the jobs ran over several days (UTC)."""
    return _day(c.start) if _day(c.start) == _day(c.end) else f"{_day(c.start)} to {_day(c.end)}"


def _num(v: float | None, unit: str) -> str:
    return "not measured" if v is None else f"{v:.4g} {unit}"


def _class_phrases(c: Citation) -> list[str]:
    out = []
    for cls, p in c.classes.items():
        how = "; ".join(_METHOD_WORDS[Method(m)] for m in sorted(p.methods))
        cov = "" if p.coverage is None else f", {100 * p.coverage:.0f} % of the time measured"
        out.append(f"{cls.upper()} {_num(p.kwh, 'kWh')} ({how}{cov})")
    return out


def methods_text(c: Citation) -> str:
    """The methods paragraph in plain text."""
    pue = "; ".join(f"{v:g} ({s})" for v, s in c.pue)
    ci = "; ".join(f"{v:g} gCO2e/kWh ({s})" for v, s in c.ci)
    hw = ", ".join(c.hardware) or "hardware not recorded"
    lower = "" if c.complete else " Some device was unmeasured or measured for part of the time: the totals are a lower bound."
    verb = {"measured": "measured", "estimated": "estimated (no energy reading existed: rated power x utilisation x time)",
            "partly estimated": "measured (estimated where no reading existed, as said per class)"}[_measured_word(c)]
    return (f"Energy and emissions of {c.what} ({hw}; {_span(c)}) were {verb} with {TOOL} {c.version} "
            f"{c.where}: IT energy {_num(c.it_kwh, 'kWh')}, by device class "
            f"{', '.join(_class_phrases(c))}. Facility energy {_num(c.facility_kwh, 'kWh')} is the IT energy x "
            f"PUE {pue}; emissions {_num(c.co2e_kg, 'kgCO2e')} are the facility "
            f"energy x carbon intensity {ci}.{lower}{_footprint_text(c)}")


def _footprint_text(c: Citation) -> str:
    """The sentences after the emissions: location-based and net apart, embodied, SCI for AI."""
    out = " The emissions are location-based (offsets excluded)"
    if c.alphas:
        a = "; ".join(f"{v:g} ({s})" for v, s in c.alphas)
        out += f"; net of the data centre's offset factor alpha {a} they are {_num(c.co2e_net_kg, 'kgCO2e')}"
    out += "."
    if c.embodied_kg is not None:
        out += (f" Embodied emissions of the hardware reserved, by the SCI's M = TE x (TS/EL) x RS, are "
                f"{_num(c.embodied_kg, 'kgCO2e')} (operational + embodied "
                f"{_num(None if c.co2e_kg is None else c.co2e_kg + c.embodied_kg, 'kgCO2e')}).")
    if c.sci_ai:
        parts = [f"{_num(s.total_g if s.total_g is not None else s.operational_g, 'gCO2e')} per {s.unit}"
                 + ("" if s.total_g is not None else " (operational only)") for s in c.sci_ai]
        out += f" SCI for AI (location-based, offsets excluded): {', '.join(parts)}."
    return out


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``%`` -> ``\\%``, ``_`` -> ``\\_`` ...)."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


def methods_latex(c: Citation) -> str:
    """The methods paragraph as LaTeX (special characters escaped, CO$_2$e, units with ``\\,``)."""
    text = latex_escape(methods_text(c))
    return (text.replace("gCO2e/kWh", r"g\,CO$_2$e/kWh").replace("kgCO2e", r"kg\,CO$_2$e")
            .replace(" kWh", r"\,kWh").replace(" x ", r" $\times$ "))


def citation_line(c: Citation) -> str:
    """One line to cite (no BibTeX): tool, version, what, the totals, the dates."""
    return (f"{TOOL} {c.version}: {c.what}, {_num(c.it_kwh, 'kWh')} IT / {_num(c.facility_kwh, 'kWh')} facility, "
            f"{_num(None if c.co2e_kg is None else c.co2e_kg * 1000, 'gCO2e')}"
            f"{' with default ' + ' and '.join(c.defaults) if c.defaults else ''}, "
            f"{'estimated' if _measured_word(c) == 'estimated' else 'measured'} {_span(c)} ({c.noun}s {', '.join(c.jobs)}).")


def _all_measured(c: Citation) -> bool:
    """Every class's energy from a counter or sampled power (an unmeasured class adds nothing)."""
    methods = {m for p in c.classes.values() for m in p.methods}
    return all(Method(m) in MEASURED for m in methods if m != Method.UNAVAILABLE.value)


def _measured_word(c: Citation) -> str:
    """``measured`` (every class from a counter or sampled power), ``estimated`` (none was: every
    class a TDP estimate) or ``partly estimated``."""
    if _all_measured(c):
        return "measured"
    methods = {m for p in c.classes.values() for m in p.methods} - {Method.UNAVAILABLE.value}
    return "partly estimated" if any(Method(m) in MEASURED for m in methods) else "estimated"


def model_card_data(c: Citation) -> dict[str, Any]:
    """The ``co2_eq_emissions`` mapping of a Hugging Face model card (emissions in grams); the
    optional ``training_type`` and ``geographical_location`` only where the records say them."""
    per_class = ", ".join(k + "=" + "/".join(sorted(p.methods)) for k, p in c.classes.items())
    defaults = f"; default {', '.join(c.defaults)}" if c.defaults else ""
    block = {
        "emissions": None if c.co2e_kg is None else round(c.co2e_kg * 1000, 6),
        "source": f"{TOOL} {c.version} ({_measured_word(c)}: {per_class}{defaults}; {c.noun}s {', '.join(c.jobs)})",
        "training_type": c.training_type,
        "geographical_location": "; ".join(c.locations),
        "hardware_used": ", ".join(c.hardware) or "not recorded",
    }
    return {"co2_eq_emissions": {k: v for k, v in block.items()
                                 if v or k not in ("training_type", "geographical_location")}}


def model_card_yaml(c: Citation) -> str:
    """The model card's YAML front matter with the ``co2_eq_emissions`` block (``---`` lines around it)."""
    import yaml

    return "---\n" + yaml.safe_dump(model_card_data(c), sort_keys=False, allow_unicode=True) + "---\n"


def render(c: Citation, fmt: str = "all") -> str:
    """``fmt``: ``text``, ``latex``, ``line``, ``modelcard`` or ``all`` (the four, headed)."""
    parts = {"text": methods_text(c), "latex": methods_latex(c), "line": citation_line(c),
             "modelcard": model_card_yaml(c).rstrip("\n")}
    if fmt != "all":
        return parts[fmt]
    return "\n\n".join(f"== {h} ==\n{parts[k]}" for k, h in (("text", "methods (text)"), ("latex", "methods (LaTeX)"),
                                                              ("line", "citation"), ("modelcard", "model card")))

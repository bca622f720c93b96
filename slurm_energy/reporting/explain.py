"""The report's "How it was computed" lines: each one an identity a reader can check with a calculator.

A line is only ever derived from numbers that really multiply out. For a ``tdp_estimate`` device the
stored fields (n = ``count``, u = ``mean_util``, P = ``rated_power_w``, t = ``duration_s``) do not
always reproduce the job's energy: the CPU TDP device's ``rated_power_w`` is the power of *all* its
``count`` cores, ``mean_util`` is the job's utilisation of its *allocated* CPUs, and the job's
share is taken by CPU time. So each candidate expansion (n x u x P x t with P per device, with
P = rated power / n, P_core x job CPU time) is rendered, the printed numbers are parsed back, and
the expansion is used only if their product equals the printed energy within
:data:`TOLERANCE`; otherwise the line states the measured job share in J and kWh with the method
in words. All functions are pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slurm_energy.model import DeviceEnergy, Method
from slurm_energy.reporting.scale import plain
from slurm_energy.units import J_PER_KWH

TOLERANCE = 1e-3  # relative: a printed product must equal the printed result within 0.1 %

_C, _P, _T = Method.COUNTER, Method.POWER_INTEGRATION, Method.TDP_ESTIMATE
#: Per (class, method): what the job-share number is (the measured form of a line), then what the
#: "Full devices" number covers (the caption under the class table).
METHOD_TEXT = {
    ("cpu", _T): ("tdp_estimate: TDP × node CPU utilisation × time, job share by CPU time",
                  "TDP model: TDP of all the node's CPUs × node CPU utilisation × time (all jobs on the node)"),
    ("ram", _T): ("tdp_estimate: W/GB × memory in use on the node × time, job share by job memory",
                  "RAM model: all memory in use on the node × W/GB × time (all jobs on the node)"),
    ("gpu", _T): ("tdp_estimate: rated power × GPU utilisation × time", "GPU model: rated power × GPU utilisation × time"),
    ("cpu", _C): ("counter: RAPL energy_uj deltas, job share by CPU time",
                  "the whole CPU package(s) (RAPL zones) over the job's time, idle and other jobs included"),
    ("ram", _C): ("counter: RAPL DRAM energy_uj deltas, job share by job memory",
                  "the DRAM RAPL zone(s) over the job's time, idle and other jobs included"),
    ("gpu", _C): ("counter: NVML total energy deltas of the job's GPUs",
                  "the whole GPU(s) (NVML energy counter) over the job's time, idle included"),
    ("cpu", _P): ("power_integration: sampled power × time, job share by CPU time",
                  "the whole CPU package(s) over the job's time, idle and other jobs included"),
    ("ram", _P): ("power_integration: sampled power × time, job share by job memory",
                  "the node's memory power over the job's time, other jobs included"),
    ("gpu", _P): ("power_integration: NVML power samples × time",
                  "the whole GPU(s) (NVML power samples) over the job's time, idle included"),
}


def full_device_caption(device_class: str, method: Method) -> str:
    """One sentence: what the "Full devices" energy of ``device_class`` (cpu/gpu/ram) measured by
    ``method`` covers; ``"not measured"`` for ``unavailable``. Raises nothing (unknown pairs get a
    generic text)."""
    if Method(method) == Method.UNAVAILABLE:
        return "not measured"
    return METHOD_TEXT.get((device_class, Method(method)), ("", "the whole device(s) over the job's time"))[1]


def _g(v: float) -> str:
    """5 significant digits: with 4 factors the printed product stays within 0.03 % of the exact one.
    Plain decimals (0.00013690, never 1.369e-04)."""
    return plain(v, 5)


def _j(v: float) -> str:
    """Joules: whole digits from 1e5 J up (no "7.2e+05"), else 5 significant digits."""
    return f"{v:.0f}" if abs(v) >= 1e5 else _g(v)


def _kwh(j: float) -> str:
    return plain(j / J_PER_KWH, 4)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b)) or (a == 0 and b == 0)


@dataclass
class Factor:
    """One printed factor of an expansion: value and unit ("" for counts and utilisation)."""

    value: float
    unit: str = ""

    def text(self) -> str:
        return f"{_g(self.value)} {self.unit}".rstrip()


def identity_line(name: str, symbolic: str, factors: Sequence[Factor], energy_j: float, note: str) -> str | None:
    """``"<name> = <symbolic> = f1 × f2 W × f3 s = <J> J = <kWh> kWh (<note>)"`` (``note`` must not
    contain " = ", so the line splits into its parts) if the printed
    factors multiply out to ``energy_j`` (J) and to the printed J and kWh within :data:`TOLERANCE`;
    else ``None`` (the caller then prints the measured form). Units: W × s = J; 1 kWh = 3.6e6 J."""
    prod_printed = 1.0
    for f in factors:
        prod_printed *= float(_g(f.value))
    j_txt, kwh_txt = _j(energy_j), _kwh(energy_j)
    if not (_close(prod_printed, energy_j) and _close(prod_printed, float(j_txt))
            and _close(prod_printed / J_PER_KWH, float(kwh_txt))):
        return None
    body = " × ".join(f.text() for f in factors)
    return f"{name} = {symbolic} = {body} = {j_txt} J = {kwh_txt} kWh ({note})"


def measured_line(name: str, device_class: str, method: Method, energy_j: float | None, n_devices: int = 1) -> str:
    """``"<name> = <J> J = <kWh> kWh (<method in words>)"``; ``n/a — not measured`` when
    ``energy_j`` is None (never 0). ``n_devices`` > 1 adds "sum over N devices"."""
    m = Method(method)
    if energy_j is None:
        return f"{name} = n/a — not measured ({m.value}; not counted as 0)"
    what = METHOD_TEXT.get((device_class, m), (m.value,))[0]
    if n_devices > 1:
        what += f"; sum over {n_devices} devices"
    return f"{name} = {_j(energy_j)} J = {_kwh(energy_j)} kWh ({what})"


def _candidates(d: DeviceEnergy, cpu_time_s: float | None, cpu_time_source: str) -> list[tuple[str, list[Factor], str]]:
    """Expansions of one ``tdp_estimate`` device's job energy to try, best first."""
    n, u, p, t = d.count, d.mean_util, d.rated_power_w, d.duration_s
    out: list[tuple[str, list[Factor], str]] = []
    if p is None or n < 1:
        return out
    unit_n = {"cpu": "cores", "gpu": "GPUs"}.get(d.device_class, "devices")
    per = "P_core" if d.device_class == "cpu" else "P"
    if u is not None and t:
        if n > 1:
            out.append((f"n·u·{per}·t", [Factor(n), Factor(u), Factor(p / n, "W"), Factor(t, "s")],
                        f"tdp_estimate; n: {n} {unit_n}, {per}: {p:g} W for all {n} / {n}"))
        out.append(("n·u·P·t", [Factor(n), Factor(u), Factor(p, "W"), Factor(t, "s")],
                    "tdp_estimate; P: rated power per device"))
    if d.device_class == "cpu" and cpu_time_s is not None:
        src = f" ({cpu_time_source})" if cpu_time_source else ""
        out.append(("P_core·CPU time", [Factor(p / n, "W"), Factor(cpu_time_s, "s")],
                    f"tdp_estimate; P_core: {p:g} W for {n} {unit_n} / {n}, job CPU time{src}"))
    return out


def device_line(d: DeviceEnergy, cpu_time_s: float | None = None, cpu_time_source: str = "") -> str:
    """The line for one device class that is a single device: an expansion that multiplies out
    (``tdp_estimate`` only), else the measured form. ``cpu_time_s``: the node's job CPU time, s."""
    name = f"E_{d.device_class}"
    if d.energy_j is not None and Method(d.method) == Method.TDP_ESTIMATE:
        for symbolic, factors, note in _candidates(d, cpu_time_s, cpu_time_source):
            line = identity_line(name, symbolic, factors, d.energy_j, note)
            if line is not None:
                return line
    return measured_line(name, d.device_class, d.method, d.energy_j)


def sum_line(name: str, parts_j: Sequence[float], total_j: float, label: str) -> str:
    """``"<name> = <label> = a + b = <kWh> kWh"`` with the parts in kWh printed to enough digits
    that they add up to the printed total within 0.1 %. ``parts_j``, ``total_j`` in J."""
    digits = 4
    while digits < 9:
        txt = [plain(p / J_PER_KWH, digits) for p in parts_j]
        if _close(sum(float(x) for x in txt), float(_kwh(total_j))):
            break
        digits += 1
    return f"{name} = {label} = {' + '.join(txt)} = {_kwh(total_j)} kWh"


def facility_line(it_kwh: float, pue: float, facility_kwh: float) -> str:
    """``E_facility = E_IT × PUE = a kWh × PUE = b kWh`` (IT printed to 5 digits so it multiplies out)."""
    return f"E_facility = E_IT × PUE = {_g(it_kwh)} kWh × {pue:g} = {plain(facility_kwh, 4)} kWh"


def co2e_line(facility_kwh: float, ci_g_per_kwh: float, alpha: float, co2e_kg: float, hourly: bool) -> str:
    """CO2e line in g then kg (kWh × gCO2e/kWh = gCO2e; / 1000 = kgCO2e).

    With hourly intensity the total is Σ_h E_facility,h × CI_h × α, not the flat CI: the line then
    shows the effective CI = CO2e / (E_facility × α), so it still multiplies out, and says so.
    """
    g = co2e_kg * 1000.0
    if hourly and facility_kwh > 0 and alpha > 0:
        ci_eff = g / (facility_kwh * alpha)
        return (f"CO2e = Σ_h E_facility,h × CI_h × α = {_g(facility_kwh)} kWh × {_g(ci_eff)} gCO2e/kWh "
                f"(effective hourly-weighted CI) × {alpha:g} = {_g(g)} gCO2e = {plain(co2e_kg, 4)} kgCO2e")
    return (f"CO2e = E_facility × CI × α = {_g(facility_kwh)} kWh × {ci_g_per_kwh:g} gCO2e/kWh × {alpha:g} = "
            f"{_g(g)} gCO2e = {plain(co2e_kg, 4)} kgCO2e")

"""GPUs allocated to a job but idle: the seconds and the energy drawn in them (pure; one rule).

An interval of a GPU's series (two consecutive readings, ``t0`` -> ``t1``) is *idle* when

* the GPU's utilisation reported at the interval's end is at most :attr:`IdleRule.util_max`
  (NVML ``nvmlDeviceGetUtilizationRates().gpu`` / amdgpu ``gpu_busy_percent``, as a fraction), and
* the card's mean power over the interval (its whole energy / the seconds) is at most the card's
  idle-draw bound: :attr:`IdleRule.power_max_w` when the site set one, else
  :attr:`IdleRule.power_max_fraction` x the card's rated power (TDP / enforced power limit).

The idle seconds are the sum of those intervals' lengths; the idle energy is the job's energy in
them (the same per-interval energies the job's GPU total is summed from: a counter delta or the
power integration, by the readings' method, x the job's share of the card). It is *measured energy
in an idle state*: its method is the GPU's (``counter`` / ``power_integration``); a GPU whose energy
is only a TDP estimate gives an idle energy that is the same estimate, labelled ``tdp_estimate``.
An interval whose utilisation or energy is unknown is neither idle nor busy: it is left out.

Defaults and their sources:

* ``util_max = 0.0``: Princeton's jobstats / Job Defense Shield count "GPU-hours at 0 %
  utilization" (github.com/jdh4/job_defense_shield, docs/alert/zero_gpu_util.md) and cancel GPU
  jobs "at 0% utilization" (docs/alert/cancel_gpu_jobs.md).
* ``power_max_fraction = 0.25`` of rated power: an idle data-centre GPU draws its bare idle power
  plus, with a CUDA context open (a job holding it), a DVFS step of 26-50 W on HBM cards (H100,
  A100; 66 W on the GDDR6 L40S) (Vadari 2026, "idle GPU power as a function of VRAM allocation",
  arXiv:2605.23918: 335,267 samples on 14 H100s plus A100 and L40S); an A100 SXM4 idles at about
  50-60 W of its 400 W and an H100 SXM at about 70-105 W of 700 W (~15 % of TDP), so idle with a
  context stays under 25 % of TDP, and any kernel running lifts the card far above it.

The node summary calls :func:`idle_sums` with each GPU's intervals, for the interim record (the
sampler's running summary, stretch by stretch) and the final one alike: one rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.core import Flag

#: Job Defense Shield's "0 % utilization" (docs/alert/zero_gpu_util.md)
DEFAULT_UTIL_MAX = 0.0
#: idle with a CUDA context open < 25 % of TDP (arXiv:2605.23918; see the module docstring)
DEFAULT_POWER_MAX_FRACTION = 0.25
#: idle stretches kept per GPU for the plot's band (a record stays small); beyond, joined and flagged
MAX_SPANS = 200


@dataclass(frozen=True)
class IdleRule:
    """Thresholds of an idle interval: utilisation fraction in [0, 1]; power bound in W (absolute)
    or as a fraction of the card's rated power."""

    util_max: float = DEFAULT_UTIL_MAX
    power_max_fraction: float = DEFAULT_POWER_MAX_FRACTION
    power_max_w: float | None = None

    def power_bound_w(self, rated_power_w: float | None) -> float | None:
        """The card's idle-draw bound, W; None when neither an absolute bound nor a rated power is known."""
        if self.power_max_w is not None:
            return self.power_max_w
        if rated_power_w:
            return self.power_max_fraction * rated_power_w
        return None


#: the documented defaults (a frozen dataclass: safe as a default argument)
DEFAULT_RULE = IdleRule()


def rule_from(site: Any) -> IdleRule:
    """The site's rule (``attribution.gpu_idle`` of a SiteConfig, or of the hooks' untyped view);
    the defaults where it is absent."""
    gi = getattr(getattr(site, "attribution", None), "gpu_idle", None)
    if gi is None:
        return IdleRule()

    def get(k: str, d: Any) -> Any:
        v = gi.get(k, d) if isinstance(gi, dict) else getattr(gi, k, d)
        return d if v is None and d is not None else v

    return IdleRule(util_max=float(get("util_max", DEFAULT_UTIL_MAX)),
                    power_max_fraction=float(get("power_max_fraction", DEFAULT_POWER_MAX_FRACTION)),
                    power_max_w=get("power_max_w", None))


def idle_sums(intervals: Iterable[tuple[float, float, float | None, float | None, float | None]],
              rule: IdleRule, rated_power_w: float | None) -> IdleSums:
    """Seconds and energy of a GPU's idle intervals.

    Args:
        intervals: ``(t0, t1, whole_j, job_j, util)`` per interval, s / J / fraction (None =
            unknown): the card's whole energy (for its power), the job's part of it, and the
            utilisation reported at ``t1``.
        rule: the thresholds.
        rated_power_w: the card's rated power, W (for a fractional bound).
    Returns:
        :class:`IdleSums`: idle seconds, the job's energy in them (J), the seconds that could be
        judged (utilisation and energy known), and the flag ``gpu_idle_util_only`` when no power
        bound was known (utilisation alone decided).
    """
    bound = rule.power_bound_w(rated_power_w)
    out = IdleSums(flags=set() if bound is not None else {Flag.GPU_IDLE_UTIL_ONLY.value})
    for t0, t1, whole, job, util in intervals:
        dt = t1 - t0
        if dt <= 0 or util is None or util != util or whole is None or whole != whole or job is None or job != job:
            continue
        out.checked_s += dt
        if util > rule.util_max or (bound is not None and whole / dt > bound):
            continue
        out.idle_s += dt
        out.idle_j += job
        out.add_span(t0, t1)
    out.bound_w = bound
    return out


@dataclass
class IdleSums:
    """A GPU's idle seconds and the job's energy in them (J) over some intervals, the seconds
    judged (utilisation and energy known), and flags."""

    idle_s: float = 0.0
    idle_j: float = 0.0
    checked_s: float = 0.0
    flags: set[str] = field(default_factory=set)
    spans: list[list[float]] = field(default_factory=list)  # [t0, t1] epoch s, contiguous idle merged
    bound_w: float | None = None  # the idle-draw bound applied, W

    def add_span(self, t0: float, t1: float) -> None:
        """An idle stretch for the report's band: joined to the previous one it touches; past
        :data:`MAX_SPANS` the last one is stretched over the gap (flagged)."""
        if self.spans and t0 <= self.spans[-1][1]:
            self.spans[-1][1] = max(self.spans[-1][1], t1)
        elif len(self.spans) >= MAX_SPANS:
            self.spans[-1][1] = t1
            self.flags.add(Flag.GPU_IDLE_SPANS_JOINED.value)
        else:
            self.spans.append([t0, t1])

    def merge(self, o: IdleSums) -> None:
        """Add ``o``, the same GPU over a later stretch."""
        self.idle_s += o.idle_s
        self.idle_j += o.idle_j
        self.checked_s += o.checked_s
        self.flags |= o.flags
        for a, b in o.spans:
            self.add_span(a, b)
        self.bound_w = o.bound_w if o.bound_w is not None else self.bound_w

    def energy_j(self) -> float | None:
        """The idle energy, J; None when no interval could be judged (utilisation never reported)."""
        return self.idle_j if self.checked_s > 0 else None

    def seconds(self) -> float | None:
        return self.idle_s if self.checked_s > 0 else None


def job_totals(devices: Iterable[Any]) -> tuple[float | None, float | None, str]:
    """A job's GPU-idle totals over its nodes' devices (:class:`~slurm_energy.model.DeviceEnergy`):
    ``(idle GPU-seconds, idle energy J, method)`` summed over the GPUs that have them; the method is
    the worst of those GPUs' (``counter`` / ``power_integration`` = measured in an idle state,
    ``tdp_estimate`` = estimated); (None, None, "") when no GPU was judged."""
    from slurm_energy.core import worst_method

    gpus = [d for d in devices if d.device_class == "gpu" and d.idle_s is not None]
    if not gpus:
        return None, None, ""
    with_j = [d for d in gpus if d.idle_energy_j is not None]
    idle_j = sum(d.idle_energy_j for d in with_j) if with_j else None
    method = worst_method([d.method for d in with_j]).value if with_j else ""
    return sum(d.idle_s for d in gpus), idle_j, method


def describe_method(method: str) -> str:
    """How a GPU-idle energy was obtained, in words: measured in an idle state, or estimated."""
    if method in ("counter", "power_integration"):
        return f"measured energy in an idle state ({method})"
    if method == "tdp_estimate":
        return "estimated (tdp_estimate: no GPU energy reading), not measured"
    return "unavailable"

"""A job's share of a node's (or GPU's) measured energy, interval by interval (pure functions).

A job on a shared node gets, for every sample interval ``(t_{k-1}, t_k]``::

    job energy_k = device energy_k (J, from accounting.integrate) x share_k (dimensionless, [0, 1])

Shares (all clamped to [0, 1], the raw value kept in ``clamps`` when given and the device flagged
``share_clamped``; ``None`` when unknown, never 0 for "unknown"):

* CPU (RAPL package energy): job's cgroup CPU-time delta / node busy CPU-time delta
  (:func:`cpu_share`), both in CPU-seconds over the same interval (issue 3 point 4).
* RAM (RAPL dram energy): job memory in use / node memory in use (:func:`ram_share`).
* GPU shared by several jobs: the job's PIDs' SM utilisation / all processes' SM utilisation,
  from NVML ``nvmlDeviceGetProcessUtilization`` (:func:`gpu_process_share`).
* MIG slice: slice compute units / parent GPU compute units (:func:`mig_fraction`), applied to the
  parent GPU's energy and labelled estimated (NVML reports energy for the parent only).

Invariant: when the inputs are consistent (the jobs' CPU-time deltas add up to at most the node's
busy CPU time, the jobs' memory to at most the node's used memory, PIDs disjoint), the jobs on one
node never sum to more than the node. :func:`cap_shares` enforces it when they are not (counters
read at slightly different instants).

Energy left over (idle power, system processes) stays with the node: it is recorded as the
device's whole energy (``DeviceEnergy.device_energy_j``) beside the job's share.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from slurm_energy.accounting.integrate import SeriesEnergy, floats
from slurm_energy.core import Flag
from slurm_energy.devices.fractions import mig_fraction  # noqa: F401 - part of the attribution rules

#: Attribution policies a site may choose (site config ``attribution.policy``):
#:
#: * ``"shared"`` -- default. Per interval, job energy = device energy x the job's measured share
#:   (:func:`cpu_share`, :func:`ram_share`, :func:`gpu_process_share`); idle and other jobs' energy
#:   is not charged to the job.
#: * ``"exclusive_whole_node"`` -- a job with the node to itself (``--exclusive``) is charged the
#:   whole node's device energy, share 1 in every interval (idle included).
#: * ``"utilisation_weighted"`` -- the method's model E = n x u x P x t (Lannelongue, Grealey &
#:   Inouye 2021, "Green Algorithms", Adv. Sci. 8:2100707): rated power x the job's utilisation x
#:   time, whatever was measured (:func:`utilisation_weighted_j`).
POLICIES = ("shared", "exclusive_whole_node", "utilisation_weighted")

FLAG_SHARE_UNKNOWN = "share_unknown"  # the job's share of this interval could not be computed
FLAG_SHARE_CAPPED = "share_capped"  # shares of jobs on one device summed > 1 and were scaled down


#: A physically bounded ratio (utilisation, share, coverage) came out above 1 (or below 0) and was
#: clamped; the raw value is kept on the device (``DeviceEnergy.unclamped``).
FLAG_UTIL_CLAMPED = Flag.UTIL_CLAMPED.value  # CPU time / (allocated CPUs x wall) > 1, GPU util > 100 %
FLAG_SHARE_CLAMPED = Flag.SHARE_CLAMPED.value  # job CPU time / node busy CPU time > 1, job memory / node used > 1
FLAG_COVERAGE_CLAMPED = Flag.COVERAGE_CLAMPED.value  # measured seconds > the job's elapsed seconds


def clamp_ratio(x: Optional[float], name: str = "", clamps: Optional[dict[str, float]] = None) -> Optional[float]:
    """``x`` clamped to [0, 1]; ``None`` stays ``None``.

    When ``clamps`` (a dict) is given and ``x`` was outside [0, 1], the most extreme raw value seen
    for ``name`` is kept there (``clamps[name]``), so the caller can flag it and keep the raw number:
    CPU time over allocated CPUs x wall exceeds 1 with hyperthreads and accounting jitter, and a
    clamp must not hide it.
    """
    if x is None:
        return None
    c = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
    if clamps is not None and c != x:
        old = clamps.get(name)
        clamps[name] = x if old is None or abs(x - c) > abs(old - (1.0 if old > 1 else 0.0)) else old
    return c


def _clamp01(x: float, name: str = "", clamps: Optional[dict[str, float]] = None) -> float:
    return clamp_ratio(x, name, clamps)  # type: ignore[return-value]


def cpu_share(job_cpu_delta_s: Optional[float], node_busy_delta_s: Optional[float],
              clamps: Optional[dict[str, float]] = None) -> Optional[float]:
    """Job's share of the node's CPU (package) energy over one interval.

    Args:
        job_cpu_delta_s: the job's CPU time (user + system, all its cgroup's tasks) spent in the
            interval, CPU-seconds; ``None`` if unknown.
        node_busy_delta_s: the node's busy (non-idle, non-iowait) CPU time in the interval, from
            ``/proc/stat``, CPU-seconds; ``None`` if unknown.

    Returns:
        ``job / node`` clamped to [0, 1]; 0.0 when the node was idle (busy delta 0); ``None`` when
        either input is ``None`` or negative (a counter that went backwards: no basis for a share).
    """
    if job_cpu_delta_s is None or node_busy_delta_s is None:
        return None
    if job_cpu_delta_s < 0 or node_busy_delta_s < 0:
        return None
    if node_busy_delta_s == 0:
        return 0.0
    return _clamp01(job_cpu_delta_s / node_busy_delta_s, "cpu_share", clamps)


def ram_share(job_mem_bytes: Optional[int], node_mem_used_bytes: Optional[int],
              clamps: Optional[dict[str, float]] = None) -> Optional[float]:
    """Job's share of the node's DRAM energy: job memory in use / node memory in use.

    Args:
        job_mem_bytes: the job's resident memory (cgroup ``memory.usage_in_bytes`` or RSS sum),
            bytes; ``None`` if unknown.
        node_mem_used_bytes: the node's used memory (total - available), bytes; ``None`` if unknown.

    Returns:
        Ratio clamped to [0, 1]; ``None`` if either is ``None``, negative, or the node uses 0 bytes.
    """
    if job_mem_bytes is None or node_mem_used_bytes is None:
        return None
    if job_mem_bytes < 0 or node_mem_used_bytes <= 0:
        return None
    return _clamp01(job_mem_bytes / node_mem_used_bytes, "ram_share", clamps)


#: A per-process utilisation up to this is accounting jitter (NVML has reported smUtil above 100 %):
#: clamped to 1 and flagged; above it, it is a unit error (percent passed as a fraction) and raises.
PROC_UTIL_JITTER_MAX = 1.5


def gpu_process_share(job_pids: set[int], proc_util: Optional[Mapping[int, Optional[float]]],
                      clamps: Optional[dict[str, float]] = None) -> Optional[float]:
    """Job's share of one GPU from per-process SM utilisation (NVML process utilisation samples).

    Args:
        job_pids: PIDs of the job's processes (host PID namespace).
        proc_util: ``{pid: sm_util}`` with ``sm_util`` in [0, 1] for every process that used the GPU
            in the interval (``Reading.proc_util``); ``None`` if NVML could not report it.

    Returns:
        sum of the job's PIDs' utilisation / sum over all PIDs, in [0, 1]; ``None`` when
        ``proc_util`` is ``None`` or no process used the GPU (no basis for a share: the caller
        applies its policy fallback and labels it).

        clamps: when given, a utilisation in (1, :data:`PROC_UTIL_JITTER_MAX`] is clamped to 1 and
            its raw value kept as ``clamps["gpu_proc_util"]`` (flag ``util_clamped``).

    Raises:
        ValueError: a utilisation below 0 or above :data:`PROC_UTIL_JITTER_MAX` (above 1 without
            ``clamps``): names the PID and value.
    """
    if proc_util is None:
        return None
    total = 0.0
    mine = 0.0
    for pid, u in proc_util.items():
        if u is None:
            continue
        if clamps is not None and 1.0 < u <= PROC_UTIL_JITTER_MAX:
            clamp_ratio(u, "gpu_proc_util", clamps)  # keeps the raw value
            u = 1.0
        if not 0.0 <= u <= 1.0:
            raise ValueError(
                f"proc_util[{pid}]: SM utilisation must be a fraction in [0, 1], got {u!r}; "
                "divide NVML's percent (smUtil) by 100"
            )
        total += u
        if int(pid) in job_pids:
            mine += u
    if total <= 0:
        return None
    return _clamp01(mine / total)


def utilisation_weighted_j(count: int, util: float, rated_power_w: float, duration_s: float) -> float:
    """The method's model E = n x u x P x t in J (policy ``utilisation_weighted``).

    Args: ``count`` n devices (or cores), ``util`` u in [0, 1], ``rated_power_w`` P per device in W
    (TDP / power limit), ``duration_s`` t in s. Source: Green Algorithms (see :data:`POLICIES`).

    Raises:
        ValueError: negative count, power or duration, or util outside [0, 1] (names the field).
    """
    for name, v in (("count", count), ("rated_power_w", rated_power_w), ("duration_s", duration_s)):
        if v < 0:
            raise ValueError(f"{name}: must be >= 0, got {v!r}")
    if not 0.0 <= util <= 1.0:
        raise ValueError(f"util: must be a fraction in [0, 1], got {util!r}")
    return count * util * rated_power_w * duration_s


def cap_shares(shares: Mapping[str, Optional[float]]) -> dict[str, Optional[float]]:
    """Scale the known shares of several jobs on one device down so they sum to at most 1.

    Args: ``{job_id: share or None}`` for one interval. Returns the same keys; ``None`` stays
    ``None``; if the known shares sum to s > 1 each is divided by s.
    """
    known = [v for v in shares.values() if v is not None]
    s = sum(known)
    if s <= 1.0:
        return dict(shares)
    return {k: (None if v is None else v / s) for k, v in shares.items()}


def attribute_series(
    series: SeriesEnergy,
    shares: Sequence[Optional[float]],
    policy: str = "shared",
) -> SeriesEnergy:
    """The job's part of a device's :class:`SeriesEnergy`, interval by interval.

    Args:
        series: the whole device's energy per interval (J).
        shares: one share per interval of ``series`` (same order), in [0, 1] or ``None``.
            Ignored under ``exclusive_whole_node`` (share 1).
        policy: ``"shared"`` or ``"exclusive_whole_node"``. (``utilisation_weighted`` is a model,
            not a split of measured energy: use :func:`utilisation_weighted_j`.)

    Returns:
        A new :class:`SeriesEnergy`: energy_k x share_k; an interval whose share is ``None`` is
        dropped with flag ``share_unknown`` (never counted as 0). ``wraps``/``resets`` carried over.

    Raises:
        ValueError: unknown policy, ``len(shares) != len(series.intervals)``, or a share outside
        [0, 1].
    """
    if policy not in ("shared", "exclusive_whole_node"):
        raise ValueError(
            f"policy: {policy!r} cannot split measured energy; use 'shared' or "
            "'exclusive_whole_node' (or utilisation_weighted_j for 'utilisation_weighted')"
        )
    n = len(series.t0)
    if policy == "exclusive_whole_node":
        shares = [1.0] * n
    if len(shares) != n:
        raise ValueError(f"shares: need one share per interval ({n}), got {len(shares)}")
    sh = floats(list(shares))
    bad = np.flatnonzero((sh < 0) | (sh > 1))
    if len(bad):
        raise ValueError(f"shares[{int(bad[0])}]: must be in [0, 1], got {shares[int(bad[0])]!r}")
    out = SeriesEnergy(series.t0, series.t1, series.energy * sh, dict(series.masks), series.wraps, series.resets,
                       set(series.extra))
    out.flag(FLAG_SHARE_UNKNOWN, series.measured & np.isnan(sh))
    return out

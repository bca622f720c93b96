"""A job's share of a node's (or GPU's) measured energy, interval by interval (pure functions).

A job on a shared node gets, for every sample interval ``(t_{k-1}, t_k]``::

    job energy_k = device energy_k (J, from accounting.integrate) x share_k (dimensionless, [0, 1])

Shares (all clamped to [0, 1], the raw value kept in ``clamps`` when given and the device flagged
``share_clamped``; ``None`` when unknown, never 0 for "unknown"):

* CPU (RAPL package energy): job's cgroup CPU-time delta / node busy CPU-time delta
  (:func:`cpu_shares`), both in CPU-seconds over the same interval.
* RAM (RAPL dram energy): job memory in use / node memory in use (:func:`ram_shares`).
* GPU shared by several jobs: the job's PIDs' SM utilisation / all processes' SM utilisation,
  from NVML ``nvmlDeviceGetProcessUtilization`` (:func:`gpu_process_share`).
* MIG slice: slice compute units / parent GPU compute units (:func:`mig_fraction`), applied to the
  parent GPU's energy and labelled estimated (NVML reports energy for the parent only).

Invariant: when the inputs are consistent (the jobs' CPU-time deltas add up to at most the node's
busy CPU time, the jobs' memory to at most the node's used memory, PIDs disjoint), the jobs on one
node never sum to more than the node.

Energy left over (idle power, system processes) stays with the node: it is recorded as the
device's whole energy (``DeviceEnergy.device_energy_j``) beside the job's share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from slurm_energy.accounting.integrate import Arr, SeriesEnergy, floats
from slurm_energy.core import Flag
from slurm_energy.devices.gpu.nvidia import mig_fraction  # noqa: F401 - part of the attribution rules

#: Attribution policies a site may choose (site config ``attribution.policy``):
#:
#: * ``"shared"`` -- default. Per interval, job energy = device energy x the job's measured share
#:   (:func:`cpu_shares`, :func:`ram_shares`, :func:`gpu_process_share`); idle and other jobs' energy
#:   is not charged to the job.
#: * ``"exclusive_whole_node"`` -- a job with the node to itself (``--exclusive``) is charged the
#:   whole node's device energy, share 1 in every interval (idle included).
#: * ``"utilisation_weighted"`` -- the method's model E = n x u x P x t (Lannelongue, Grealey &
#:   Inouye 2021, "Green Algorithms", Adv. Sci. 8:2100707): rated power x the job's utilisation x
#:   time, whatever was measured (:func:`slurm_energy.accounting.formulas.class_energy_j`).
POLICIES = ("shared", "exclusive_whole_node", "utilisation_weighted")


def clamp_ratio(x: float | None, name: str = "", clamps: dict[str, float] | None = None) -> float | None:
    """``x`` clamped to [0, 1]; ``None`` stays ``None``.

    When ``clamps`` (a dict) is given and ``x`` was outside [0, 1], the most extreme raw value seen
    for ``name`` is kept there (``clamps[name]``), so the caller can flag it (``util_clamped``,
    ``share_clamped``, ``coverage_clamped``) and keep the raw number: CPU time over allocated CPUs x
    wall exceeds 1 with hyperthreads and accounting jitter, and a clamp must not hide it.
    """
    if x is None:
        return None
    c = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
    if clamps is not None and c != x:
        old = clamps.get(name)
        clamps[name] = x if old is None or abs(x - c) > abs(old - (1.0 if old > 1 else 0.0)) else old
    return c


def clamp_ratios(raw: Arr, name: str = "", clamps: dict[str, float] | None = None) -> Arr:
    """:func:`clamp_ratio` on an array (NaN = unknown, kept): the most extreme raw value outside
    [0, 1] goes to ``clamps``."""
    c = np.clip(raw, 0.0, 1.0)
    out = ~np.isnan(raw) & (c != raw)
    if clamps is not None and out.any():
        dist = np.where(out, np.abs(raw - c), -1.0)
        clamp_ratio(float(raw[int(np.argmax(dist))]), name, clamps)
    return c


def cpu_shares(job_cpu_delta_s: Arr, node_busy_delta_s: Arr, clamps: dict[str, float] | None = None) -> Arr:
    """The job's share of the node's CPU (package) energy per interval (NaN = unknown).

    Args:
        job_cpu_delta_s: the job's CPU time (user + system, all its cgroup's tasks) spent in each
            interval, CPU-seconds; NaN if unknown.
        node_busy_delta_s: the node's busy (non-idle, non-iowait) CPU time in each interval, from
            ``/proc/stat``, CPU-seconds; NaN if unknown.

    Returns:
        ``job / node`` clamped to [0, 1]; 0 when the node was idle (busy delta 0); NaN when either
        is unknown or negative (a counter that went backwards: no basis for a share).
    """
    jc, nb = job_cpu_delta_s, node_busy_delta_s
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = ~np.isnan(jc) & ~np.isnan(nb) & (jc >= 0) & (nb >= 0)
        s = clamp_ratios(np.where(ok & (nb > 0), jc / nb, np.nan), "cpu_share", clamps)
    s[ok & (nb == 0)] = 0.0
    return s


def ram_shares(job_mem_bytes: Arr, node_mem_used_bytes: Arr, clamps: dict[str, float] | None = None) -> Arr:
    """The job's share of the node's DRAM energy per interval: job memory in use / node memory in use.

    Args:
        job_mem_bytes: the job's resident memory (cgroup ``memory.usage_in_bytes`` or RSS sum),
            bytes; NaN if unknown.
        node_mem_used_bytes: the node's used memory (total - available), bytes; NaN if unknown.

    Returns:
        Ratio clamped to [0, 1]; NaN if either is unknown, negative, or the node uses 0 bytes.
    """
    jm, nm = job_mem_bytes, node_mem_used_bytes
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = ~np.isnan(jm) & ~np.isnan(nm) & (jm >= 0) & (nm > 0)
        return clamp_ratios(np.where(ok, jm / nm, np.nan), "ram_share", clamps)


#: A per-process utilisation up to this is accounting jitter (NVML has reported smUtil above 100 %):
#: clamped to 1 and flagged; above it, it is a unit error (percent passed as a fraction) and raises.
PROC_UTIL_JITTER_MAX = 1.5


def gpu_process_share(job_pids: set[int], proc_util: Mapping[int, float | None] | None,
                      clamps: dict[str, float] | None = None) -> float | None:
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
    return clamp_ratio(mine / total)


def attribute_series(series: SeriesEnergy, shares: Sequence[float | None] | Arr,
                     policy: str = "shared") -> SeriesEnergy:
    """The job's part of a device's :class:`SeriesEnergy`, interval by interval.

    Args:
        series: the whole device's energy per interval (J).
        shares: one share per interval of ``series`` (same order), in [0, 1] or ``None``/NaN.
            Ignored under ``exclusive_whole_node`` (share 1).
        policy: ``"shared"`` or ``"exclusive_whole_node"``. (``utilisation_weighted`` is a model,
            not a split of measured energy: :func:`~slurm_energy.accounting.formulas.class_energy_j`.)

    Returns:
        A new :class:`SeriesEnergy`: energy_k x share_k; an interval whose share is unknown is
        dropped with flag ``share_unknown`` (never counted as 0). ``wraps``/``resets`` carried over.

    Raises:
        ValueError: unknown policy, ``len(shares) != len(series.t0)``, or a share outside
        [0, 1].
    """
    if policy not in ("shared", "exclusive_whole_node"):
        raise ValueError(
            f"policy: {policy!r} cannot split measured energy; use 'shared' or "
            "'exclusive_whole_node' (formulas.class_energy_j is 'utilisation_weighted')"
        )
    n = len(series.t0)
    sh = np.ones(n) if policy == "exclusive_whole_node" else (
        shares if isinstance(shares, np.ndarray) else floats(list(shares)))
    if len(sh) != n:
        raise ValueError(f"shares: need one share per interval ({n}), got {len(sh)}")
    bad = np.flatnonzero((sh < 0) | (sh > 1))
    if len(bad):
        raise ValueError(f"shares[{int(bad[0])}]: must be in [0, 1], got {shares[int(bad[0])]!r}")
    out = SeriesEnergy(series.t0, series.t1, series.energy * sh, dict(series.masks), series.wraps, series.resets,
                       set(series.extra))
    out.flag(Flag.SHARE_UNKNOWN.value, series.measured & np.isnan(sh))
    return out

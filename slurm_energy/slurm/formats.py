"""Slurm's own text formats, read and written in one place (sacct, scontrol, the job environment).

* Durations (:func:`parse_duration`, :func:`format_duration`): sacct's ``[D-]HH:MM:SS``,
  ``MM:SS.mmm`` and ``HH:MM:SS.mmm`` (TotalCPU/UserCPU below an hour, Slurm's ``_elapsed_time``),
  scontrol's ``D-HH:MM:SS``; ``""`` = unknown, ``INVALID`` = unknown, ``UNLIMITED`` /
  ``Partition_Limit`` = no limit.
* Suffixed numbers (:func:`parse_suffixed`): ``K M G T P E`` multiply by 1000 for energy (sacct's
  ConsumedEnergy: ``convert_num_unit2(..., 1000, ...)`` in src/sacct/print.c) and by 1024 for memory
  (MaxRSS, ReqMem, MinMemoryNode, TRES ``mem=``).
* Memory requests (:func:`parse_memory`, :func:`requested_memory_bytes`): SLURM_MEM_PER_NODE /
  SLURM_MEM_PER_CPU (MB), scontrol's MinMemoryNode / MinMemoryCPU, sacct's ReqMem (with the old
  ``n``/``c`` per-node/per-CPU suffix), TRES ``mem=``; ``0`` = the whole node's memory.
* Energy (:func:`parse_energy_j`, :func:`format_energy`): sacct ConsumedEnergy(Raw) in J; memory
  shown as sacct does (:func:`format_memory`).

Every parser returns ``None`` for "unknown" (empty, INVALID, N/A, (null)) and raises
:class:`SlurmFormatError` (a ValueError) naming the field and value for text Slurm never writes.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from slurm_energy.errors import SlurmFormatError  # callers catch it from here too

UNKNOWN = {"", "INVALID", "N/A", "NONE", "(NULL)", "UNKNOWN"}
UNLIMITED = {"UNLIMITED", "PARTITION_LIMIT", "INFINITE"}

_SUFFIX_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?(?:\.(\d+))?$")
_NUMBER = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([KMGTPE]?)$", re.IGNORECASE)


def _err(field: str, text: str, expected: str) -> SlurmFormatError:
    return SlurmFormatError(f"{field}={text!r}: not a Slurm {expected}; expected e.g. {_EXAMPLES[expected]}")


_EXAMPLES = {"duration": "'1-02:03:04', '02:03:04', '03:04.567', '02:03:04.567'",
             "number": "'12', '12.34K', '1.5M', '2G'",
             "memory": "'4000M', '4G', '2Gn', '500Mc', '0'"}


def parse_duration(text: Optional[str], field: str = "duration") -> Optional[float]:
    """Seconds in a Slurm duration, or ``None`` if unknown; ``math.inf`` for ``UNLIMITED``.

    Forms (sacct Elapsed/TotalCPU/Timelimit, scontrol RunTime/TimeLimit): ``D-HH:MM:SS``,
    ``HH:MM:SS``, ``MM:SS.mmm``, ``HH:MM:SS.mmm``, ``D-HH:MM:SS.mmm``, ``MM:SS``; with a day part
    also ``D-HH`` and ``D-HH:MM`` (Slurm's time-limit forms). The fraction is decimal seconds.

    Raises:
        SlurmFormatError: anything else (names ``field`` and the text).
    """
    if text is None:
        return None
    t = str(text).strip()
    if t.upper() in UNKNOWN:
        return None
    if t.upper() in UNLIMITED:
        return math.inf
    m = _DURATION.match(t)
    if not m:
        raise _err(field, t, "duration")
    days, a, b, c, frac = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        h, mnt, s = (parts + [0, 0])[:3]
    elif len(parts) == 3:  # HH:MM:SS[.mmm]
        h, mnt, s = parts
    elif len(parts) == 2:  # MM:SS[.mmm]
        h, (mnt, s) = 0, parts
    else:
        raise _err(field, t, "duration")  # a bare number is minutes in sbatch, never in sacct output
    if frac is not None and days is not None and len(parts) < 3:
        raise _err(field, t, "duration")
    if mnt >= 60 or s >= 60 or (days is not None and h >= 24):
        raise _err(field, t, "duration")
    sec = (int(days or 0) * 24 + h) * 3600 + mnt * 60 + s
    return sec + (int(frac) / 10 ** len(frac) if frac else 0.0)


def format_duration(seconds: Optional[float], millis: bool = False) -> str:
    """Slurm's ``[D-]HH:MM:SS`` (sacct Elapsed); ``millis``: sacct's TotalCPU style, ``MM:SS.mmm``
    below an hour. ``None`` -> ``""`` (Slurm prints unknown as empty); ``inf`` -> ``UNLIMITED``."""
    if seconds is None:
        return ""
    if math.isinf(seconds):
        return "UNLIMITED"
    ms_total = int(round(max(0.0, seconds) * 1000))
    s_total, ms = divmod(ms_total, 1000)
    if not millis:
        s_total = int(round(max(0.0, seconds)))
    d, s = divmod(s_total, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if millis and not d and not h:
        return f"{m:02d}:{s:02d}.{ms:03d}"
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def parse_suffixed(text: Optional[str], base: int, field: str = "value") -> Optional[float]:
    """A Slurm number with an optional ``K M G T P E`` suffix, x ``base`` per step (1000 energy,
    1024 memory). ``None`` for unknown. Raises SlurmFormatError for other text."""
    if text is None:
        return None
    t = str(text).strip()
    if t.upper() in UNKNOWN:
        return None
    m = _NUMBER.match(t)
    if not m:
        raise _err(field, t, "number")
    return float(m.group(1)) * base ** _SUFFIX_POWER[m.group(2).upper()]


def parse_energy_j(text: Optional[str], field: str = "ConsumedEnergy") -> Optional[float]:
    """sacct's ConsumedEnergy (``12.34K`` = 12 340 J) or ConsumedEnergyRaw (``12340``), in J.

    ``None`` for empty/unknown. 0 is returned as 0.0: whether 0 means "not collected" depends on
    the site's AcctGatherEnergyType (see :func:`slurm_consumed_energy`), decided by the caller."""
    return parse_suffixed(text, 1000, field)


def format_energy(joules: Optional[float]) -> str:
    """Joules as sacct prints ConsumedEnergy: up to 2 decimals with K/M/G/T (1000 steps)."""
    if joules is None:
        return ""
    v, i = float(joules), 0
    units = "KMGTPE"
    while abs(v) >= 1000 and i < len(units):
        v, i = v / 1000, i + 1
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return text + (units[i - 1] if i else "")


def parse_memory(text: Optional[str], field: str = "memory", bare_unit: str = "M") -> Optional[tuple[int, str]]:
    """A Slurm memory amount -> (bytes, per) with ``per`` ``"node"``, ``"cpu"`` or ``""``.

    ``4000M``, ``4G``, ``1.50G`` (x 1024 per step); a bare number is in ``bare_unit`` (MB for
    SLURM_MEM_PER_NODE and ReqMem, bytes ``""`` for MaxRSS); sacct's older ReqMem suffix ``n``/``c``
    sets ``per``. ``0`` means "all the node's memory" (``(0, per)``; see
    :func:`requested_memory_bytes`). ``None`` for unknown. Raises SlurmFormatError otherwise.
    """
    if text is None:
        return None
    t = str(text).strip()
    if t.upper() in UNKNOWN:
        return None
    per = ""
    if len(t) > 1 and t[-1] in "nc":  # no unit suffix is n or c: sacct's per-node/per-CPU marker
        per, t = ("node" if t[-1] == "n" else "cpu"), t[:-1]
    m = _NUMBER.match(t)
    if not m:
        raise _err(field, str(text), "memory")
    suffix = m.group(2).upper() or bare_unit.upper()
    return int(round(float(m.group(1)) * 1024 ** _SUFFIX_POWER[suffix])), per


def requested_memory_bytes(per_node: Optional[str] = None, per_cpu: Optional[str] = None,
                           cpus_on_node: Optional[int] = None, node_mem_bytes: Optional[int] = None,
                           ) -> tuple[Optional[int], str]:
    """The job's memory request on one node, in bytes, and how it was derived.

    Args:
        per_node: SLURM_MEM_PER_NODE (MB) or scontrol MinMemoryNode (``4000M``) or TRES ``mem=``.
        per_cpu: SLURM_MEM_PER_CPU (MB) or MinMemoryCPU; multiplied by ``cpus_on_node``.
        cpus_on_node: the job's CPUs on this node (SLURM_JOB_CPUS_PER_NODE).
        node_mem_bytes: the node's memory (MemTotal), for a request of 0 (= the whole node).

    Returns:
        ``(bytes or None, how)``, e.g. ``(4194304000, "SLURM_MEM_PER_NODE=4000 (MB)")``; ``None``
        when nothing was requested in a form we can compute (``how`` says why).

    Raises:
        SlurmFormatError: a value is not a Slurm memory amount.
    """
    if per_node not in (None, ""):
        b, _ = parse_memory(per_node, "mem_per_node") or (None, "")
        if b == 0:
            if node_mem_bytes:
                return node_mem_bytes, "0 = all of the node's memory"
            return None, "0 = whole node (node memory unknown)"
        return b, f"per node {per_node}"
    if per_cpu not in (None, ""):
        b, _ = parse_memory(per_cpu, "mem_per_cpu") or (None, "")
        if b == 0:
            if node_mem_bytes:
                return node_mem_bytes, "0 = all of the node's memory"
            return None, "0 = whole node (node memory unknown)"
        if b is not None and cpus_on_node:
            return b * cpus_on_node, f"per CPU {per_cpu} x {cpus_on_node} CPUs"
        return None, f"per CPU {per_cpu}, CPUs on the node unknown"
    return None, "no memory request known"


def format_memory(b: Optional[int]) -> str:
    """Bytes as sacct shows ReqMem/MaxRSS (x 1024 per step): the largest unit with a whole number
    (``4000M``, ``1234K``, ``1536M``), else two decimals (``3.91G``); ``""`` for unknown."""
    if b is None:
        return ""
    steps = list(enumerate("KMGTP", 1))
    for i, unit in reversed(steps):
        v = b / 1024 ** i
        if v >= 1 and float(v).is_integer():
            return f"{int(v)}{unit}"
    for i, unit in reversed(steps):
        if b >= 1024 ** i:
            return f"{b / 1024 ** i:.2f}{unit}"
    return str(b)

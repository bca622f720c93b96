"""Slurm's own text formats, read and written in one place (sacct, scontrol, the job environment).

* Durations (:func:`parse_duration`; written by :func:`slurm_energy.reporting.scale.format_duration`): sacct's ``[D-]HH:MM:SS``,
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
  shown as sacct does (:func:`format_memory`); both by :func:`convert_num_unit`, Slurm's
  ``convert_num_unit2``: two decimals and the next unit (``1.50K``, ``1.50G``).

Every parser returns ``None`` for "unknown" (empty, INVALID, N/A, (null)) and raises
:class:`SlurmFormatError` (a ValueError) naming the field and value for text Slurm never writes.
"""

from __future__ import annotations

import math
import re

from slurm_energy.errors import SlurmFormatError as SlurmFormatError  # callers catch it from here too

UNKNOWN = {"", "INVALID", "N/A", "NONE", "(NULL)", "UNKNOWN"}
UNLIMITED = {"UNLIMITED", "PARTITION_LIMIT", "INFINITE"}

_SUFFIX_POWER = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_DURATION = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?(?:\.(\d+))?$")
#: the largest memory amount taken (bytes): 16 EiB, Slurm's 64-bit counters' range
MAX_MEMORY_BYTES = 2**64
_NUMBER = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([KMGTPE]?)$", re.IGNORECASE)


def _err(field: str, text: str, expected: str) -> SlurmFormatError:
    return SlurmFormatError(f"{field}={text!r}: not a Slurm {expected}; expected e.g. {_EXAMPLES[expected]}")


_EXAMPLES = {"duration": "'1-02:03:04', '02:03:04', '03:04.567', '02:03:04.567'",
             "number": "'12', '12.34K', '1.5M', '2G'",
             "memory": "'4000M', '4G', '2Gn', '500Mc', '0'"}


def parse_duration(text: str | None, field: str = "duration") -> float | None:
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


def parse_suffixed(text: str | None, base: int, field: str = "value") -> float | None:
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
    return float(m.group(1)) * float(base ** _SUFFIX_POWER[m.group(2).upper()])


def parse_energy_j(text: str | None, field: str = "ConsumedEnergy") -> float | None:
    """sacct's ConsumedEnergy (``12.34K`` = 12 340 J) or ConsumedEnergyRaw (``12340``), in J.

    ``None`` for empty/unknown. 0 is returned as 0.0: whether 0 means "not collected" depends on
    the site's AcctGatherEnergyType (see :func:`slurm_energy.slurm.clients.sacct.consumed_energy`), decided by the caller."""
    return parse_suffixed(text, 1000, field)


def format_energy(joules: float | None) -> str:
    """Joules as sacct prints ConsumedEnergy: :func:`convert_num_unit` with divisor 1000, not exact
    (src/sacct/print.c PRINT_CONSUMED_ENERGY: ``convert_num_unit2(..., UNIT_NONE, params.units, 1000,
    params.convert_flags & ~CONVERT_NUM_UNIT_EXACT)``): ``1.50K``, ``12.34K``, ``2K``, ``999``."""
    if joules is None:
        return ""
    return convert_num_unit(float(joules), 1000, exact=False)


#: src/common/slurm_protocol_api.c convert_num_unit2: ``char *unit = "\0KMGTP?"`` (beyond peta: ``?``)
_UNIT_CHARS = ("", "K", "M", "G", "T", "P", "?")


def convert_num_unit(num: float, divisor: int = 1024, *, unit: int = 0, exact: bool = True) -> str:
    """Slurm's ``convert_num_unit2`` (src/common/slurm_protocol_api.c, SchedMD/slurm 284c3b95f0), as
    sacct calls it without ``--units``/``--noconvert``: the number in ``unit`` (0 none, 1 K, 2 M ...)
    is divided by ``divisor`` while it is at least ``divisor`` -- with ``exact`` (sacct's default
    CONVERT_NUM_UNIT_EXACT, memory) only while its integer part is a multiple of ``divisor / 2``
    ("half values (e.g., 2.5G) are still considered precise") -- then printed as an integer with the
    unit letter if it is whole, else with two decimals (``%.2f``): ``1.50G``, ``4000M``, ``2046780K``.
    A number whose integer part is 0 prints ``0``."""
    if int(num) == 0:
        return "0"
    if exact:
        while num >= divisor and int(num) % (divisor // 2) == 0:
            num /= divisor
            unit += 1
    else:
        while num >= divisor:
            num /= divisor
            unit += 1
    letter = _UNIT_CHARS[unit] if 0 <= unit < len(_UNIT_CHARS) - 1 else "?"
    return f"{int(num)}{letter}" if float(int(num)) == num else f"{num:.2f}{letter}"


def parse_memory(text: str | None, field: str = "memory", bare_unit: str = "M") -> tuple[int, str] | None:
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
    b = float(m.group(1)) * 1024 ** _SUFFIX_POWER[suffix]
    if not b < MAX_MEMORY_BYTES:  # also inf, from a number of hundreds of digits
        raise SlurmFormatError(f"{field}={str(text)[:40]!r}: more than 16 EiB, no memory amount Slurm writes")
    return round(b), per


def requested_memory_bytes(per_node: str | None = None, per_cpu: str | None = None,
                           cpus_on_node: int | None = None, node_mem_bytes: int | None = None,
                           ) -> tuple[int | None, str]:
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
    text, field = (per_node, "mem_per_node") if per_node not in (None, "") else (per_cpu, "mem_per_cpu")
    if text in (None, ""):
        return None, "no memory request known"
    b, _ = parse_memory(text, field) or (None, "")
    if b == 0:
        if node_mem_bytes:
            return node_mem_bytes, "0 = all of the node's memory"
        return None, "0 = whole node (node memory unknown)"
    if field == "mem_per_node":
        return b, f"per node {per_node}"
    if b is not None and cpus_on_node:
        return b * cpus_on_node, f"per CPU {per_cpu} x {cpus_on_node} CPUs"
    return None, f"per CPU {per_cpu}, CPUs on the node unknown"


def parse_timestamp(text: str) -> float | None:
    """Epoch s of sacct's / scontrol's ``2026-12-01T05:41:14`` (the host's local time, as Slurm
    prints it); None for anything else (``Unknown``, ``None``: not started or not ended)."""
    import time

    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def format_memory(b: int | None) -> str:
    """Bytes as sacct shows MaxRSS (``convert_num_unit(bytes, UNIT_NONE, ..., CONVERT_NUM_UNIT_EXACT)``)
    and ReqMem (the same from MB, UNIT_MEGA: the same text for a whole number of MB), i.e.
    :func:`convert_num_unit` x 1024, exact: ``4000M``, ``1234K``, ``1.50G`` (1536 MB), ``2.50G``,
    ``1280M`` (1.25 GB is not a half value), bytes not a multiple of 512 as they are; ``""`` unknown."""
    if b is None:
        return ""
    return convert_num_unit(float(b), 1024, exact=True)

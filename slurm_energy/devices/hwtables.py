"""Look-ups in the bundled hardware tables: CPU TDP by model, GPU rated power and dense FLOP/s.

Tables (built by ``scripts/build_tables.py``; provenance and licences in ``devices/data/NOTICE``):

* ``devices/data/cpu_tdp.csv``: ``key, model, tdp_w, n_cores, source, year, licence`` -- TDP per
  socket (W) from Green Algorithms ``TDP_cpu.csv`` (with core counts) and CodeCarbon
  ``cpu_power.csv``.
* ``devices/data/gpu_specs.csv``: ``key, model, rated_w, fp32_flops, tf32_flops, bf16_flops,
  source, year, licence`` -- board power (W) and dense FLOP/s from Epoch AI ``ml_hardware.csv``
  and Green Algorithms ``TDP_gpu.csv``.

Model strings as the OS (``/proc/cpuinfo`` "model name") or NVML report them are reduced by
:func:`normalize_cpu_model` / :func:`normalize_gpu_model` to a key; matching is exact on the key,
then on the key without the family word (``xeon``, ``epyc``...) when that is unambiguous. No fuzzy
matching: a wrong TDP is worse than a flagged fallback. A CPU look-up parses only the table lines
that can match (the Prolog makes one); the GPU table is parsed with ``csv`` once per process.
"""

from __future__ import annotations

import csv
import functools
import os
import re
from dataclasses import dataclass

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
CPU_TABLE = os.path.join(DATA_DIR, "cpu_tdp.csv")
GPU_TABLE = os.path.join(DATA_DIR, "gpu_specs.csv")

_TRADEMARKS = re.compile(r"\((?:r|tm|c)\)|®|™", re.I)
_CLOCK = re.compile(r"@.*$")
_CORES = re.compile(r"\b\d+-core\b|\b(?:dual|quad|six|eight|twelve|sixteen)-core\b", re.I)
_NOISE_WORDS = {"intel", "amd", "cpu", "processor", "apu", "with", "radeon", "graphics", "vega",
                "mobile", "genuine", "0000"}
_CPU_FAMILY_WORDS = {"xeon", "epyc", "ryzen", "core", "opteron", "threadripper", "athlon",
                     "pentium", "celeron", "phenom", "ii", "pro"}
_GPU_NOISE = {"nvidia", "tesla", "geforce", "amd", "radeon", "instinct", "graphics"}


def normalize_cpu_model(model: str) -> str:
    """Reduce a CPU model string to its lookup key.

    ``"Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz"`` -> ``"xeon e5-2683 v4"``;
    ``"AMD EPYC 7763 64-Core Processor"`` -> ``"epyc 7763"``. Pure; never raises.
    """
    s = _TRADEMARKS.sub(" ", str(model))
    s = _CLOCK.sub(" ", s)
    s = _CORES.sub(" ", s)
    words = [w for w in re.split(r"[\s,]+", s.lower()) if w and w not in _NOISE_WORDS]
    return " ".join(words)


def strip_family(key: str) -> str:
    """Drop family words from a normalized CPU key (``"xeon e5-2683 v4"`` -> ``"e5-2683 v4"``)."""
    return " ".join(w for w in key.split() if w not in _CPU_FAMILY_WORDS)


def normalize_gpu_model(model: str) -> str:
    """Reduce a GPU name (NVML ``nvmlDeviceGetName``) to its lookup key.

    ``"NVIDIA H100 80GB HBM3"`` -> ``"h100 80gb hbm3"``; ``"Tesla V100-SXM2-16GB"`` ->
    ``"v100 sxm2 16gb"``. Pure; never raises.
    """
    s = _TRADEMARKS.sub(" ", str(model)).lower().replace("-", " ").replace("_", " ")
    s = re.sub(r"(\d+)\s*gb\b", r"\1gb", s)
    return " ".join(w for w in s.split() if w not in _GPU_NOISE)


@dataclass(frozen=True)
class CpuRow:
    """CPU TDP per socket (W), cores per socket if known, with provenance."""

    key: str
    model: str
    tdp_w: float
    n_cores: int | None
    source: str
    year: int | None
    licence: str


@dataclass(frozen=True)
class GpuRow:
    """GPU board power (W) and dense FLOP/s (None = not in the source), with provenance."""

    key: str
    model: str
    rated_w: float | None
    fp32_flops: float | None
    tf32_flops: float | None
    bf16_flops: float | None
    source: str
    year: int | None
    licence: str


def _f(x: str) -> float | None:
    return float(x) if x not in ("", None) else None


def _i(x: str) -> int | None:
    return int(float(x)) if x not in ("", None) else None


def _cpu_row(r: list[str]) -> CpuRow:
    """A CpuRow from a csv row ``key, model, tdp_w, n_cores, source, year, licence``."""
    return CpuRow(r[0], r[1], float(r[2]), _i(r[3]), r[4], _i(r[5]), r[6])


def _loose_ok(k: str) -> bool:
    return bool(k) and not (k.isdigit() and len(k) < 4)  # "3260" alone is too weak a key


@functools.lru_cache(maxsize=2)
def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()[1:]  # without the header


@functools.lru_cache(maxsize=16)
def _lookup_cpu_key(key: str, path: str) -> CpuRow | None:
    """:func:`lookup_cpu` for a normalized key: the first row with that key, else the one row (or
    rows of one TDP) whose key without family words is the key's without them; None otherwise
    (ambiguous, or a loose key too weak: empty or under 4 digits). Parses only the lines holding
    the key's longest word (every matching row holds all of its words): the Prolog looks up one
    CPU per job, and indexing all ~4,700 rows cost it tens of ms."""
    loose_key = strip_family(key)
    needle = max((loose_key or key).split(), key=len)
    lines = [ln for ln in _lines(path) if needle in ln]
    exact: dict[str, CpuRow] = {}
    for r in csv.reader(lines):
        exact.setdefault(r[0], _cpu_row(r))
    if key in exact:
        return exact[key]
    if not _loose_ok(loose_key):
        return None
    same = [row for row in exact.values() if strip_family(row.key) == loose_key]
    if not same or any(row.tdp_w != same[0].tdp_w for row in same):
        return None  # not in the table, or ambiguous (rows of different TDPs)
    return same[0]


def lookup_cpu(model: str, path: str = CPU_TABLE) -> CpuRow | None:
    """TDP row for an OS-reported CPU model string, or None if the model is not in the table.

    :raises FileNotFoundError: table missing (run ``scripts/build_tables.py``).
    """
    key = normalize_cpu_model(model)
    if not key:
        return None
    return _lookup_cpu_key(key, path)


@functools.lru_cache(maxsize=4)
def _gpu_index(path: str = GPU_TABLE) -> dict[str, GpuRow]:
    out: dict[str, GpuRow] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            row = GpuRow(r["key"], r["model"], _f(r["rated_w"]), _f(r["fp32_flops"]),
                         _f(r["tf32_flops"]), _f(r["bf16_flops"]), r["source"], _i(r["year"]),
                         r["licence"])
            out.setdefault(row.key, row)
    return out


def lookup_gpu(name: str, path: str = GPU_TABLE) -> GpuRow | None:
    """Rated power / FLOP/s row for an NVML GPU name, or None.

    Exact key first; else the longest table key whose words are all in the name's key
    (``"h100 80gb hbm3"`` finds ``"h100 sxm5 80gb"`` only if every word matches, so it finds
    ``"h100"`` style keys, never a different chip). At run time NVML's enforced power limit beats
    this table.
    """
    key = normalize_gpu_model(name)
    if not key:
        return None
    idx = _gpu_index(path)
    if key in idx:
        return idx[key]
    words = set(key.split())
    for k, row in idx.items():  # same words, other order ("a100 pcie 40gb" = "a100 40gb pcie")
        if set(k.split()) == words:
            return row
    best: GpuRow | None = None
    for k, row in sorted(idx.items()):
        kw = set(k.split())
        if kw and kw <= words and (best is None or len(kw) > len(best.key.split())):
            best = row
    return best

"""Hourly carbon intensity: admin-supplied CSV per grid zone, and CO2e summed hour by hour.

Input CSV (what an admin syncs, e.g. from their grid operator): a header, then one row per hour::

    timestamp,gco2e_per_kwh
    2026-11-30T10:00:00Z,212.5
    2026-11-30T11:00:00+00:00,198

* ``timestamp``: ISO 8601 with an explicit UTC offset (``Z`` or ``+HH:MM``; converted to UTC),
  on the hour. A naive timestamp is rejected (it is ambiguous across DST changes).
* intensity column: ``gco2e_per_kwh`` (aliases ``g_per_kwh``, ``carbon_intensity``), in
  gCO2e/kWh, 1..2000 (below 1 is a unit mistake, e.g. kgCO2e/kWh; 0 only with
  ``ci-import --allow-zero``); hours in 1..5 are imported with a warning (:func:`low_hours_warning`).

Storage (``slurm-energy ci-import FILE --zone Z``): ``<paths.hourly_ci_dir>/<Z>.csv``, default
``/var/spool/slurm-energy/carbon-intensity/<Z>.csv``, normalized to ``hour_utc,g_per_kwh`` sorted by
hour, merged with what was there (re-imported hours replace old ones), written atomically.

Keys everywhere are UTC hour strings ``YYYY-MM-DDTHH:00:00Z`` (:func:`hour_key`), the same keys as
:attr:`slurm_energy.model.NodeSummary.hourly_energy_j`. The site's local time zone plays no part,
so DST changes cannot double or drop an hour.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Callable
from datetime import datetime, timezone

from slurm_energy.carbon.units import WARN_BELOW_G_PER_KWH, ImplausibleIntensityError, plausibility_warning, to_g_per_kwh
from slurm_energy.errors import HourlyDataError
from slurm_energy.fileio import atomic_write
from slurm_energy.units import J_PER_KWH, co2e_kg

_TS_COLS = ("timestamp", "hour_utc", "datetime", "time")
_CI_COLS = ("gco2e_per_kwh", "g_per_kwh", "carbon_intensity")
_ZONE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_.-]{0,63}")


def hour_key(t: float) -> str:
    """UTC hour containing epoch second ``t``: ``"2026-11-30T10:00:00Z"``."""
    return datetime.fromtimestamp(math.floor(t / 3600.0) * 3600, tz=timezone.utc).strftime("%Y-%m-%dT%H:00:00Z")


def split_interval_by_hour(t0: float, t1: float, energy: float) -> dict[str, float]:
    """Spread ``energy`` used uniformly over ``[t0, t1]`` (epoch s) onto UTC hours.

    Returns ``{hour_key: share}``; shares sum to ``energy`` (same unit, e.g. J). ``t1 == t0`` puts
    it all in ``t0``'s hour. :raises ValueError: ``t1 < t0``.
    """
    if t1 < t0:
        raise ValueError(f"t1 ({t1}) is before t0 ({t0}); sample times must increase")
    if t1 == t0:
        return {hour_key(t0): energy}
    out: dict[str, float] = {}
    a = t0
    while a < t1:
        b = min(t1, (math.floor(a / 3600.0) + 1) * 3600.0)
        k = hour_key(a)
        out[k] = out.get(k, 0.0) + energy * (b - a) / (t1 - t0)
        a = b
    return out


def facility_kwh_by_hour(hourly_it_j: dict[str, float], pue: float) -> dict[str, float]:
    """IT energy per hour (J) -> facility energy per hour (kWh): ``J / 3.6e6 x PUE``."""
    return {h: j / J_PER_KWH * pue for h, j in hourly_it_j.items()}


def co2e_kg_hourly(hourly_facility_kwh: dict[str, float], intensity: dict[str, float], alpha: float,
                   *, fallback_g_per_kwh: float | None = None) -> float:
    """CO2e (kg) = sum over hours h of facility_kWh[h] x CI[h] (gCO2e/kWh) x alpha / 1000.

    :param hourly_facility_kwh: ``{hour_key: facility kWh}`` (PUE already applied, once).
    :param intensity: ``{hour_key: gCO2e/kWh}``.
    :param alpha: fraction counted, [0, 1].
    :param fallback_g_per_kwh: used for hours missing from ``intensity``; None -> those hours raise.
    :raises KeyError: an hour has energy but no intensity and no fallback (message lists them).
    """
    missing = [h for h in hourly_facility_kwh if h not in intensity]
    if missing and fallback_g_per_kwh is None:
        raise KeyError(f"no hourly intensity for {len(missing)} hour(s) of the job, first "
                       f"{sorted(missing)[0]}; import them with 'slurm-energy ci-import' or pass a fallback")
    total = 0.0
    for h, kwh in hourly_facility_kwh.items():
        ci = intensity.get(h, fallback_g_per_kwh)
        assert ci is not None  # missing hours were rejected above unless there is a fallback
        total += co2e_kg(kwh, ci, alpha)
    return total


def parse_hour(raw: str, where: str) -> str:
    """An ISO 8601 timestamp with a UTC offset, on the hour -> its UTC hour key; HourlyDataError naming ``where``."""
    s = raw.strip()
    try:
        dt = datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s)
    except ValueError:
        raise HourlyDataError(f"{where}: timestamp {raw!r} is not ISO 8601; write e.g. 2026-11-30T10:00:00Z") from None
    if dt.tzinfo is None:
        raise HourlyDataError(f"{where}: timestamp {raw!r} has no UTC offset; append 'Z' if it is UTC")
    dt = dt.astimezone(timezone.utc)
    if dt.minute or dt.second or dt.microsecond:
        raise HourlyDataError(f"{where}: timestamp {raw!r} is not on the hour; give one value per UTC hour")
    return dt.strftime("%Y-%m-%dT%H:00:00Z")


def _csv_fix(e: ValueError) -> str:
    """``" Fix: ..."`` (after ``"?"``) or ``". Fix: ..."`` for an implausibly low CSV intensity (the
    column has no unit to change); "" for any other error."""
    if not isinstance(e, ImplausibleIntensityError):
        return ""
    if e.guess is not None:
        return (f" Fix: the column is in gCO2e/kWh: write {e.guess:g}; if the whole file is in kgCO2e/kWh "
                f"(or tCO2e/MWh), multiply every value by 1000")
    return f". Fix: {e.fix}"  # the message ends without "?" here


def read_hourly_column(path: str | os.PathLike, value_cols: tuple[str, ...], what: str,
                       parse: Callable[[str | None, str, str], float]) -> dict[str, float]:
    """``{hour key UTC: value}`` from a CSV of one value per UTC hour: the one reader of the hourly
    files (intensity here, prices in :mod:`slurm_energy.carbon.prices`). ``value_cols``: accepted
    names of the value column; ``what``: how the header error names it; ``parse(raw, where,
    column)``: the value or :class:`HourlyDataError`.

    :raises HourlyDataError: missing columns, bad timestamp, duplicate hour, a bad value, or no
        rows; messages name file, line and the fix.
    """
    p = os.fspath(path)
    out: dict[str, float] = {}
    try:
        fh = open(p, newline="", encoding="utf-8")
    except OSError as e:
        raise HourlyDataError(f"{p}: cannot read ({e.strerror})") from None
    with fh:
        rd = csv.DictReader(fh)
        cols = {c.strip().lower(): c for c in (rd.fieldnames or [])}
        ts_col = next((cols[c] for c in _TS_COLS if c in cols), None)
        v_col = next((cols[c] for c in value_cols if c in cols), None)
        if ts_col is None or v_col is None:
            raise HourlyDataError(f"{p}: header {rd.fieldnames!r} lacks a timestamp column ({'/'.join(_TS_COLS)}) "
                                  f"or {what}")
        for i, row in enumerate(rd, start=2):
            where = f"{p} line {i}"
            h = parse_hour(row.get(ts_col) or "", where)
            v = parse(row.get(v_col), where, v_col)
            if h in out:
                raise HourlyDataError(f"{where}: hour {h} appears twice; keep one value per UTC hour")
            out[h] = v
    if not out:
        raise HourlyDataError(f"{p}: no data rows")
    return out


def load_hourly_csv(path: str | os.PathLike, *, allow_zero: bool = False) -> dict[str, float]:
    """Read and validate an hourly-intensity CSV (format in the module docstring).

    :param allow_zero: accept 0 gCO2e/kWh hours (``ci-import --allow-zero``; a stored file holds
        them only when it was imported so).
    :returns: ``{hour_key UTC: gCO2e/kWh}``.
    :raises HourlyDataError: missing columns, bad/naive/off-hour timestamp, duplicate hour,
        non-numeric or implausible (< 1 gCO2e/kWh, 0 without ``allow_zero``, > 2000) intensity, or
        no rows. Messages name file, line and the fix.
    """
    def intensity(raw: str | None, where: str, col: str) -> float:
        try:
            return to_g_per_kwh(raw, "gCO2e/kWh", field=f"{where} {col}",  # type: ignore[arg-type]
                                allow_zero=allow_zero, zero_ok="`slurm-energy ci-import --allow-zero`")
        except ValueError as e:
            raise HourlyDataError(f"{e}{_csv_fix(e)}") from None

    return read_hourly_column(path, _CI_COLS, f"an intensity column ({'/'.join(_CI_COLS)}, gCO2e/kWh)", intensity)


def low_hours_warning(data: dict[str, float], where: str) -> str | None:
    """A warning when some hours of ``data`` (``{hour: gCO2e/kWh}``) are in [1, 5) gCO2e/kWh,
    accepted but lower than even hydro/nuclear lifecycle figures; None when there are none."""
    low = sorted(h for h, g in data.items() if plausibility_warning(g) is not None)
    if not low:
        return None
    first = plausibility_warning(data[low[0]], field=f"{where} hour {low[0]}")
    return (f"{len(low)} of {len(data)} hours below {WARN_BELOW_G_PER_KWH:g} gCO2e/kWh; first: {first}")


def check_zone(zone: str) -> str:
    """Validate a zone name used as a file name (``FR``, ``US-CA``, ``gcp:europe-west1``).

    :raises HourlyDataError: empty, path separators, or other characters.
    """
    if not isinstance(zone, str) or not _ZONE_RE.fullmatch(zone):
        raise HourlyDataError(f"zone {zone!r}: use letters, digits and ':_.-' only (e.g. FR, US-CA), "
                              f"the same name as location.region or location.country in site.yaml")
    return zone


#: kinds of hourly series: the grid's average intensity, and its marginal one (e.g. WattTime's MOER:
#: the emissions of the generator that responds to a change in load); stored apart
KINDS = ("average", "marginal")


def series_dir(store_dir: str, kind: str = "average") -> str:
    """Where ``kind``'s files live: ``store_dir`` for the average, ``store_dir/marginal`` for the marginal."""
    if kind not in KINDS:
        raise HourlyDataError(f"kind {kind!r}: use one of {', '.join(KINDS)}")
    return store_dir if kind == "average" else os.path.join(store_dir, "marginal")


def zone_path(store_dir: str, zone: str) -> str:
    """Stored file of ``zone`` under ``store_dir``."""
    return os.path.join(store_dir, check_zone(zone).replace(":", "_") + ".csv")


def write_meta(store_dir: str, zone: str, source: str, imported_at: float) -> None:
    """Where ``zone``'s stored series came from and when it was imported (``<zone>.source.json``)."""
    import json

    atomic_write(zone_path(store_dir, zone)[:-4] + ".source.json",
                 json.dumps({"source": source, "imported_at": imported_at}) + "\n")


def read_meta(store_dir: str, zone: str) -> dict:
    """``{"source", "imported_at"}`` of ``zone``'s stored series; {} when none was recorded (imported before)."""
    import json

    try:
        with open(zone_path(store_dir, zone)[:-4] + ".source.json", encoding="utf-8") as f:
            d = json.load(f)
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def write_zone(store_dir: str, zone: str, data: dict[str, float]) -> str:
    """Write ``{hour: g/kWh}`` as the zone's stored file (atomic replace). Returns its path."""
    os.makedirs(store_dir, exist_ok=True)
    dest = zone_path(store_dir, zone)
    atomic_write(dest, "hour_utc,g_per_kwh\r\n" + "".join(f"{h},{float(data[h])!r}\r\n" for h in sorted(data)))
    return dest


def load_zone(store_dir: str, zone: str) -> dict[str, float] | None:
    """Stored hourly intensity of ``zone`` (``{hour: gCO2e/kWh}``), or None if never imported.

    :raises HourlyDataError: the stored file exists but is invalid.
    """
    try:
        p = zone_path(store_dir, zone)
    except HourlyDataError:
        return None
    if not os.path.exists(p):
        return None
    return load_hourly_csv(p, allow_zero=True)  # a 0 hour got there only by ci-import --allow-zero


def import_hourly_csv(src: str | os.PathLike, zone: str, store_dir: str, *, allow_zero: bool = False,
                      warnings: list[str] | None = None, kind: str = "average", source: str = "",
                      now: float | None = None) -> tuple[int, int, str]:
    """Validate ``src`` and merge it into ``zone``'s stored file.

    :param allow_zero: accept hours of 0 gCO2e/kWh (the site says so explicitly).
    :param warnings: when given, receives :func:`low_hours_warning` about ``src``.
    :param kind: ``average`` (the job's CO2e by default) or ``marginal`` (e.g. MOER), stored apart.
    :param source: where the series came from (shown with every figure it gives; default the file name).
    :returns: ``(rows imported, rows now stored, stored path)``.
    :raises HourlyDataError: invalid source (nothing is written) or bad zone name.
    """
    check_zone(zone)
    new = load_hourly_csv(src, allow_zero=allow_zero)
    low = low_hours_warning(new, os.fspath(src))
    if low is not None and warnings is not None:
        warnings.append(low)
    import time

    store_dir = series_dir(store_dir, kind)
    merged = dict(load_zone(store_dir, zone) or {})
    merged.update(new)
    dest = write_zone(store_dir, zone, merged)
    write_meta(store_dir, zone, source or os.path.basename(os.fspath(src)), time.time() if now is None else now)
    return len(new), len(merged), dest

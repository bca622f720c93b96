"""Hourly electricity prices (a time-of-use tariff), imported per zone like hourly carbon intensity.

Input CSV: a header, then one row per UTC hour::

    timestamp,price_per_kwh
    2026-11-30T10:00:00Z,0.182

``timestamp`` as for the intensity (:func:`slurm_energy.carbon.hourly.parse_hour`: ISO 8601 with an
explicit offset, on the hour); ``price_per_kwh`` (alias ``price``) in the tariff's currency per kWh,
0..100 (above 100 per kWh is a price per MWh: the message says to divide by 1000). Stored by
``slurm-energy price-import FILE --zone Z`` as ``<paths.hourly_price_dir>/<Z>.csv`` (default
``<spool_dir>/prices``), merged with what was there, written atomically. The job's cost uses them
(:mod:`slurm_energy.accounting.cost`).
"""

from __future__ import annotations

import math
import os

from slurm_energy.carbon.hourly import check_zone, read_hourly_column
from slurm_energy.errors import HourlyDataError
from slurm_energy.fileio import atomic_write

_PRICE_COLS = ("price_per_kwh", "price")
#: above this price per kWh the column is per MWh (the dearest retail electricity is a few per kWh)
MAX_PER_KWH = 100.0


def load_price_csv(path: str | os.PathLike) -> dict[str, float]:
    """``{hour key UTC: price per kWh}`` from a price CSV (format in the module docstring).

    :raises HourlyDataError: missing columns, bad timestamp, duplicate hour, a price that is not a
        number in [0, 100] per kWh, or no rows; the message names file, line and the fix.
    """
    def price(raw: str | None, where: str, col: str) -> float:
        raw = (raw or "").strip()
        try:
            v = float(raw)
        except ValueError:
            raise HourlyDataError(f"{where}: {col} {raw!r} is not a number; write the price per kWh, e.g. 0.182") from None
        if not math.isfinite(v) or v < 0:
            raise HourlyDataError(f"{where}: {col} {raw!r}: a price must be a number >= 0 per kWh")
        if v > MAX_PER_KWH:
            raise HourlyDataError(f"{where}: {col} {v:g} per kWh is implausible: a price per MWh? Fix: divide "
                                  f"every value by 1000 (write {v / 1000:g})")
        return v

    return read_hourly_column(path, _PRICE_COLS, f"a price column ({'/'.join(_PRICE_COLS)}, currency per kWh)", price)


def zone_path(store_dir: str, zone: str) -> str:
    return os.path.join(store_dir, check_zone(zone).replace(":", "_") + ".csv")


def load_zone_prices(store_dir: str, zone: str) -> dict[str, float] | None:
    """The stored prices of ``zone``, or None if none were imported. :raises HourlyDataError: corrupt file."""
    p = zone_path(store_dir, zone)
    return load_price_csv(p) if os.path.exists(p) else None


def import_price_csv(src: str | os.PathLike, zone: str, store_dir: str) -> tuple[int, int, str]:
    """Validate ``src`` and merge it into ``zone``'s stored prices: ``(rows imported, rows stored, path)``.
    :raises HourlyDataError: invalid source (nothing written) or bad zone name."""
    check_zone(zone)
    new = load_price_csv(src)
    merged = dict(load_zone_prices(store_dir, zone) or {})
    merged.update(new)
    os.makedirs(store_dir, exist_ok=True)
    dest = zone_path(store_dir, zone)
    atomic_write(dest, "hour_utc,price_per_kwh\r\n" + "".join(f"{h},{merged[h]!r}\r\n" for h in sorted(merged)))
    return len(new), len(merged), dest

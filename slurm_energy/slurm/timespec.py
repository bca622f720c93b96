"""sacct's ``-S/--starttime`` and ``-E/--endtime`` formats -> epoch seconds.

Accepted (from the sacct(1) man page, "Valid time formats"), interpreted in the given time zone:

* ``YYYY-MM-DD[THH:MM[:SS]]``
* ``MMDD[YY][-HH:MM[:SS]]``, ``MM/DD[/YY][-HH:MM[:SS]]``, ``MM.DD[.YY][-HH:MM[:SS]]``
* ``HH:MM[:SS][AM|PM]`` (today)
* ``now[{+|-}N[seconds|minutes|hours|days|weeks]]`` (default unit seconds; singular, plural and
  sacct's abbreviations s, m/min, h, d, w accepted)
* ``today`` / ``midnight`` (00:00 today), ``noon`` (12:00), ``elevenses`` (11:00), ``fika`` (15:00),
  ``teatime`` (16:00), ``tomorrow``, ``yesterday``
* a plain Unix epoch number (``1700000000``), for scripts.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Optional
from zoneinfo import ZoneInfo

_UNITS = {
    "": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip

_NAMED = {"today": 0, "midnight": 0, "noon": 12, "elevenses": 11, "fika": 15, "teatime": 16}

_HELP = (
    "use YYYY-MM-DD[THH:MM[:SS]], MMDD[YY], MM/DD[/YY], HH:MM[:SS], now[-N{minutes,hours,days,weeks}], "
    "today, midnight, noon or an epoch number"
)


def _clock(s: str) -> Optional[tuple[int, int, int]]:
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([AaPp][Mm])?", s)
    if not m:
        return None
    h, mi, se = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    ampm = (m.group(4) or "").lower()
    if ampm:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ampm == "pm" else 0)
    return h, mi, se


def parse_time(s: str, *, now: Optional[float] = None, tz: str = "UTC", field: str = "time") -> float:
    """Parse one sacct time expression to epoch seconds (float).

    Args:
        s: the expression (see module docstring).
        now: the current epoch time, s (default: time.time()); makes the result testable.
        tz: IANA zone the wall-clock forms are in (the site config's ``timezone``).
        field: option name for the error message (``--starttime``).

    Raises:
        ValueError: unrecognised or impossible date/time; the message names ``field``, the value
            and the accepted formats.
    """
    import time as _time

    zone = ZoneInfo(tz)
    now_ts = _time.time() if now is None else float(now)
    now_dt = dt.datetime.fromtimestamp(now_ts, zone)
    today = now_dt.replace(hour=0, minute=0, second=0, microsecond=0)
    text = str(s).strip()
    low = text.lower()

    def bad(why: str = "") -> ValueError:
        return ValueError(f"{field}={s!r} is not a valid time{': ' + why if why else ''}; {_HELP}")

    try:
        if re.fullmatch(r"\d{9,}(\.\d+)?", text):
            return float(text)
        m = re.fullmatch(r"now(?:\s*([+-])\s*(\d+)\s*([a-z]*))?", low)
        if m:
            if not m.group(1):
                return now_ts
            if m.group(3) not in _UNITS:
                raise bad(f"unknown unit {m.group(3)!r}")
            delta = int(m.group(2)) * _UNITS[m.group(3)]
            return now_ts + (delta if m.group(1) == "+" else -delta)
        if low in _NAMED:
            return today.replace(hour=_NAMED[low]).timestamp()
        if low in ("tomorrow", "yesterday"):
            return (today + dt.timedelta(days=1 if low == "tomorrow" else -1)).timestamp()
        clock = _clock(text)
        if clock:
            return today.replace(hour=clock[0], minute=clock[1], second=clock[2]).timestamp()
        m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](.+))?", text)
        if m:
            y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
            rest = m.group(4)
        else:
            m = re.fullmatch(r"(\d{2})[/.]?(\d{2})(?:[/.]?(\d{2}))?(?:-(.+))?", text)
            if not m:
                raise bad()
            mo, d = int(m.group(1)), int(m.group(2))
            y = 2000 + int(m.group(3)) if m.group(3) else now_dt.year
            rest = m.group(4)
        h = mi = se = 0
        if rest:
            c = _clock(rest)
            if not c:
                raise bad(f"bad time of day {rest!r}")
            h, mi, se = c
        return dt.datetime(y, mo, d, h, mi, se, tzinfo=zone).timestamp()
    except ValueError as e:
        if str(e).startswith(f"{field}="):
            raise
        raise bad(str(e)) from None

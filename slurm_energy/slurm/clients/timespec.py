"""sacct's ``-S/--starttime`` and ``-E/--endtime`` -> epoch seconds, by Slurm's own rules.

A port of ``_parse_time()`` in Slurm's ``src/common/parse_time.c`` (SchedMD/slurm commit
284c3b95f0, 2026-08-20; the rules are the same in 22.05, ``slurm-22-05-11-1``, except
``elevenses``, added in 24.05), called as sacct calls it: ``parse_time(optarg, 1)`` for both ``-S``
and ``-E`` (``src/sacct/options.c``), i.e. with ``past`` set. The forms (sacct(1), "Valid time
formats", plus what the parser also takes):

* ``HH:MM[:SS][ ][AM|PM]`` -- with ``past``, always today (even a later hour);
* ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]`` (month and day 1 or 2 digits), each optionally
  followed by ``-HH:MM[:SS]`` (or a blank and the time);
* ``YYYY-MM-DD[THH:MM[:SS]]``, also ``YYYY-MM-DD-HH:MM`` (sacct(1)'s own example
  ``-S2014-07-03-11:40``) and ``YYYY-MM-DD HH:MM``;
* ``today``, ``tomorrow`` (00:00 unless a time is given), ``midnight`` (00:00), ``noon`` (12:00),
  ``elevenses`` (11:00), ``fika`` (15:00), ``teatime`` (16:00), any case, combinable with a date
  (``tomorrow noon``, ``0105 teatime``). (Slurm skips a ``T`` before it looks for these words, so it
  refuses ``Today``; here any case is taken.)
* ``now[{+|-}count[seconds|minutes|hours|days|weeks]]`` (default seconds; singular or plural;
  Slurm knows no abbreviations such as ``h`` or ``min``);
* ``uts<epoch seconds>`` (``uts1700000000``).

The year of a date given without one (the ``past`` rule, parse_time.c): **last year when its
month is after the current month, else this year** -- the month alone decides, so on 3 December
``1215`` is 15 December of this year, and in March ``1215`` is last December. A two-digit year
``YY`` is 20YY (``00`` counts as no year, as in Slurm). Wall-clock times are in the site's time
zone (Slurm uses the host's local time).

Refused (Slurm refuses them too; the message says what to type): anything else, e.g.
``yesterday`` (``now-1days``), ``now-3h`` (``now-3hours``), ``01/05/2024`` (``2024-01-05``),
a bare epoch number (``uts1700000000``). Refused where Slurm would silently roll over
(``mktime``): a day the month does not have (``02/30``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from zoneinfo import ZoneInfo

#: ``_get_delta``'s unit table (parse_time.c ``un[]``), matched case-insensitively as prefixes in this order.
_UNITS = (("seconds", 1), ("second", 1), ("minutes", 60), ("minute", 60), ("hours", 3600), ("hour", 3600),
          ("days", 86400), ("day", 86400), ("weeks", 604800), ("week", 604800))

#: named times of day (parse_time.c): hour
_NAMED = (("midnight", 0), ("noon", 12), ("elevenses", 11), ("fika", 15), ("teatime", 16))

#: What a user may have meant, for the refusal message (Slurm's own forms).
_ABBREV = {"s": "seconds", "sec": "seconds", "secs": "seconds", "m": "minutes", "min": "minutes",
           "mins": "minutes", "h": "hours", "hr": "hours", "hrs": "hours", "d": "days", "w": "weeks",
           "wk": "weeks", "wks": "weeks"}

HELP = ("sacct's formats: HH:MM[:SS][AM|PM], MMDD[YY][-HH:MM[:SS]], MM/DD[/YY][-HH:MM[:SS]], "
        "MM.DD[.YY][-HH:MM[:SS]], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon, elevenses, fika, "
        "teatime, now[{+|-}count[seconds|minutes|hours|days|weeks]] or uts<epoch seconds>")


class _Bad(ValueError):
    pass


def _hint(text: str) -> str:
    """What to type instead of a form Slurm refuses ('' when there is nothing specific to say)."""
    low = text.strip().lower()
    if low == "yesterday":
        return "sacct has no 'yesterday': write now-1days (this time yesterday) or yesterday's date, YYYY-MM-DD"
    m = re.fullmatch(r"now\s*([+-])\s*(\d+)\s*([a-z]+)", low)
    if m and m.group(3) in _ABBREV:
        return (f"Slurm knows no unit {m.group(3)!r}: write now{m.group(1)}{m.group(2)}{_ABBREV[m.group(3)]} "
                "(units: seconds, minutes, hours, days, weeks)")
    if m:
        return f"unknown unit {m.group(3)!r}: use seconds, minutes, hours, days or weeks (e.g. now-2days)"
    m = re.fullmatch(r"(\d{1,2})\s*([ap]m)", low)
    if m:
        return f"a time of day has minutes: write {int(m.group(1))}:00{m.group(2).upper()}"
    if re.fullmatch(r"\d{9,}", low):
        return f"a bare number is not a time to sacct: write uts{low} for epoch seconds"
    m = re.fullmatch(r"(\d{1,2})([/.])(\d{1,2})\2(\d{4})(.*)", low)
    if m:
        return (f"the year in MM/DD/YY has two digits: write {m.group(4)}-{int(m.group(1)):02d}-"
                f"{int(m.group(3)):02d} (YYYY-MM-DD) or {int(m.group(1)):02d}/{int(m.group(3)):02d}/{m.group(4)[2:]}")
    m = re.fullmatch(r"(\d{4})-(\d)-(\d{1,2})(.*)", low)
    if m:
        return f"write the month with two digits: {m.group(1)}-{int(m.group(2)):02d}-{int(m.group(3)):02d}{m.group(4)}"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}t.*", low) and "t" in text and "T" not in text:
        return "write the T between date and time in upper case (YYYY-MM-DDTHH:MM), or a space"
    return ""


def parse_time(s: str, *, now: float | None = None, tz: str = "UTC", field: str = "time") -> float:
    """Parse one sacct time expression to epoch seconds (float), as ``sacct -S``/``-E`` does.

    Args:
        s: the expression (see module docstring).
        now: the current epoch time, s (default: time.time()); makes the result testable.
        tz: IANA zone the wall-clock forms are in (the site config's ``timezone``).
        field: option name for the error message (``--starttime``).

    Raises:
        ValueError: a form Slurm refuses, or a date that does not exist; the message names
            ``field``, the value, what to type instead where one form is likely meant, and the forms.
    """
    import time as _time

    zone = ZoneInfo(tz)
    now_ts = _time.time() if now is None else float(now)
    text = str(s)
    try:
        return _parse(text, now_ts, zone)
    except _Bad as e:
        hint = _hint(text)
        why = "; ".join(x for x in (str(e), hint) if x)
        raise ValueError(f"{field}={s!r} is not a valid time: {why}. {HELP}") from None


def _parse(text: str, now_ts: float, zone: ZoneInfo) -> float:
    """parse_time.c ``_parse_time(time_str, past=1)``; raises _Bad naming what is wrong."""
    if text[:3].lower() == "uts":
        if not re.fullmatch(r"[0-9]+", text[3:]) or int(text[3:]) < 1_000_000:
            raise _Bad("uts needs epoch seconds (1000000 or more) and nothing after them, e.g. uts1700000000")
        return float(int(text[3:]))
    local = dt.datetime.fromtimestamp(now_ts, zone)
    # parse_time.c's fields (-1: not given); "exact": the instant of a "now..." nothing after it changed
    f: dict[str, Any] = {"hour": -1, "minute": -1, "second": 0, "month": -1, "mday": -1, "year": -1, "exact": None}
    pos = 0
    while pos < len(text) and text[pos] != "\n":
        pos = _token(text, text.lower(), pos, f, now_ts, zone)
    if f["hour"] == -1 and f["month"] == -1:
        raise _Bad("no date or time in it")  # Slurm: time 0 (the epoch), silently
    if f["exact"] is not None:
        return float(f["exact"])
    if f["hour"] == -1:  # a date without a time: 00:00
        f.update(hour=0, minute=0)
    elif f["month"] == -1:  # a time without a date: with past, today
        f.update(month=local.month, mday=local.day, year=local.year)
    if f["year"] == -1:  # parse_time.c, past: last year if the month is after this month, else this year
        f["year"] = local.year - 1 if f["month"] > local.month else local.year
    try:
        return dt.datetime(f["year"], f["month"], f["mday"], f["hour"], f["minute"], f["second"],
                           tzinfo=zone).timestamp()
    except ValueError:
        raise _Bad(f"{f['year']:04d}-{f['month']:02d} has no day {f['mday']}") from None


def _token(text: str, low: str, pos: int, f: dict[str, Any], now_ts: float, zone: ZoneInfo) -> int:
    """One step of parse_time.c's loop at ``pos``: sets fields of ``f``; returns the next position."""
    # words first: Slurm skips a 'T' before looking for them, so it refuses "Today" (module docstring)
    for word, days in (("today", 0), ("tomorrow", 1)):
        if low.startswith(word, pos):
            day = dt.datetime.fromtimestamp(now_ts + days * 86400, zone)
            f.update(month=day.month, mday=day.day, year=day.year, exact=None)
            return pos + len(word)
    for word, hour in _NAMED:
        if low.startswith(word, pos):
            f.update(hour=hour, minute=0, second=0, exact=None)
            return pos + len(word)
    if text[pos] in " \t-T":
        return pos + 1
    if low.startswith("now", pos):
        delta, pos = _now_delta(text, low, pos + 3)
        later = dt.datetime.fromtimestamp(now_ts + delta, zone)
        f.update(month=later.month, mday=later.day, year=later.year, hour=later.hour, minute=later.minute,
                 second=later.second, exact=now_ts + delta)
        return pos
    if not _digit(text[pos]):
        raise _Bad(f"unexpected {text[pos:]!r}")
    f["exact"] = None
    if text[pos + 1:pos + 2] == ":" or text[pos + 2:pos + 3] == ":":
        (f["hour"], f["minute"], f["second"]), pos = _get_time(text, low, pos)
        return pos
    (f["month"], f["mday"], yr), pos = _get_date(text, pos)
    if yr is not None:
        f["year"] = yr
    return pos


def _now_delta(text: str, low: str, i: int) -> tuple[int, int]:
    """After ``now``: ``({+|-}count[unit])`` -> (seconds, position after it); parse_time.c ``_get_delta``."""
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    if i >= n or text[i] == "\n":
        return 0, i
    if text[i] not in "+-":
        raise _Bad(f"after 'now' comes +count or -count, not {text[i:]!r}")
    sign = -1 if text[i] == "-" else 1
    i += 1
    count, digits, mult = 0, 0, 1
    while i < n and text[i] != "\n":
        if text[i].isspace():
            i += 1
            continue
        unit = next(((u, m) for u, m in _UNITS if low.startswith(u, i)), None)
        if unit:
            i += len(unit[0])
            mult = unit[1]
            break
        if _digit(text[i]):
            count, digits = count * 10 + int(text[i]), digits + 1
            i += 1
            continue
        raise _Bad(f"bad count or unit {text[i:]!r} after 'now'")
    if not digits:
        raise _Bad("no count after now+/now-")
    return sign * count * mult, i


def _get_time(text: str, low: str, pos: int) -> tuple[tuple[int, int, int], int]:
    """``HH:MM[:SS][ ][AM|PM]`` at ``pos`` (parse_time.c ``_get_time``) -> ((h, m, s), next position)."""
    m = re.compile(r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?").match(text, pos)
    if not m:
        raise _Bad(f"bad time of day {text[pos:]!r}: write HH:MM or HH:MM:SS")
    hr, mi, se = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if hr > 23 or mi > 59 or se > 59:
        raise _Bad(f"no time of day {m.group(0)!r} (hours 0-23, minutes and seconds 0-59)")
    i = m.end()
    j = i
    while j < len(text) and text[j].isspace():
        j += 1
    if low.startswith("pm", j):
        hr += 12
        if hr > 23:
            if hr != 24:
                raise _Bad(f"no time {text[pos:j + 2]!r}: with PM the hour is 1-12")
            hr = 12
        i = j + 2
    elif low.startswith("am", j):
        if hr > 11:
            if hr != 12:
                raise _Bad(f"no time {text[pos:j + 2]!r}: with AM the hour is 1-12")
            hr = 0
        i = j + 2
    return (hr, mi, se), i


def _get_date(text: str, pos: int) -> tuple[tuple[int, int, int | None], int]:
    """parse_time.c ``_get_date``: ``YYYY-MM-DD`` (a '-' 4 and 7 characters on), else
    ``M[M][./]D[D][./][YY]``, each number read greedily as Slurm does (``15`` is month 15, refused;
    not month 1 day 5). Returns ((month 1-12, day, year or None), next position)."""
    if len(text) >= pos + 7 and text[pos + 4:pos + 5] == "-" and text[pos + 7:pos + 8] == "-":
        m = re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})").match(text, pos)
        if not m:
            raise _Bad(f"bad date {text[pos:]!r}: write YYYY-MM-DD")
        yr, mon, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if not 1 <= mon <= 12 or not 1 <= day <= 31:
            raise _Bad(f"no date {m.group(0)!r} (month 01-12, day 01-31)")
        return (mon, day, yr), m.end()
    i, n = pos, len(text)

    def number(what: str) -> int:
        nonlocal i
        if i >= n or not _digit(text[i]):
            raise _Bad(f"bad date {text[pos:]!r}: no {what} where {text[i:] or 'the end'!r} is; "
                       "write MMDD[YY], MM/DD[/YY], MM.DD[.YY] or YYYY-MM-DD")
        v = int(text[i])
        i += 1
        if i < n and _digit(text[i]):
            v, i = v * 10 + int(text[i]), i + 1
        return v

    mon = number("month")
    if not 1 <= mon <= 12:
        raise _Bad(f"no month {mon} in {text[pos:]!r} (months are 01-12; a full date is YYYY-MM-DD)")
    if i < n and text[i] in "./":
        i += 1
    day = number("day")
    if not 1 <= day <= 31:
        raise _Bad(f"no day {day} in {text[pos:]!r} (days are 01-31)")
    if i < n and text[i] in "./":
        i += 1
    yy = 0
    if i < n and _digit(text[i]):
        if i + 1 >= n or not _digit(text[i + 1]):
            raise _Bad(f"the year in {text[pos:]!r} has one digit: YY has two (a full date is YYYY-MM-DD)")
        yy, i = int(text[i:i + 2]), i + 2
    return (mon, day, 2000 + yy if yy else None), i


def _digit(c: str) -> bool:
    return c in "0123456789"

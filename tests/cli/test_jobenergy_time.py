import datetime as dt

import pytest

from slurm_energy.slurm.timespec import parse_time

# 2024-03-15 10:30:00 UTC
NOW = dt.datetime(2024, 3, 15, 10, 30, tzinfo=dt.timezone.utc).timestamp()


def utc(*a):
    return dt.datetime(*a, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize(
    "text, expect",
    [
        ("2024-01-02", utc(2024, 1, 2)),
        ("2024-01-02T03:04", utc(2024, 1, 2, 3, 4)),
        ("2024-01-02T03:04:05", utc(2024, 1, 2, 3, 4, 5)),
        ("0102", utc(2024, 1, 2)),  # MMDD, current year
        ("010223", utc(2023, 1, 2)),  # MMDDYY
        ("01/02/23-13:00", utc(2023, 1, 2, 13)),
        ("14:00", utc(2024, 3, 15, 14)),  # today
        ("2:00PM", utc(2024, 3, 15, 14)),
        ("midnight", utc(2024, 3, 15)),
        ("today", utc(2024, 3, 15)),
        ("noon", utc(2024, 3, 15, 12)),
        ("teatime", utc(2024, 3, 15, 16)),
        ("yesterday", utc(2024, 3, 14)),
        ("now", NOW),
        ("now-2days", NOW - 2 * 86400),  # 2 x 86400 s
        ("now-3hours", NOW - 3 * 3600),
        ("now-90", NOW - 90),  # seconds by default
        ("now+1week", NOW + 604800),
        ("1700000000", 1700000000.0),
    ],
)
def test_formats_utc(text, expect):
    assert parse_time(text, now=NOW, tz="UTC") == expect


def test_site_timezone():
    # midnight in Paris on 2024-03-15 (UTC+1 in March before DST) = 2024-03-14 23:00 UTC
    assert parse_time("2024-03-15", now=NOW, tz="Europe/Paris") == utc(2024, 3, 14, 23)


@pytest.mark.parametrize("bad", ["yesterdayish", "2024-13-01", "now-3fortnights", "25:00", "2024-01-02T9"])
def test_bad_times_name_field_and_formats(bad):
    with pytest.raises(ValueError) as ei:
        parse_time(bad, now=NOW, field="--starttime")
    msg = str(ei.value)
    assert msg.startswith(f"--starttime={bad!r}") and "YYYY-MM-DD" in msg

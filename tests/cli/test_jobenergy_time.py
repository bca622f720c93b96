"""``-S``/``-E`` times, as sacct reads them: cases restated from Slurm's own source.

Source: SchedMD/slurm ``src/common/parse_time.c`` ``_parse_time()`` / ``_get_date()`` /
``_get_time()`` / ``_get_delta()`` at commit 284c3b95f0 (2026-08-20; same rules in
slurm-22-05-11-1 but ``elevenses``, new in 24.05), called by ``src/sacct/options.c`` as
``parse_time(optarg, 1)`` (``past`` set) for both ``-S`` and ``-E``; the forms listed in
``doc/man/man1/sacct.1`` "Valid time formats" and its example ``-S2014-07-03-11:40 -E2014-07-03-12:00``.
Slurm's unit test ``testsuite/slurm_unit/common/parse_time-test.c`` covers only ``time_str2secs``
(durations), not these forms, so each case's expected value is worked out from the C code by hand.
"""

import datetime as dt

import pytest

from slurm_energy.slurm.clients.timespec import parse_time

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 12, 3, 10, 30, tzinfo=UTC).timestamp()  # Thursday 3 December 2026, 10:30 UTC
MARCH = dt.datetime(2026, 3, 15, 10, 30, tzinfo=UTC).timestamp()


def utc(*a):
    return dt.datetime(*a, tzinfo=UTC).timestamp()


# (text, now, expected): every form sacct.1 lists, and the combinations the parser's loop allows
CASES = [
    # HH:MM[:SS][AM|PM]: a time without a date is today with past=1, even later than now
    ("14:00", NOW, utc(2026, 12, 3, 14)),
    ("09:15:30", NOW, utc(2026, 12, 3, 9, 15, 30)),
    ("23:00", NOW, utc(2026, 12, 3, 23)),
    ("2:00PM", NOW, utc(2026, 12, 3, 14)),
    ("2:00 pm", NOW, utc(2026, 12, 3, 14)),  # _get_time skips blanks before AM/PM, any case
    ("12:30AM", NOW, utc(2026, 12, 3, 0, 30)),  # 12 AM is 0 h
    ("12:30PM", NOW, utc(2026, 12, 3, 12, 30)),  # 12 PM is 12 h (hr + 12 == 24 -> 12)
    # MMDD[YY]: month and day read greedily, 1 or 2 digits each
    ("1105", NOW, utc(2026, 11, 5)),
    ("0105", NOW, utc(2026, 1, 5)),
    ("125", NOW, utc(2026, 12, 5)),  # month 12, day 5
    ("010524", NOW, utc(2024, 1, 5)),  # YY + 100 years from 1900
    ("010500", NOW, utc(2026, 1, 5)),  # YY 00 counts as no year in Slurm (if (yr) ...)
    ("0105-14:30", NOW, utc(2026, 1, 5, 14, 30)),
    ("0105 teatime", NOW, utc(2026, 1, 5, 16)),
    # MM/DD[/YY] and MM.DD[.YY]
    ("11/05", NOW, utc(2026, 11, 5)),
    ("1/5", NOW, utc(2026, 1, 5)),
    ("11/05/25", NOW, utc(2025, 11, 5)),
    ("11/05/25-08:00:01", NOW, utc(2025, 11, 5, 8, 0, 1)),
    ("11.05", NOW, utc(2026, 11, 5)),
    ("11.05.25-08:00", NOW, utc(2025, 11, 5, 8)),
    # YYYY-MM-DD[THH:MM[:SS]]; '-' and ' ' also separate date and time (sacct.1's example)
    ("2014-07-03", NOW, utc(2014, 7, 3)),
    ("2014-07-03T11:40", NOW, utc(2014, 7, 3, 11, 40)),
    ("2014-07-03T11:40:59", NOW, utc(2014, 7, 3, 11, 40, 59)),
    ("2014-07-03-11:40", NOW, utc(2014, 7, 3, 11, 40)),
    ("2014-07-03-12:00", NOW, utc(2014, 7, 3, 12)),
    ("2014-07-03 11:40", NOW, utc(2014, 7, 3, 11, 40)),
    ("2014-07-3", NOW, utc(2014, 7, 3)),  # the day may have one digit (the month's place is fixed)
    ("2024-02-29", NOW, utc(2024, 2, 29)),
    # named times and days, any case
    ("today", NOW, utc(2026, 12, 3)),
    ("TODAY", NOW, utc(2026, 12, 3)),
    ("midnight", NOW, utc(2026, 12, 3)),
    ("noon", NOW, utc(2026, 12, 3, 12)),
    ("elevenses", NOW, utc(2026, 12, 3, 11)),
    ("fika", NOW, utc(2026, 12, 3, 15)),
    ("teatime", NOW, utc(2026, 12, 3, 16)),
    ("Teatime", NOW, utc(2026, 12, 3, 16)),
    ("tomorrow", NOW, utc(2026, 12, 4)),
    ("tomorrow noon", NOW, utc(2026, 12, 4, 12)),
    ("today 14:00", NOW, utc(2026, 12, 3, 14)),
    # now[{+|-}count[seconds|minutes|hours|days|weeks]]: seconds by default, blanks allowed
    ("now", NOW, NOW),
    ("now-90", NOW, NOW - 90),
    ("now-2days", NOW - 0, NOW - 2 * 86400),
    ("now-1day", NOW, NOW - 86400),
    ("now-3hours", NOW, NOW - 3 * 3600),
    ("now-45minutes", NOW, NOW - 45 * 60),
    ("now+1week", NOW, NOW + 604800),
    ("now - 2 weeks", NOW, NOW - 2 * 604800),
    ("NOW-1HOUR", NOW, NOW - 3600),
    ("now-1days noon", NOW, utc(2026, 12, 2, 12)),  # the loop goes on after the unit
    # uts<epoch>: parse_time.c's first test
    ("uts1700000000", NOW, 1_700_000_000.0),
]


@pytest.mark.parametrize("text, now, expect", CASES)
def test_sacct_forms(text, now, expect):
    assert parse_time(text, now=now, tz="UTC") == expect


# A date without a year (parse_time.c, past=1): "if (month > time_now_tm.tm_mon) last year, else
# this year" -- the month alone decides, whatever the day
@pytest.mark.parametrize("text, now, year", [
    ("1215", MARCH, 2025), ("12/15", MARCH, 2025), ("12.15", MARCH, 2025), ("12/15-10:00", MARCH, 2025),
    ("0401", MARCH, 2025),  # April after March: last year
    ("0331", MARCH, 2026),  # the same month, a later day: this year (still in the future, as in sacct)
    ("0314", MARCH, 2026), ("0101", MARCH, 2026),
    ("1215", NOW, 2026),  # on 3 December, 15 December: the same month -> this year
    ("1130", NOW, 2026),
])
def test_yearless_date_goes_to_the_past_year_by_month(text, now, year):
    assert dt.datetime.fromtimestamp(parse_time(text, now=now), UTC).year == year


def test_site_timezone():
    # midnight in Paris on 2024-03-15 (UTC+1 in March before DST) = 2024-03-14 23:00 UTC
    assert parse_time("2024-03-15", now=NOW, tz="Europe/Paris") == utc(2024, 3, 14, 23)
    # "today" is Paris's day: at 2026-12-03 23:30 UTC it is already 4 December there
    late = utc(2026, 12, 3, 23, 30)
    assert parse_time("today", now=late, tz="Europe/Paris") == utc(2026, 12, 3, 23)


# Forms Slurm refuses (parse_time.c returns ESLURM_INVALID_TIME_VALUE; sacct exits 1): refused,
# with what to type instead
@pytest.mark.parametrize("bad, fix", [
    ("yesterday", "now-1days"),
    ("now-3h", "now-3hours"),
    ("now+10min", "now+10minutes"),
    ("now-2d", "now-2days"),
    ("now-3fortnights", "seconds, minutes, hours, days or weeks"),
    ("1700000000", "uts1700000000"),
    ("01/05/2024", "2024-01-05"),
    ("2014-7-3", "2014-07-03"),
    ("2024-01-02t03:04", "upper case"),
    ("12pm", "12:00PM"),
    ("13:00PM", "1-12"),
    ("15", "months are 01-12"),  # month 15: Slurm reads two digits, it does not try month 1 day 5
    ("25:00", "hours 0-23"),
    ("2024-13-01", "month 01-12"),
    ("0132", "days are 01-31"),
    ("02/30", "no day 30"),  # Slurm's mktime would roll it to 2 March: refused here
    ("01051", "has one digit"),  # MMDDY: YY has two digits
    ("last tuesday", ""),
    ("", "no date or time"),
    ("now noon", "+count or -count"),
])
def test_refused_forms_name_the_field_and_what_to_type(bad, fix):
    with pytest.raises(ValueError) as ei:
        parse_time(bad, now=NOW, field="--starttime")
    msg = str(ei.value)
    assert msg.startswith(f"--starttime={bad!r} is not a valid time: ") and fix in msg
    assert "YYYY-MM-DD[THH:MM[:SS]]" in msg and "now[{+|-}count[seconds|minutes|hours|days|weeks]]" in msg


def test_sacct_man_page_example_selects_the_window(tmp_path, site_config, monkeypatch, capsys):
    # sacct.1: "sacct -S2014-07-03-11:40 -E2014-07-03-12:00 -X": jobs running between 11:40 and 12:00
    from slurm_energy.cli.jobenergy import main
    from tests.helpers.jobrecord_factory import finished, node_record, store_with

    site_config.write(bare=True, cluster_name="c1", timezone="UTC")
    t = utc(2014, 7, 3, 11, 0)
    url = store_with(tmp_path,
                     finished(node_record(job_id="2", start=t, end=t + 3541)),  # 11:00-11:59:01
                     finished(node_record(job_id="5", start=t + 3700, end=t + 4000)),  # 12:01:40-: after
                     finished(node_record(job_id="1", start=t - 7200, end=t - 60)))  # ended 10:59: before
    assert main(["--store", url, "-S2014-07-03-11:40", "-E2014-07-03-12:00", "-P", "-n", "-o", "JobID"]) == 0
    assert capsys.readouterr().out.split() == ["2"]

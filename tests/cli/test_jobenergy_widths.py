"""jobenergy's aligned table: one long free-text value (Errors, ReportError) no longer widens every
row (cut to 40 characters, '…' last); sacct's ``Field%N`` sets a column's width ('+' marks a cut
value, %-N left-justifies); -p/-P/--json keep the full text."""

import json

import pytest

from slurm_energy.cli import jobenergy_format as F
from slurm_energy.cli.jobenergy import main
from slurm_energy.cli.table import render
from tests.helpers.jobrecord_factory import finished, node_record, store_with

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
LONG = ("/home/alice/run not written as alice: [Errno 13] Permission denied: '/home/alice/run/energy-1.html'; "
        "fix: make the directory writable")  # 133 characters


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    return store_with(tmp_path,
                      finished(node_record(job_id="1", start=T0, end=T0 + 60, report_error=LONG)),
                      finished(node_record(job_id="2", start=T0, end=T0 + 60)))


def _out(capsys, url, *argv):
    assert main(["--store", url, "-S", "2023-11-14", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_long_report_error_is_cut_to_40_characters_in_the_aligned_table(url, capsys):
    assert len(LONG) == 133
    lines = _out(capsys, url, "-o", "JobID,ReportError")
    # JobID is 5 wide (its header), ReportError 40: 39 characters of the text and '…'
    assert lines == ["JobID                              ReportError",
                     "----- ----------------------------------------",
                     "    1 " + LONG[:39] + "…",
                     "    2 " + " " * 40]


def test_parsable_and_json_keep_the_full_text(url, capsys):
    assert _out(capsys, url, "-P", "-n", "-o", "JobID,ReportError") == [f"1|{LONG}", "2|"]
    assert _out(capsys, url, "-p", "-n", "-o", "JobID,ReportError%20") == [f"1|{LONG}|", "2||"]
    assert main(["--store", url, "--json", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["record"]["report_error"] == LONG


def test_sacct_width_suffix_sets_the_column_width(url, capsys):
    # %12: exactly 12 characters, right-justified, the header too; a longer value keeps 11 and '+'
    lines = _out(capsys, url, "-o", "JobID%3,ReportError%12")
    assert lines == ["Job  ReportError",
                     "--- ------------",
                     "  1 " + LONG[:11] + "+",
                     "  2 " + " " * 12]
    # %-N: left-justified; a width wider than the text pads it (ReportError %60 shows 59 + '+')
    lines = _out(capsys, url, "-o", "JobID%-6,ReportError%-60")
    assert lines[0] == "JobID  " + "ReportError".ljust(60)
    assert lines[2] == "1      " + LONG[:59] + "+"
    assert lines[3] == "2      " + " " * 60


@pytest.mark.parametrize("spec", ["JobID%abc", "JobID%0", "JobID%-", "ReportError%1.5"])
def test_bad_width_names_the_field_and_the_fix(spec):
    with pytest.raises(ValueError) as e:
        F.parse_format(spec)
    assert str(e.value).startswith(f"--format: bad width in {spec!r}: write ")
    assert "%N with N a width in characters (1-9999; %-N left-justifies)" in str(e.value)


def test_short_free_text_is_not_padded_to_the_cap():
    # 'disk full' is 9 characters: the column is as wide as its header (ReportError, 11), not 40
    text = render([["1", "disk full"]], ["JobID", "ReportError"], caps=[None, F.TEXT_CAP])
    assert text.splitlines()[2] == "    1   disk full"

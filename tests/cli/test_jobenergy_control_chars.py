"""A job name is the user's text: in jobenergy's tables (aligned, -p/-P, -l's notes) a newline,
an ANSI escape sequence or a carriage return is shown escaped, never passed to the reader's
terminal or let forge a row (issue 22, kind 1: text shown safely)."""

import pytest

from slurm_energy.cli.jobenergy import main
from slurm_energy.cli.table import render, render_with_notes
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record

HOSTILE = "ok\n4242|alice|COMPLETED\x1b[2J\x1b]0;pwned\x07\rx"
SHOWN = r"ok\n4242|alice|COMPLETED\x1b[2J\x1b]0;pwned\x07\rx"  # repr-style escapes, one line


def test_cells_headers_and_notes_are_one_line_each():
    out = render([["1", HOSTILE]], ["JobID", "JobName"])
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    _header, _rule, row = out.split("\n")  # exactly one row: the name's newline forged none
    assert row.endswith(SHOWN)
    assert render([["1", HOSTILE]], ["JobID", "JobName"], parsable="P") == f"JobID|JobName\n1|{SHOWN}"
    noted = render_with_notes([["1", "x"]], ["JobID", "V"], [HOSTILE], line_width=120)
    assert "\x1b" not in noted and noted.count("\n") == 3  # header, rule, row, one note line


@pytest.mark.parametrize("fmt", [[], ["-P"], ["-p"]])
def test_jobenergy_prints_a_hostile_job_name_escaped(tmp_path, capsys, monkeypatch, fmt):
    (tmp_path / "site.yaml").write_text("cluster_name: c1\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(tmp_path / "site.yaml"))
    url = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(url)
    s.put(finished(node_record(job_id="777", start=1.7e9, end=1.7e9 + 60, job_name=HOSTILE)))
    s.close()
    rc = main(["--store", url, "-S", "2000-01-01", "-o", "JobID,JobName%80", *fmt])
    out = capsys.readouterr().out
    assert rc == 0
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    rows = [ln for ln in out.splitlines() if ln.strip()]
    # one header (+ the aligned table's rule) and exactly one job row, which shows the name escaped
    assert len(rows) == (2 if fmt else 3), out
    assert SHOWN in rows[-1]


def test_allusers_is_accepted_as_sacct_takes_it(tmp_path, capsys, monkeypatch):
    """sacct's -a/--allusers: root (this test's uid) and the admins see every user's jobs with or
    without it; it is accepted, not refused as an unknown option."""
    (tmp_path / "site.yaml").write_text("cluster_name: c1\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(tmp_path / "site.yaml"))
    monkeypatch.delenv("SUDO_USER", raising=False)
    monkeypatch.delenv("SUDO_UID", raising=False)
    url = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(url)
    for jid, user in (("801", "alice"), ("802", "bob")):
        s.put(finished(node_record(job_id=jid, start=1.7e9, end=1.7e9 + 60, user=user)))
    s.close()
    outs = []
    for extra in ([], ["-a"], ["--allusers"]):
        assert main(["--store", url, "-S", "2000-01-01", "-n", "-P", "-o", "JobID,User", *extra]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0].splitlines() == ["801|alice", "802|bob"]
    assert outs[1] == outs[2] == outs[0]

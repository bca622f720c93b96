"""Issue 28 for ``slurm-energy run`` and ``attach``, as an ordinary user: a non-zero exit or a
signal makes the record partial and says so; ``--label`` names the report and an existing one is
never overwritten without ``--overwrite``; carbon facts as flags; a command using ``track()``
inside ``run`` gives one report with its phases."""

from __future__ import annotations

import csv
import io
import signal
import subprocess
import time

from tests.helpers import ordinary_user as ou

RUN = [ou.PY, "-m", "slurm_energy.cli.main", "run", "--interval", "0.1"]


def _rows(d, label):
    return list(csv.DictReader(io.StringIO((d / f"energy-{label}.csv").read_text())))


def test_non_zero_exit_is_on_the_record(home):
    r = ou.run(RUN + ["--label", "fails", "--", ou.PY, "-c", "import sys; sum(range(10**6)); sys.exit(3)"], home)
    assert r.returncode == 3, r.stderr
    assert {row["status"] for row in _rows(home, "fails")} == {"partial"}
    html = (home / "energy-fails.html").read_text()
    assert "run ended with exit code 3: the command exited with status 3; measured from its start to its end" in html
    assert "ended early" not in html and "exit code 3" in html
    assert "run ended with exit code 3: the command exited with status 3" in r.stdout
    assert "status partial" in r.stdout
    assert list((home / "tmp").glob("slurm-energy-*")) == []


def test_sigterm_to_run_is_on_the_record(home):
    p = ou.popen(RUN + ["--label", "term", "--", ou.PY, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                 home)
    try:
        assert p.stdout.readline().strip() == "up"
        p.send_signal(signal.SIGTERM)  # run passes it on to the command, then writes the record
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + 15, err
    html = (home / "energy-term.html").read_text()
    assert "the command was stopped by SIGTERM" in html and "exit code 0:15" in html
    assert "Slurm state</th><td>CANCELLED" in html


def test_sigterm_to_attach_is_on_the_record(home):
    target = subprocess.Popen(ou.as_user([ou.PY, "-c", "import time; time.sleep(60)"]), env=ou.user_env(home))
    try:
        p = ou.popen([ou.PY, "-m", "slurm_energy.cli.main", "attach", "--interval", "0.1", "--label", "att",
                      str(target.pid)], home)
        time.sleep(3)  # set-up (imports, readers), then sampling
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
    finally:
        target.kill()
        target.wait()
    assert p.returncode == 0, err
    html = (home / "energy-att.html").read_text()
    assert f"attach was stopped by SIGTERM while process {target.pid} still ran" in html
    assert {row["status"] for row in _rows(home, "att")} == {"partial"}


def test_label_is_never_overwritten_without_asking(home):
    r = ou.run(RUN + ["--label", "mine", "--", "true"], home)
    assert r.returncode == 0 and (home / "energy-mine.html").exists()
    first = (home / "energy-mine.html").read_text()
    marker = home / "ran"
    r = ou.run(RUN + ["--label", "mine", "--", "touch", str(marker)], home)
    assert r.returncode == 2 and "energy-mine.html exists" in r.stderr and "--overwrite" in r.stderr
    assert not marker.exists()  # refused before the command ran
    assert (home / "energy-mine.html").read_text() == first
    r = ou.run(RUN + ["--label", "mine", "--overwrite", "--", "touch", str(marker)], home)
    assert r.returncode == 0 and marker.exists() and (home / "energy-mine.html").read_text() != first


def test_carbon_flags_override_and_the_defaults_are_said(home):
    r = ou.run(RUN + ["--label", "fr", "--pue", "1.0", "--country", "FR", "--", "true"], home)
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in _rows(home, "fr") if x["device_class"] == "total"]
    assert row["pue"] == "1" and row["pue_default"] == "false" and row["ci_default"] == "false"
    assert "DEFAULT" not in r.stderr
    r = ou.run(RUN + ["--label", "dflt", "--", "true"], home)
    assert "PUE 1.58 is the DEFAULT datacenter industry average" in r.stderr and "give --pue 1.0" in r.stderr
    r = ou.run(RUN + ["--label", "bad", "--pue", "0.5", "--", "true"], home)
    assert r.returncode == 2 and "slurm-energy run: pue=0.5:" in r.stderr  # the value given, named


def test_track_inside_run_defers_to_it(home):
    script = ou.write(home, "s.py", "from slurm_energy import track\nwith track(label='inner') as t:\n"
                                    "    with t.phase('work'):\n        sum(range(10**6))\n    print(t.result().source)\n")
    r = ou.run(RUN + ["--label", "outer", "--", ou.PY, str(script)], home)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in home.glob("energy-*.html")) == ["energy-outer.html"]
    assert "slurm-energy run" in r.stdout  # t.result().source: run measures it
    assert ",phase,work," in (home / "energy-outer.phases.csv").read_text()

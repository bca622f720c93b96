"""jobenergy -l: the aligned table's Covers column leaves out what DeviceID/Model/Method show and is
wrapped to the terminal; -p/-P and --json keep the full text."""

import json

from slurm_energy.cli.jobenergy import main
from slurm_energy.cli.table import render
from slurm_energy.model import Method
from tests.helpers.jobrecord_factory import device, finished, job_record, store_with

T0 = 1_700_000_000.0
CPU_COVERS = ("rapl:intel-rapl:0 (Xeon 6248); counter; job share by cgroup CPU time / node busy CPU time")


def test_render_wraps_the_last_column_under_itself():
    rows = [["1", "aa", "one two three four five six"], ["22", "b", ""]]
    text = render(rows, ["ID", "Name", "Covers"], wrap_to=20)
    # ID 2 + Name 4 + 2 spaces = 8 before Covers; 20 - 8 = 12 < MIN_WRAP 40 -> 40, but the widest
    # text is 27 characters: the column is 27 wide and nothing wraps
    assert text.splitlines() == ["ID Name Covers", "-- ---- ---------------------------",
                                 " 1   aa one two three four five six", "22    b"]
    text = render(rows, ["ID", "Name", "Covers"], wrap_to=20 + 40)  # 52 left: still one line
    assert text.splitlines()[2] == " 1   aa one two three four five six"
    long = [["1", "aa", "word " * 12 + "end"]]  # 63 characters
    lines = render(long, ["ID", "Name", "Covers"], wrap_to=48).splitlines()  # 48 - 8 = 40 -> MIN_WRAP 40
    assert lines[1] == "-- ---- " + "-" * 40
    assert lines[2:] == [" 1   aa " + "word " * 7 + "word", " " * 8 + "word " * 4 + "end"]
    assert all(len(ln) <= 48 for ln in lines)


def test_render_parsable_ignores_wrap():
    assert render([["1", "a b c"]], ["ID", "Covers"], parsable="P", wrap_to=5) == "ID|Covers\n1|a b c"


def _url(tmp_path, site_config):
    site_config.write(bare=True, cluster_name="c1")
    cpu = device("cpu", 3.6e6, method=Method.COUNTER, device_id="rapl:intel-rapl:0", model="Xeon 6248",
                 covers=CPU_COVERS, flags=["wrap"])
    return store_with(tmp_path, finished(job_record("5", [cpu], start=T0, end=T0 + 3600)))


def test_long_aligned_note_is_short_and_wrapped(tmp_path, site_config, monkeypatch, capsys):
    url = _url(tmp_path, site_config)
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["--store", url, "-l", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["JobID", "Node", "Class", "Count", "Method", "Energy_kWh", "Device_kWh", "Coverage",
                                "ReqMem", "MaxRSS"]
    assert lines[2].split() == ["5", "n1", "cpu", "1", "counter", "1", "n/a", "1.000"]  # 3.6e6 J = 1 kWh
    # the note: DeviceID (Model), then Covers without them and without the Method ("counter"),
    # indented under Node (JobID is 5 wide + 1) and wrapped to 60 columns (54 characters of text)
    note = lines[3:]
    assert len(note) == 2 and all(ln.startswith(" " * 6) and len(ln) <= 60 for ln in note)
    assert " ".join(ln.strip() for ln in note) == ("rapl:intel-rapl:0 (Xeon 6248): job share by cgroup CPU time / "
                                                   "node busy CPU time [wrap]")


def test_long_with_format_picks_long_fields(tmp_path, site_config, monkeypatch, capsys):
    url = _url(tmp_path, site_config)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--store", url, "-l", "-P", "-o", "jobid,DeviceID,covers", "5"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "JobID|DeviceID|Covers", f"5|rapl:intel-rapl:0|{CPU_COVERS} [wrap]"]
    assert main(["--store", url, "-l", "-o", "JobID,Model%-12,Wraps", "5"]) == 0
    assert capsys.readouterr().out.splitlines() == ["JobID Model        Wraps", "----- ------------ -----",
                                                    "    5 Xeon 6248        0"]
    # aligned with -o: Covers whole (no note names the device), the last column wrapped to the terminal
    assert main(["--store", url, "-l", "-o", "JobID,Covers", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "JobID Covers" and " ".join(ln.strip() for ln in lines[2:]) == f"5 {CPU_COVERS} [wrap]"
    assert main(["--store", url, "-l", "-o", "JobID,CPU_kWh", "5"]) == 2  # a table field, not a -l one
    assert "--format with --long: unknown field 'CPU_kWh'; valid fields: JobID, Node, Class" in capsys.readouterr().err


def test_long_parsable_and_json_keep_the_full_covers(tmp_path, site_config, monkeypatch, capsys):
    url = _url(tmp_path, site_config)
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["--store", url, "-l", "-P", "-n", "5"]) == 0
    assert capsys.readouterr().out.strip().split("|")[-1] == CPU_COVERS + " [wrap]"
    assert main(["--store", url, "--json", "5"]) == 0
    rec = json.loads(capsys.readouterr().out)["jobs"][0]["record"]
    assert rec["nodes"][0]["devices"][0]["covers"] == CPU_COVERS

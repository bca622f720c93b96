import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from slurm_energy.cli import jobenergy as je
from slurm_energy.cli.jobenergy import build_parser, main
from slurm_energy.cli.jobenergy_select import job_state, parse_states, state_matches
from slurm_energy.model import Status
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record, run_jobenergy

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.fixture
def url(tmp_path, site_config, monkeypatch):
    site_config.write(bare=True, cluster_name="c1")
    u = f"sqlite:///{tmp_path}/spool/jobs.db"
    s = open_store(u)
    # job 100: 1 node, cpu 3.6e6 J (1 kWh), ram 3.6e5 J (0.1 kWh), 1 h
    s.put(finished(node_record(job_id="100", start=T0, end=T0 + 3600, exit_code="0:0", job_state="COMPLETED")))
    # job 200: 2 nodes, each cpu 7.2e6 J (2 kWh), ram unmeasured, gpu 1.8e6 J (0.5 kWh)
    two = node_record(job_id="200", node="n1", start=T0, end=T0 + 7200, cpu_j=7.2e6, ram_j=None, gpu_j=1.8e6,
                      user="bob", account="chem", expected=("n1", "n2"))
    two.nodes += node_record(job_id="200", node="n2", start=T0, end=T0 + 7200, cpu_j=7.2e6, ram_j=None,
                             gpu_j=1.8e6).nodes
    s.put(finished(two))
    # job 300 requeued: attempt 0 cpu 3.6e6 J, attempt 1 cpu 7.2e6 J (ram 3.6e5 each)
    s.put(finished(node_record(job_id="300", start=T0, end=T0 + 600, restart_count=0)))
    s.put(finished(node_record(job_id="300", start=T0 + 1000, end=T0 + 1600, restart_count=1, cpu_j=7.2e6)))
    # array 400 task 3 (raw id 403)
    s.put(finished(node_record(job_id="403", array_job_id="400", array_task_id="3", start=T0, end=T0 + 60)))
    s.close()
    return u


run = run_jobenergy


def parsed(out):
    lines = out.strip().splitlines()
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"))) for ln in lines[1:]]


def test_default_columns_and_values(url, capsys):
    rc, out, err = run(capsys, "--store", url, "-P", "100")
    assert rc == 0, err
    [row] = parsed(out)
    assert list(row) == ["JobID", "User", "Elapsed", "CPU_kWh", "GPU_kWh", "RAM_kWh", "kgCO2e", "State", "Status"]
    rc, out, err = run(capsys, "--store", url, "-P", "-o", "JobID,NNodes,Facility_kWh", "100")
    [more] = parsed(out)
    row.update(more)
    # cpu 3.6e6 J / 3.6e6 = 1 kWh; ram 0.1 kWh; no GPU -> "-"; facility (1.1 kWh x PUE 1.5) = 1.65;
    # CO2e 1.65 kWh x 400 g/kWh = 660 g = 0.66 kg; elapsed 3600 s
    assert row["CPU_kWh"] == "1" and row["RAM_kWh"] == "0.1" and row["GPU_kWh"] == "-"
    assert row["Facility_kWh"] == "1.65" and row["kgCO2e"] == "0.66"
    # cpu and ram both by the TDP model (the factory's node_record): every class estimated
    assert row["Elapsed"] == "01:00:00" and row["NNodes"] == "1" and row["Status"] == "complete(estimated)"
    assert row["State"] == "COMPLETED"  # exit code 0:0


def test_multinode_sums_and_unmeasured_is_na(url, capsys):
    _rc, out, _ = run(capsys, "--store", url, "-P", "-o", "JobID,CPU_kWh,GPU_kWh,RAM_kWh,Facility_kWh,NNodes", "-j", "200")
    [row] = parsed(out)
    # cpu 2 nodes x 7.2e6 J = 1.44e7 J = 4 kWh; gpu 2 x 1.8e6 = 3.6e6 J = 1 kWh; ram unmeasured -> n/a
    assert row["CPU_kWh"] == "4" and row["GPU_kWh"] == "1" and row["RAM_kWh"] == "n/a"
    # facility (4 + 1) x 1.5 = 7.5 kWh
    assert row["Facility_kWh"] == "7.5" and row["NNodes"] == "2"


def test_requeued_shows_sum_and_each_attempt(url, capsys):
    _rc, out, _ = run(capsys, "--store", url, "-P", "-o", "JobID,CPU_kWh,Elapsed", "300")
    rows = parsed(out)
    # sum: 1 + 2 = 3 kWh CPU, elapsed 600 + 600 s = 00:20:00
    assert rows == [
        {"JobID": "300", "CPU_kWh": "3", "Elapsed": "00:20:00"},
        {"JobID": "300#0", "CPU_kWh": "1", "Elapsed": "00:10:00"},
        {"JobID": "300#1", "CPU_kWh": "2", "Elapsed": "00:10:00"},
    ]


def test_array_forms(url, capsys):
    for jid in ("400", "400_3", "403", "400_3.batch"):
        rc, out, err = run(capsys, "--store", url, "-P", "-n", "-o", "JobID,JobIDRaw", jid)
        assert rc == 0 and out.strip() == "400_3|403", (jid, out, err)
    assert "job step" in err


def test_unknown_job_exits_nonzero(url, capsys):
    rc, _out, err = run(capsys, "--store", url, "999")
    assert rc == 1
    # names the store and where the config came from (the fixture's site.yaml)
    cfg = os.environ["SLURM_ENERGY_CONFIG"]
    assert err.strip() == (f"jobenergy: job 999: not in the store: {url} (from --store; site config {cfg}). "
                           "No record yet if it is pending, started under 60 s ago, or ended and was not "
                           "collected (admins: slurm-energy collect)"
                           "; a job cancelled before it started never ran on a node and has none"
                           " (sacct -X -j 999 -o State,Start shows which)")


def test_bad_inputs_exit_2(url, capsys):
    rc, _, err = run(capsys, "--store", url, "-o", "JobID,Watts")
    assert rc == 2 and "unknown field 'Watts'" in err
    rc, _, err = run(capsys, "--store", url, "-S", "last tuesday")
    assert rc == 2 and "--starttime='last tuesday'" in err
    rc, _, err = run(capsys, "--store", url, "12x")
    assert rc == 2 and "'12x' is not valid" in err


def test_filters_and_window(url, capsys):
    rc, out, _ = run(capsys, "--store", url, "-P", "-n", "-o", "JobID", "-u", "bob", "-S", "2023-11-14")
    assert out.split() == ["200"]
    # window after every job ended: nothing
    rc, out, _ = run(capsys, "--store", url, "-P", "-n", "-o", "JobID", "-S", "2023-11-16")
    assert out.strip() == ""
    _rc, out, _ = run(capsys, "--store", url, "-P", "-n", "-o", "JobID", "-A", "chem,physics", "-S", "2023-11-14",
                     "-s", "complete")
    assert out.split() == ["100", "200", "300", "300#0", "300#1", "400_3"]


def test_parsable_trailing_bar_and_aligned(url, capsys):
    _, out, _ = run(capsys, "--store", url, "-p", "-o", "JobID,User", "100")
    assert out.splitlines() == ["JobID|User|", "100|alice|"]
    _, out, _ = run(capsys, "--store", url, "-o", "JobID,User", "100")
    assert out.splitlines() == ["JobID  User", "----- -----", "  100 alice"]


def test_long_per_node_device(url, capsys):
    _rc, out, _ = run(capsys, "--store", url, "-l", "-P", "200")
    rows = parsed(out)
    # 2 nodes x (cpu, ram, gpu) = 6 rows
    assert len(rows) == 6
    ram = [r for r in rows if r["Class"] == "ram"]
    assert {r["Node"] for r in ram} == {"n1", "n2"}
    assert all(r["Energy_kWh"] == "n/a" and r["Method"] == "tdp_estimate" for r in ram)
    gpu_n2 = next(r for r in rows if r["Class"] == "gpu" and r["Node"] == "n2")
    assert gpu_n2["Energy_kWh"] == "0.5" and gpu_n2["Method"] == "counter" and gpu_n2["Wraps"] == "0"


def test_json(url, capsys):
    _rc, out, _ = run(capsys, "--store", url, "--json", "300")
    d = json.loads(out)
    assert [j["jobid"] for j in d["jobs"]] == ["300#0", "300#1"]
    assert d["jobs"][1]["record"]["restart_count"] == 1


def test_reused_id_newest_with_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("{}\n")
    u = f"sqlite:///{tmp_path}/j.db"
    s = open_store(u)
    s.put(finished(node_record(job_id="9", start=T0, end=T0 + 60, cpu_j=3.6e6)))
    s.put(finished(node_record(job_id="9", start=T0 + 86400 * 30, end=T0 + 86400 * 30 + 60, cpu_j=7.2e6)))
    s.close()
    rc, out, err = run(capsys, "--store", u, "-P", "-n", "-o", "JobID,CPU_kWh", "9")
    assert out.strip() == "9|2" and "used by 2 jobs" in err
    _rc, out, err = run(capsys, "--store", u, "-P", "-n", "-o", "JobID,CPU_kWh", "-E", "2023-11-15", "9")
    assert out.strip() == "9|1" and err == ""


def test_running_job_shows_energy_so_far(tmp_path, capsys, monkeypatch):
    from slurm_energy.model import Status

    monkeypatch.setenv("SLURM_ENERGY_STORE", f"sqlite:///{tmp_path}/j.db")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(tmp_path / "c.yaml"))
    (tmp_path / "c.yaml").write_text("{}\n")
    s = open_store(f"sqlite:///{tmp_path}/j.db")
    s.put(finished(node_record(job_id="77", start=T0, end=T0 + 120, cpu_j=3.6e5, ram_j=0.0, status=Status.RUNNING)))
    s.close()
    _rc, out, _ = run(capsys, "-P", "-n", "-o", "JobID,CPU_kWh,Status", "77")
    assert out.strip() == "77|0.1|running"  # 3.6e5 J = 0.1 kWh so far


def _runuser_available():
    return os.geteuid() == 0 and shutil.which("runuser")


@pytest.mark.skipif(not _runuser_available(), reason="needs root and runuser to act as another user")
def test_ordinary_user_sees_only_own_jobs_and_cannot_write(tmp_path_factory):
    # a world-traversable directory (pytest's tmp dirs are 0700 root)
    import tempfile

    d = tempfile.mkdtemp(prefix="je-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        u = f"sqlite:///{d}/spool/jobs.db"
        s = open_store(u)
        s.put(finished(node_record(job_id="1", user="nobody")))
        s.put(finished(node_record(job_id="2", user="alice")))
        s.close()
        assert stat.S_IMODE(os.stat(f"{d}/spool/jobs.db").st_mode) == 0o644
        cfg = os.path.join(d, "site.yaml")
        with open(cfg, "w") as f:
            f.write("{}\n")
        os.chmod(cfg, 0o644)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_ENERGY_CONFIG": cfg, "PYTHONPATH": os.getcwd()}
        code = "import sys; from slurm_energy.cli.jobenergy import main; sys.exit(main(sys.argv[1:]))"
        cmd = [shutil.which("runuser"), "-u", "nobody", "--", sys.executable, "-c", code, "--store", u, "-P", "-n", "-o", "JobID",
               "-S", "1970-01-01"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=d)
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == ["1"]
        # only another user asked for: nothing of alice's, nothing of nobody's unasked, exit 1 (as sacct)
        p = subprocess.run(cmd + ["-u", "alice"], capture_output=True, text=True, env=env, cwd=d)
        assert p.returncode == 1 and p.stdout == "" and "can only see your own jobs; nothing shown" in p.stderr
        # an explicit list with oneself: the allowed subset, with a warning naming the other user
        p = subprocess.run(cmd + ["-u", "nobody,alice"], capture_output=True, text=True, env=env, cwd=d)
        assert p.returncode == 0 and p.stdout.split() == ["1"]
        assert "warning: you (nobody) can only see your own jobs; not showing alice" in p.stderr
        p = subprocess.run(cmd[:-2] + ["2"], capture_output=True, text=True, env=env, cwd=d)
        assert p.returncode == 1 and "job 2: no record among nobody's jobs" in p.stderr
        assert "It may be another user's job, which you cannot see" in p.stderr
        # the store file itself refuses writes from that user (it cannot even open the 0600 WAL index)
        w = subprocess.run([shutil.which("runuser"), "-u", "nobody", "--", sys.executable, "-c",
                            f"import sqlite3; sqlite3.connect('{d}/spool/jobs.db').execute('DELETE FROM job_records')"
                            ".connection.commit()"], capture_output=True, text=True)
        assert w.returncode != 0 and ("readonly" in w.stderr or "unable to open database file" in w.stderr)
        # an admin named in the site config sees everything
        with open(cfg, "w") as f:
            f.write("admins: [nobody]\n")
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=d)
        assert p.stdout.split() == ["1", "2"], p.stderr
    finally:
        shutil.rmtree(d)


def test_store_given_as_a_plain_path_reads_that_sqlite_file(url, capsys):
    path = url[len("sqlite:///"):]
    assert main(["--store", path, "-j", "100", "-P", "-n", "-o", "JobID,CPU_kWh"]) == 0
    assert capsys.readouterr().out.strip() == "100|1"  # 3.6e6 J = 1 kWh


def test_empty_store_and_dialect_typo_are_refused_with_the_fix(url, capsys):
    assert main(["--store", "", "-j", "100"]) == 2
    err = capsys.readouterr().err
    assert "jobenergy: --store '' is empty; give a store URL" in err and "Traceback" not in err
    assert main(["--store", "postgress://u@h/db", "-j", "100"]) == 2
    err = capsys.readouterr().err
    assert "backend 'postgress' is not supported (did you mean 'postgresql'?)" in err
    assert "Can't load plugin" not in err


# --------------------------------------------------------------------------------------------------
# jobenergy problems a new user found: tracebacks, -u of another user, unnamed store/config,
# row order, the State column and sacct's states for -s, what complete(partial-coverage) means.

@pytest.fixture
def site(site_config):
    """$SLURM_ENERGY_CONFIG at a site.yaml of ``cluster_name: c1`` alone (no store: each test names its own)."""
    return site_config.write(bare=True, cluster_name="c1")


@pytest.fixture
def states_url(tmp_path, site):
    """Jobs stored out of id order, with exit codes: 30 (T0+500, exit 3 -> FAILED), 5 (T0+1000,
    0:0 -> COMPLETED), 1000 (T0, killed by signal 9 -> CANCELLED), 7 (running), 8 (an old record:
    exit_code 3:0 but no job_state), 9 (0:0 but a node never reported: status partial)."""
    u = f"sqlite:///{tmp_path}/jobs.db"
    s = open_store(u)
    s.put(finished(node_record(job_id="30", start=T0 + 500, end=T0 + 560, exit_code="3:0", job_state="FAILED")))
    s.put(finished(node_record(job_id="5", start=T0 + 1000, end=T0 + 1060, exit_code="0:0", job_state="COMPLETED")))
    s.put(finished(node_record(job_id="1000", start=T0, end=T0 + 60, exit_code="0:9", job_state="CANCELLED")))
    s.put(finished(node_record(job_id="7", start=T0, end=T0 + 60, status=Status.RUNNING)))
    s.put(finished(node_record(job_id="8", start=T0, end=T0 + 60, exit_code="3:0")))
    s.put(finished(node_record(job_id="9", start=T0, end=T0 + 60, exit_code="0:0", job_state="COMPLETED",
                               status=Status.PARTIAL, expected=("n1", "n2"))))
    s.close()
    return u


def ids(out):
    return out.split()


# -- 1. no tracebacks ---------------------------------------------------------------------------
def test_endtime_before_default_starttime_is_a_clean_error(states_url, capsys):
    rc, out, err = run(capsys, "--store", states_url, "-E", "2020-01-01")
    assert rc == 2 and out == ""
    # default -S is today's midnight (2020 or later), -E 2020-01-01T00:00:00 UTC: start > end
    assert err.startswith("jobenergy: -S/--starttime 'midnight' (the default without -j) (")
    assert "is after -E/--endtime '2020-01-01' (2020-01-01T00:00:00)" in err
    assert "Give an -S before the -E (e.g. -S 2019-12-31)" in err  # 2020-01-01 minus 86400 s
    assert "Traceback" not in err


def test_explicit_start_after_end(states_url, capsys):
    rc, _, err = run(capsys, "--store", states_url, "-S", "2023-11-15", "-E", "2023-11-14T12:00", "5")
    assert rc == 2
    assert err.strip() == (
        "jobenergy: -S/--starttime '2023-11-15' (2023-11-15T00:00:00) is after -E/--endtime '2023-11-14T12:00' "
        "(2023-11-14T12:00:00): nothing can run in that window. Give an -S before the -E (e.g. -S 2023-11-13), "
        "or a later -E"
    )


@pytest.mark.parametrize(
    "argv, expect",
    [
        (["-o", ","], "-o/--format: no field in ','"),
        (["-j", ",,"], "-j/--jobs: no job id in ',,'"),
        (["-s", "PD"], "--state: 'PD' (PENDING) is never a stored job's state"),
        (["-s", "done"], "--state: unknown state 'done'"),
    ],
)
def test_other_bad_arguments_exit_2(states_url, capsys, argv, expect):
    rc, out, err = run(capsys, "--store", states_url, *argv)
    assert rc == 2 and out == "" and expect in err


def test_unreadable_store_names_it_and_exits_2(tmp_path, site, capsys):
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite\n")
    rc, out, err = run(capsys, "--store", f"sqlite:///{junk}", "5")
    assert rc == 2 and out == ""
    assert err.startswith(f"jobenergy: cannot read the store sqlite:///{junk} (from --store; site config {site}): ")
    assert "file is not a database" in err and "Traceback" not in err


def test_missing_sqlite_store_is_reported_not_created(tmp_path, site, capsys):
    db = tmp_path / "nowhere" / "jobs.db"
    rc, _, err = run(capsys, "--store", f"sqlite:///{db}", "5")
    assert rc == 2 and "does not exist" in err and str(db) in err
    assert not db.parent.exists()  # jobenergy (even as root) never creates a store


# -- 3. which store, which config ---------------------------------------------------------------
def test_not_found_names_store_and_missing_config(tmp_path, monkeypatch, capsys, states_url):
    from slurm_energy import config

    monkeypatch.delenv("SLURM_ENERGY_CONFIG")
    monkeypatch.setattr(config.schema, "DEFAULT_PATH", str(tmp_path / "etc" / "site.yaml"))  # absent
    monkeypatch.setenv("SLURM_ENERGY_STORE", states_url)
    rc, _, err = run(capsys, "26")
    assert rc == 1
    assert err.strip() == (
        f"jobenergy: job 26: not in the store: {states_url} (from $SLURM_ENERGY_STORE; site config: none found, "
        f"defaults used; set SLURM_ENERGY_CONFIG or create {tmp_path}/etc/site.yaml). No record yet if it is "
        "pending, started under 60 s ago, or ended and was not collected (admins: slurm-energy collect)"
        "; a job cancelled before it started never ran on a node and has none (sacct -X -j 26 -o State,Start shows which)"
    )


def test_invalid_site_config_warns_and_uses_its_valid_store(tmp_path, site, states_url, capsys):
    from slurm_energy import config

    if not hasattr(config, "load_site_config_lenient"):
        pytest.skip("slurm_energy.config.load_site_config_lenient not there yet")
    site.write_text(f"pue: 0.5\npaths:\n  store_url: {states_url}\n")
    rc, out, err = run(capsys, "-P", "-n", "-o", "JobID", "5")
    assert rc == 0 and ids(out) == ["5"]  # the store from paths.store_url, despite the bad pue
    assert f"jobenergy: warning: {site}: pue: bad value 0.5" in err


# -- 4. order -----------------------------------------------------------------------------------
def test_rows_in_job_id_order_like_sacct(states_url, capsys):
    # stored 30, 5, 1000, 7, 8, 9 with start times T0+500, T0+1000, T0, ...: printed by numeric job id
    rc, out, _ = run(capsys, "--store", states_url, "-P", "-n", "-o", "JobID", "-S", "2023-11-14")
    assert rc == 0 and ids(out) == ["5", "7", "8", "9", "30", "1000"]
    # requested ids in another order: still by job id (sacct: "order by id_job")
    rc, out, _ = run(capsys, "--store", states_url, "-P", "-n", "-o", "JobID", "-j", "1000,30", "5")
    assert rc == 0 and ids(out) == ["5", "30", "1000"]


# -- 5. State column and sacct states -------------------------------------------------------------
def test_state_column(states_url, capsys):
    rc, out, _ = run(capsys, "--store", states_url, "-P", "-n", "-o", "JobID,State,Status", "-S", "2023-11-14")
    # every record here has cpu and ram by the TDP model only: a complete one says estimated
    assert rc == 0 and out.split() == ["5|COMPLETED|complete(estimated)", "7|RUNNING|running",
                                       "8|FAILED|complete(estimated)", "9|COMPLETED|partial",
                                       "30|FAILED|complete(estimated)", "1000|CANCELLED|complete(estimated)"]


@pytest.mark.parametrize(
    "state, expect",
    [
        ("F", ["8", "30"]),  # exit 3 (job 8: derived from its exit code 3:0)
        ("FAILED", ["8", "30"]),
        ("f", ["8", "30"]),  # sacct accepts any case
        ("CD", ["5", "9"]),
        ("COMPLETED", ["5", "9"]),
        ("CA", ["1000"]),
        ("CANCELLED", ["1000"]),
        ("R", ["7"]),
        ("RUNNING", ["7"]),
        ("running", ["7"]),
        ("partial", ["9"]),
        ("failed", []),  # our measurement status: no job's hooks failed
        ("complete", ["5", "8", "30", "1000"]),
        ("F,CA", ["8", "30", "1000"]),  # any of the listed states
        ("partial,F", ["8", "9", "30"]),
    ],
)
def test_state_filter(states_url, capsys, state, expect):
    rc, out, err = run(capsys, "--store", states_url, "-P", "-n", "-o", "JobID", "-S", "2023-11-14", "-s", state)
    assert rc == 0, err
    assert ids(out) == expect


def test_state_filter_with_job_id(states_url, capsys):
    rc, out, _ = run(capsys, "--store", states_url, "-P", "-n", "-o", "JobID", "-s", "F", "30")
    assert rc == 0 and ids(out) == ["30"]
    rc, out, err = run(capsys, "--store", states_url, "-P", "-n", "-o", "JobID", "-s", "CD", "30")
    assert rc == 1 and out == "" and "job 30: not in the store in the given -S/-E window or -s states" in err


def test_parse_states_splits_job_states_and_statuses():
    f = parse_states(["F", "failed", "r", "CA"])
    assert f.job_states == {"FAILED", "CANCELLED"} and f.statuses == {"failed", "running"}


def test_timeout_and_oom_states_are_selectable():
    f = parse_states(["TO", "oom", "RQ"])
    assert f.job_states == {"TIMEOUT", "OUT_OF_MEMORY", "REQUEUED"}
    rec = node_record().model_copy(update={"job_state": "TIMEOUT"})
    assert state_matches(rec, parse_states(["TO"])) and not state_matches(rec, parse_states(["CA"]))


def test_job_state_unknown_without_exit_code():
    assert job_state(node_record()) == "UNKNOWN"  # no exit code stored


# -- 6. what the Status values mean ----------------------------------------------------------------
def test_help_explains_states_and_partial_coverage():
    h = " ".join(build_parser().format_help().split())
    assert "complete(partial-coverage) (every node reported, but some device was unmeasured (n/a) or " \
           "measured for under 95% of the job's time" in h
    assert "F|FAILED" in h and "TO|TIMEOUT" in h and "failed (the energy hooks failed; not the job's exit" in h


def test_partial_coverage_status_shown(tmp_path, site, capsys):
    u = f"sqlite:///{tmp_path}/j.db"
    s = open_store(u)
    r = finished(node_record(job_id="11", ram_j=None))  # RAM unmeasured -> totals a lower bound
    r.coverage_complete = False
    s.put(r)
    s.close()
    rc, out, _ = run(capsys, "--store", u, "-P", "-n", "-o", "JobID,RAM_kWh,Status", "11")
    # cpu by the TDP model, ram unmeasured: both qualifiers, the unmeasured one first (never hidden)
    assert rc == 0 and out.strip() == "11|n/a|complete(partial-coverage,estimated)"


def test_allowed_users_subset(capsys):
    assert je._allowed_users([], "alice") == ["alice"]
    assert je._allowed_users(["alice", "bob"], "alice") == ["alice"]
    assert "not showing bob" in capsys.readouterr().err
    with pytest.raises(PermissionError, match="you \\(alice\\) can only see your own jobs; nothing shown"):
        je._allowed_users(["bob"], "alice")


def test_default_midnight_is_in_site_timezone(tmp_path, monkeypatch, capsys, states_url):
    # -E 2020-01-01 in Paris is 2019-12-31T23:00:00Z; printed in the site zone it reads 2020-01-01T00:00:00
    # (in UTC it would read 2019-12-31T23:00:00)
    cfg = tmp_path / "paris.yaml"
    cfg.write_text("timezone: Europe/Paris\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(cfg))
    rc, _, err = run(capsys, "--store", states_url, "-E", "2020-01-01")
    assert rc == 2 and "-E/--endtime '2020-01-01' (2020-01-01T00:00:00)" in err

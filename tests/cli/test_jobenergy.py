import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from slurm_energy.cli.jobenergy import main
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record, own_site_config, run_jobenergy

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.fixture
def url(tmp_path, monkeypatch):
    own_site_config(tmp_path, monkeypatch)
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
                           "collected (admins: slurm-energy collect)")


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

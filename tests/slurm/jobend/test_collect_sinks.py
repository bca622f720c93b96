"""A job that ``slurm-energy collect`` finishes gets every output the site configured, as one the
finalizer finishes does (issue 29, defect B: collect once only put it into the store): the store,
the HTML/CSV report in the job's work dir written as the job's user, the node_exporter textfile's
series and Slurm's AdminComment write-back; what an output could not take is noted on the stored
record."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from slurm_energy.cli.main import main as se_main
from slurm_energy.outputs import slurm_writeback
from slurm_energy.slurm.jobend.results import write_node_record
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import node_record

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="collect and the report's drop to the job's user need root")


@pytest.fixture
def site(monkeypatch):
    """A base dir the job's user can traverse (0755 under /var/tmp), alice's work dir in it, the
    site config (textfile dir, spool, results, store) there; slurmdbd's tools faked (argv recorded)."""
    try:
        alice = pwd.getpwnam("alice")
    except KeyError:
        pytest.skip("no user alice on this machine (scripts/setup.sh adds her)")
    base = Path(tempfile.mkdtemp(prefix="se-collect-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    work = base / "work"
    work.mkdir(mode=0o755)
    os.chown(work, alice.pw_uid, alice.pw_gid)
    (base / "site.yaml").write_text(f"""cluster_name: c1
pue: 1.2
offline: true
paths:
  spool_dir: {base}/spool
  results_dir: {base}/results
  log_dir: {base}/log
  store_url: sqlite:///{base}/jobs.db
outputs:
  prometheus:
    textfile_dir: {base}/textfile
    keep_finished_s: 86400
""")
    (base / "textfile").mkdir()
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(base / "site.yaml"))
    monkeypatch.delenv("SLURM_ENERGY_STORE", raising=False)
    calls: list[list[str]] = []
    answers = {"sacct": (0, ""), "sacctmgr": (0, " Modified jobs...")}

    def fake_run(argv, timeout_s=15.0):  # sacct reads the AdminComment, sacctmgr writes it
        calls.append(argv)
        return answers[os.path.basename(argv[0])]

    monkeypatch.setattr(slurm_writeback, "_run", fake_run)
    yield base, work, alice, calls, answers
    shutil.rmtree(base, ignore_errors=True)


def _stale_attempt(base: Path, work: Path, alice) -> None:
    """A 2-node job of alice's of which only n1 reported, 2 h ago (its finalizer on n2 never ran);
    exported for a day after its end (``keep_finished_s``)."""
    t = time.time() - 7200
    rec = node_record(job_id="500", node="n1", expected=("n1", "n2"), user="alice", uid=alice.pw_uid,
                      gid=alice.pw_gid, work_dir=str(work), start=t - 3600, end=t)
    p = write_node_record(base / "results", rec)
    os.utime(p, (t, t))


def test_a_collected_job_gets_the_store_the_report_the_textfile_and_the_admin_comment(site, capsys):
    base, work, alice, calls, _ = site
    _stale_attempt(base, work, alice)
    assert se_main(["collect", "--older-than", "60"]) == 0
    assert "stored c1/500 attempt 0: status partial, 1 node(s), missing n2" in capsys.readouterr().out
    # the store: n1's 3.6e6 J (cpu) + 3.6e5 J (ram) = 3.96e6 J = 1.1 kWh; x PUE 1.2 = 1.32 kWh;
    # x 475 g/kWh (the world default: no location) = 627 g
    st = open_store(f"sqlite:///{base}/jobs.db", readonly=True)
    try:
        (r,) = st.get_job("500")
    finally:
        st.close()
    assert r.it_kwh == pytest.approx(1.1) and r.co2e_kg == pytest.approx(0.627)
    assert r.errors == ["node n2 never reported"]  # no output left a note: each took the record
    # the report, as the user gets it: both files in the work dir, alice's
    for name in ("energy-500.html", "energy-500.csv"):
        assert (work / name).stat().st_uid == alice.pw_uid
    assert "500" in (work / "energy-500.html").read_text()
    # the textfile: the job's cpu series, 3.6e6 J by the TDP model, and its facility energy 1.32 kWh = 4.752e6 J
    prom = (base / "textfile" / "slurm_energy.prom").read_text()
    cpu = [x for x in prom.splitlines() if x.startswith("slurm_energy_job_joules_total{") and 'device_class="cpu"' in x]
    assert len(cpu) == 1 and 'job_id="500"' in cpu[0] and 'method="tdp_estimate"' in cpu[0]
    assert float(cpu[0].rsplit(" ", 1)[1]) == pytest.approx(3.6e6)
    fac = [x for x in prom.splitlines() if x.startswith("slurm_energy_job_facility_joules_total{")]
    assert len(fac) == 1 and float(fac[0].rsplit(" ", 1)[1]) == pytest.approx(4.752e6)
    # the write-back: sacct read the field, sacctmgr wrote our segment (lower case) into slurmdbd
    assert calls[0][:2] == ["/usr/bin/sacct", "-X"] and "500" in calls[0]
    (mod,) = [c for c in calls if c[0] == "/usr/bin/sacctmgr"]
    assert mod[:6] == ["/usr/bin/sacctmgr", "-i", "modify", "job", "where", "jobid=500"]
    assert mod[-1].startswith("AdminComment=slurm-energy: 1.1 kwh it (cpu 1 tdp_estimate, ram 0.1 tdp_estimate), "
                              "1.32 kwh facility, 627 g co2e, partial")


def test_an_output_that_fails_for_a_collected_job_is_noted_on_its_stored_record(site):
    base, work, alice, _calls, answers = site
    answers["sacctmgr"] = (1, "sacctmgr: error: Access/permission denied")
    answers["scontrol"] = (1, "Job has already finished")
    (base / "textfile").rmdir()
    (base / "textfile").write_text("not a directory")  # node_exporter's dir replaced by a file
    _stale_attempt(base, work, alice)
    assert se_main(["collect", "--older-than", "60"]) == 0
    st = open_store(f"sqlite:///{base}/jobs.db", readonly=True)
    try:
        (r,) = st.get_job("500")
    finally:
        st.close()
    assert any(e.startswith("prometheus: textfile dir") for e in r.errors), r.errors
    assert any(e.startswith("slurm write-back: AdminComment not written: sacctmgr said") for e in r.errors), r.errors
    assert (work / "energy-500.html").exists()  # the other outputs still got it

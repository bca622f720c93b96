"""slurm-energy mail (MailProg wrapper): energy block added, real mail program called, missing one noted."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from slurm_energy.slurm.mailprog import is_end_mail, job_id_from
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record

SUBJECT = "Slurm Job_id=55 Name=train Ended, Run time 01:00:00, COMPLETED, ExitCode 0"


def _mail_env(site_config, tmp_path, program: str) -> dict:
    site = site_config.write(cluster_name="c1", paths={"store_url": f"sqlite:///{tmp_path}/j.db"},
                             outputs={"mail": {"program": program, "wait_s": 0}})
    st = open_store(f"sqlite:///{tmp_path}/j.db")
    st.put(finished(node_record(job_id="55", exit_code="0:0", job_state="COMPLETED")))
    st.close()
    return dict(os.environ, SLURM_ENERGY_CONFIG=str(site), SLURM_JOB_ID="55",
                SLURM_JOB_MAIL_TYPE="Ended", PATH="/usr/bin:/bin")


def _wrapper(env, tmp_path, *argv):
    return subprocess.run([sys.executable, "-m", "slurm_energy.cli.main", "mail", "--", *argv], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_block_added_and_real_program_called_with_slurms_arguments(tmp_path, site_config):
    # a recording stand-in for /usr/bin/mail (no MTA here): argv to args.txt, stdin to body.txt
    prog = tmp_path / "mail"
    prog.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path}/args.txt\ncat > {tmp_path}/body.txt\n")
    prog.chmod(0o755)
    r = _wrapper(_mail_env(site_config, tmp_path, str(prog)), tmp_path, "-s", SUBJECT, "alice")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "args.txt").read_text().splitlines() == ["-s", SUBJECT, "alice"]
    body = (tmp_path / "body.txt").read_text()
    # cpu 1 kWh + ram 0.1 kWh = 1.1 kWh IT; x PUE 1.5 x 400 g/kWh = 660 g
    assert body.startswith("Energy and efficiency (slurm-energy):\nJob ID: 55\n")
    assert "Energy (IT, job's share): 1.1 kWh" in body and "CO2e: 660 g" in body


def test_missing_mail_program_is_logged_and_noted_never_an_error(tmp_path, site_config):
    env = _mail_env(site_config, tmp_path, str(tmp_path / "no-such-mail"))
    r = _wrapper(env, tmp_path, "-s", SUBJECT, "alice")
    assert r.returncode == 0
    log = (tmp_path / "log" / "mail.log").read_text()
    assert f"mail program {tmp_path / 'no-such-mail'} not found" in log
    st = open_store(f"sqlite:///{tmp_path}/j.db")
    (rec,) = st.get_job("55")
    st.close()
    assert any(e.startswith("mail: mail program") and "outputs.mail.program" in e for e in rec.errors)
    assert rec.it_kwh is not None  # the record's data is kept


def test_begin_mail_has_no_block_and_job_id_from_subject():
    assert not is_end_mail({"SLURM_JOB_MAIL_TYPE": "Began"}, [])
    assert is_end_mail({"SLURM_JOB_MAIL_TYPE": "Failed"}, [])
    assert is_end_mail({}, ["-s", SUBJECT, "alice"])
    assert job_id_from({}, ["-s", SUBJECT, "alice"]) == "55"
    assert job_id_from({"SLURM_JOB_ID": "77"}, ["-s", SUBJECT]) == "77"


def test_install_writes_mail_wrapper_and_prints_mailprog(tmp_path, monkeypatch, capsys):
    # the installed package maps hooks/ to slurm_energy.hooks; from the checkout, fileio.shipped_file
    # reads the checkout's hooks/
    from slurm_energy.cli.main import main

    site = tmp_path / "x.yaml"
    site.write_text("cluster_name: t\n")  # install refuses a missing or invalid --config
    assert main(["install", "--hooks-dir", str(tmp_path / "h"), "--config", str(site)]) == 0
    assert f"MailProg={tmp_path / 'h' / 'mail'}" in capsys.readouterr().out.splitlines()
    m = tmp_path / "h" / "mail"
    assert stat.S_IMODE(m.stat().st_mode) == 0o755
    text = m.read_text()
    assert f"SLURM_ENERGY_CONFIG={site};" in text and f"PY={sys.executable}" in text

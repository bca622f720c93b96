"""The MailProg wrapper that adds the job's energy block to Slurm's mail (``slurm-energy mail``,
whose arguments :mod:`slurm_energy.cli.mail_cmd` parses).

slurm.conf ``MailProg=<hooks_dir>/mail`` (written and printed by ``slurm-energy install``).
slurmctld runs MailProg as ``MailProg -s SUBJECT USER`` with SLURM_JOB_ID, SLURM_JOB_MAIL_TYPE
(Began, Ended, Failed, ...) in the environment (Slurm >= 21.08; older: the job id is read from
the subject's ``Job_id=N``). For a job's end (any mail type but Began/Requeued/Stage_out...
containing "Began") the wrapper waits up to ``outputs.mail.wait_s`` (default 20 s) for the job's
final record (the finalizer runs after the Epilog, so Slurm's end mail usually comes first), then
calls the real mail program (``outputs.mail.program``, default /usr/bin/mail) with the same
arguments and the body: Slurm's (stdin, bounded) followed by the ``jobenergy --seff`` block, or a
line saying the record is not final yet.

Never blocks Slurm and never fails it: a missing or failing mail program is logged (log_dir
``mail.log`` where SlurmUser, whom slurmctld runs MailProg as, may write it; else syslog) and noted
on the job's stored record where the store is writable by SlurmUser; exit status is 0.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig
    from slurm_energy.model import JobRecord

log = logging.getLogger("slurm_energy.mail")

MAX_BODY = 64 * 1024  # bytes of Slurm's own body kept (it sends none; a site wrapper may)


def job_id_from(env: Mapping[str, str], argv: list[str]) -> str:
    """The job id from SLURM_JOB_ID, else from the subject's ``Job_id=N`` (older Slurm); "" if none."""
    if env.get("SLURM_JOB_ID", "").isdigit():
        return str(env["SLURM_JOB_ID"])
    m = re.search(r"Job_id=(\d+)", " ".join(argv))
    return m.group(1) if m else ""


def is_end_mail(env: Mapping[str, str], argv: list[str]) -> bool:
    """True for mail sent when the job ended (Ended, Failed, Time_limit, ...), not Began/Requeued."""
    mt = env.get("SLURM_JOB_MAIL_TYPE", "")
    text = mt or " ".join(argv)
    return not re.search(r"\b(Began|Requeued|Invalid dependency|Stage_out|Reached \d+%)", text)


def energy_block(cfg: SiteConfig, job_id: str, wait_s: float,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[str, JobRecord | None]:
    """(text, final record or None): the seff block once the final record is stored (waits up to
    ``wait_s``), else a line saying where to look later."""
    from slurm_energy.reporting.seff import seff_block
    from slurm_energy.slurm.clients.sacct import allocation
    from slurm_energy.store import open_store

    deadline = time.monotonic() + wait_s
    last = None
    while True:
        try:
            st = open_store(cfg.paths.store_url, readonly=True)
            try:
                recs = st.get_job(job_id)
            finally:
                st.close()
        except Exception as e:  # an unreadable store must not stop the mail
            return f"Energy: not available ({type(e).__name__}: {str(e)[:120]})", None
        final = [r for r in recs if r.status.value != "running"]
        if final:
            last = max(final, key=lambda r: r.start_time)
            return "Energy and efficiency (slurm-energy):\n" + seff_block(last, *allocation(job_id)), last
        if time.monotonic() >= deadline:
            return (f"Energy: the job's record is not final yet; run `jobenergy --seff {job_id}` in a few "
                    "minutes"), None
        sleep(1.0)


def _note(cfg: SiteConfig, rec: JobRecord | None, text: str) -> None:
    """Add ``text`` to the stored record's notes where this user may write the store; else log only."""
    if rec is None:
        return
    try:
        from slurm_energy.outputs.sinks import site_sinks
        from slurm_energy.pipeline import publish

        rec.errors.append(text)
        publish(rec, site_sinks(cfg, only=("store",)))  # the stored record's note; its outputs have it already
    except Exception as e:
        log.warning("job=%s: note not stored (%s: %s)", rec.job_id, type(e).__name__, e)


def _syslog() -> None:
    """Also log to syslog (``/dev/log``) where it exists, tagged ``slurm-energy-mail``."""
    import logging.handlers

    if os.path.exists("/dev/log"):
        try:
            h = logging.handlers.SysLogHandler(address="/dev/log")
            h.setFormatter(logging.Formatter("slurm-energy-mail: %(levelname)s %(message)s"))
            logging.getLogger("slurm_energy").addHandler(h)
        except OSError:
            pass


def send(program: str, argv: list[str], body: str, timeout_s: float = 60.0) -> str:
    """Run ``program argv...`` with ``body`` on stdin; returns "" or why it failed (never raises)."""
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return f"mail program {program} not found or not executable (outputs.mail.program); mail not sent"
    try:
        r = subprocess.run([program, *argv], input=body, text=True, capture_output=True, timeout=timeout_s,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"mail program {program} failed: {e}"
    if r.returncode != 0:
        return f"mail program {program} exited {r.returncode}: {(r.stderr or r.stdout).strip()[:200]}"
    return ""


def mail(mail_args: list[str]) -> int:
    """Add the energy block to the mail on stdin and send it with ``mail_args`` (what slurmctld
    passes: ``-s SUBJECT USER``); always returns 0 (see module doc)."""
    from slurm_energy.config import load_site_config_for_hooks
    from slurm_energy.slurm.log import setup_logging

    cfg, _problems = load_site_config_for_hooks(save=False)
    if setup_logging(cfg.paths.log_dir, "mail.log") == "<stderr>":
        _syslog()  # MailProg runs as SlurmUser with stdio on /dev/null: root's log dir is not writable
    body = ""
    try:
        if not sys.stdin.isatty():
            body = sys.stdin.read(MAX_BODY)
    except (OSError, ValueError):
        body = ""
    env, argv = dict(os.environ), list(mail_args)
    job_id, rec = job_id_from(env, argv), None
    if job_id and is_end_mail(env, argv):
        try:
            block, rec = energy_block(cfg, job_id, cfg.outputs.mail.wait_s)
        except Exception as e:  # never lose Slurm's mail over our part
            log.exception("energy block for job %s", job_id)
            block = f"Energy: not available ({type(e).__name__})"
        body = (body.rstrip("\n") + "\n\n" if body.strip() else "") + block + "\n"
    why = send(cfg.outputs.mail.program, argv, body)
    if why:
        log.error("job=%s: %s", job_id or "?", why)
        _note(cfg, rec, f"mail: {why}")
    else:
        log.info("job=%s mail sent via %s", job_id or "?", cfg.outputs.mail.program)
    return 0

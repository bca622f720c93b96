"""The per-job report as an output: ``energy-<jobid>.html`` and ``.csv``, written as the job's user."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord

log = logging.getLogger("slurm_energy.outputs.report")


class ReportSink:
    """Write the HTML and CSV reports.

    Args:
        out_dir: directory to write into; ``None`` = the record's ``work_dir`` (Slurm's WorkDir).
        uid, gid: whom to write as; ``None`` = the record's ``uid``/``gid`` (the job's user; the
            files are written with privileges dropped, see ``reporting.safe_write``).
        umask: the user's umask for the files (their SLURM_UMASK); None = unknown (077 as root).
        hourly_ci: ``record -> {hour: gCO2e/kWh} | None``, the hourly intensity imported for the
            job's zone: the report then shows the carbon-aware what-if (accounting.whatif).

    A record without a directory or user to write as is skipped; as root, one whose user is root
    (uid 0) is not written (root writes no file for a record's say-so). A failure (unwritable directory,
    rendering error) is returned as a note, not raised (``"report not written: ..."``). ``written``:
    the paths of the last publish.
    """

    name = "report"
    keeps_errors = False

    def __init__(self, out_dir: str | None = None, uid: int | None = None, gid: int | None = None,
                 umask: int | None = None, hourly_ci: Callable[[JobRecord], dict[str, float] | None] | None = None):
        self.out_dir, self.uid, self.gid, self.umask = out_dir, uid, gid, umask
        self.hourly_ci = hourly_ci
        self.written: tuple[str, ...] = ()

    def publish(self, record: JobRecord) -> list[str]:
        """Render and write both files; the note of what was not written (see the class docstring)."""
        out_dir = self.out_dir if self.out_dir is not None else record.raw("work_dir")  # the OS's bytes
        uid = self.uid if self.uid is not None else record.uid
        gid = self.gid if self.gid is not None else (record.gid if record.gid is not None else uid)
        if not out_dir or uid is None or gid is None:
            return []  # nowhere to write as whom: nothing to report
        if uid == 0 and self.uid is None and os.geteuid() == 0:
            record.report_error = (f"{record.work_dir} not written: the job's user is root (uid 0); root writes "
                                   f"no report as root; the energy is in `jobenergy -l {record.job_id}`")
            return ["report not written: the job's user is root (uid 0)"]
        try:
            from slurm_energy.reporting.report import write_reports

            w = self._whatif(record)
            html, csv = write_reports(record, out_dir, uid, gid, umask=self.umask, **({} if w is None else {"whatif": w}))
        except Exception as e:
            log.warning("report for job %s not written: %s", record.job_id, e)
            record.report_error = report_problem(record, e)
            return [str(e) if "not written" in str(e) else f"report not written: {e}"]
        log.info("job=%s report %s %s", record.job_id, html, csv)
        self.written = (html, csv)
        return []


    def _whatif(self, record: JobRecord) -> Any:
        """The what-if for the report, or None (no hourly intensity; a problem is logged, not raised)."""
        if self.hourly_ci is None:
            return None
        try:
            ci = self.hourly_ci(record)
            if not ci:
                return None
            from slurm_energy.accounting.whatif import what_if

            return what_if(record, ci)
        except Exception as e:  # the report is written without it
            log.warning("job %s: what-if not computed: %s", record.job_id, e)
            return None


def report_problem(rec: JobRecord, e: BaseException) -> str:
    """Why the report is missing, for the user (``complete (no report: <reason>)``): the directory,
    the reason and the fix. ``e`` is write_reports' error (SafeWriteError/ReportWriteError/ValueError)."""
    reason = getattr(e, "reason", "") or str(e)
    who = rec.user or f"uid {rec.uid}"
    if "ermission denied" in reason or "errno 13" in reason or "Read-only" in reason:
        fix = (f"make it writable by {who} or submit from a writable directory (sbatch --chdir=DIR); "
               f"the energy is in `jobenergy -l {rec.job_id}`")
    else:
        fix = f"the energy is in `jobenergy -l {rec.job_id}`"
    return f"{rec.work_dir} not written as {who}: {reason.splitlines()[0][:200]}; {fix}"


def report_path(out_dir: str, label: str) -> str:
    """The HTML report's path in ``out_dir`` for a measurement labelled ``label`` (its job id),
    named as :func:`slurm_energy.reporting.report.report_names` names it."""
    import os
    from types import SimpleNamespace

    from slurm_energy.reporting.report import report_names

    rec = SimpleNamespace(job_id=label, array_job_id=None, array_task_id=None, het_job_id=None, het_job_offset=None)
    return os.path.join(os.path.abspath(out_dir), report_names(rec)[0])  # type: ignore[arg-type]


def free_label(out_dir: str, label: str) -> str:
    """``label``, or the first of ``label-2``, ``label-3``... whose report does not exist in
    ``out_dir`` yet: an earlier run's report is never overwritten without being asked."""
    import os

    n, cand = 1, label
    while os.path.lexists(report_path(out_dir, cand)):
        n += 1
        cand = f"{label}-{n}"
    return cand

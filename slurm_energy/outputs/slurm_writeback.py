"""Slurm write-back: a short energy summary in the job's AdminComment, optionally its energy TRES.

Run by the detached finalizer once a record is final (never by the Prolog/Epilog: scontrol and
sacctmgr talk to the controller/slurmdbd and may block).

AdminComment (``outputs.slurm.admin_comment``, on by default)
    Our part is one segment that starts with ``slurm-energy:`` and runs to the next `` | `` or the
    end; it is at most ``admin_comment_max_chars`` (default 240) characters. Other tools' text is
    kept as it is and only our segment is replaced, so several tools can share the field. A field
    that another tool *owns whole* is left alone, with a note on the record: its value starts with
    one of ``foreign_markers`` (default ``JS1:`` -- Princeton jobstats stores a base64 blob there and
    parses the whole field --, ``{`` or ``[``: a JSON document that our text would break).
    The finalizer runs once the job has finished, and Slurm (22.05 measured) refuses
    ``scontrol update JobId=N AdminComment=...`` for a finished job ("Job has already finished"), so
    the value goes to slurmdbd (what sacct reads) with ``sacctmgr -i modify job where jobid=N set
    AdminComment=...``; ``scontrol update`` is the fallback. sacctmgr stores the value in lower case
    (measured on 22.05), so our text is lower case, and where other tools' text has capitals sacctmgr
    is not used (it would alter their text): only scontrol is tried, else a note. The
    current value is read with ``sacct -X -n -P -o AdminComment``. ``sacct -j N -o AdminComment``
    then shows e.g.::

        slurm-energy: 0.0123 kwh it (cpu 0.011 tdp_estimate, ram 0.0013 tdp_estimate), 0.01943 kwh facility, 9.23 g co2e, complete

Energy TRES (``outputs.slurm.tres_energy``, OFF by default)
    Slurm >= 25.11 lets an administrator set a finished job's TRES ("to add energy usage data"):
    ``sacctmgr -i modify job where jobid=N set TRES=energy=<J>`` (IT energy, joules, integer).
    This is PERMANENT: it rewrites the job's accounting in slurmdbd, which fair-share and billing
    may use. Older sacctmgr versions are not asked (a note says so); a sacctmgr that refuses
    leaves a note with its message.

Every failure is logged and returned as a note for the record; nothing raises.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Callable

from slurm_energy.model import JobRecord, Method
from slurm_energy.slurmpaths import client_path
from slurm_energy.units import J_PER_KWH

log = logging.getLogger("slurm_energy.outputs.slurm_writeback")

PREFIX = "slurm-energy:"
SEP = " | "
SCONTROL, SACCT, SACCTMGR = client_path("scontrol"), client_path("sacct"), client_path("sacctmgr")
TRES_MIN_VERSION = (25, 11)  # Slurm 25.11: sacctmgr modify job ... set TRES=
_ABBR = {Method.COUNTER.value: "counter", Method.POWER_INTEGRATION.value: "power_int",
         Method.TDP_ESTIMATE.value: "tdp_estimate", Method.UNAVAILABLE.value: "unmeasured"}


def summary_text(rec: JobRecord, max_chars: int = 240) -> str:
    """Our AdminComment segment for ``rec``, in lower case (slurmdbd keeps what ``sacctmgr`` writes
    in lower case, so the text reads the same whichever way it went):
    ``slurm-energy: <kWh> kwh it (<class> <kWh> <method>, ...), <kWh> kwh facility, <g> g co2e,
    <coverage>``. Unmeasured classes say so (never 0). Cut to ``max_chars`` with ``...``."""
    parts = []
    for cls in sorted(rec.methods):
        j = rec.energy_it_j.get(cls)
        m = _ABBR.get(rec.methods[cls].value, rec.methods[cls].value)
        parts.append(f"{cls} unmeasured" if j is None else f"{cls} {j / J_PER_KWH:.4g} {m}")
    it = "n/a kwh it" if rec.it_kwh is None else f"{rec.it_kwh:.4g} kwh it"
    fac = "" if rec.facility_kwh is None else f", {rec.facility_kwh:.4g} kwh facility"
    co2 = "n/a" if rec.co2e_gross_kg is None else f"{rec.co2e_gross_kg * 1000:.4g}"  # location-based
    cov = "complete" if rec.coverage_complete and rec.status.value == "complete" else f"{rec.status.value}, partial coverage"
    text = f"{PREFIX} {it} ({', '.join(parts) or 'no devices'}){fac}, {co2} g co2e, {cov}".replace("|", "/").lower()
    return text if len(text) <= max_chars else text[:max_chars - 3] + "..."


def merge_comment(existing: str, ours: str, foreign_markers: tuple[str, ...] | list[str] = ("JS1:", "{", "[")
                  ) -> tuple[str | None, str]:
    """The field's new value with our segment replaced/appended, or (None, why) when another tool
    owns the field (it starts with one of ``foreign_markers``, any case). Others' segments are kept verbatim."""
    cur = (existing or "").strip()
    for mk in foreign_markers:
        if mk and cur.lower().startswith(mk.lower()):  # sacctmgr may have lowercased it
            return None, (f"AdminComment is owned by another tool (starts with {mk!r}); not written. "
                          "Set outputs.slurm.foreign_markers to share it")
    kept = [s for s in cur.split(SEP) if s.strip() and not s.strip().startswith(PREFIX)] if cur else []
    return SEP.join([*kept, ours]), ""


def _run(argv: list[str], timeout_s: float = 15.0) -> tuple[int, str]:
    env = {"LANG": "C", **({"SLURM_CONF": os.environ["SLURM_CONF"]} if os.environ.get("SLURM_CONF") else {})}
    try:
        r = subprocess.run(argv, capture_output=True, text=True, errors="surrogateescape", timeout=timeout_s,
                           env=env)
    except FileNotFoundError:
        return 127, f"{argv[0]} not found"
    except (OSError, subprocess.TimeoutExpired) as e:
        return 124, f"{argv[0]}: {e}"
    return r.returncode, (r.stdout + r.stderr).strip()


def slurm_version(sacctmgr: str = SACCTMGR, run: Callable = _run) -> tuple[int, int] | None:
    """(major, minor) from ``sacctmgr --version`` (e.g. "slurm-wlm 22.05.8" -> (22, 5)), or None."""
    rc, out = run([sacctmgr, "--version"])
    m = re.search(r"(\d+)\.(\d+)", out) if rc == 0 else None
    return (int(m.group(1)), int(m.group(2))) if m else None


class SlurmWriteback:
    """Sink: ``publish(record) -> notes``; writes AdminComment and (opt-in) the energy TRES."""

    name = "slurm"
    keeps_errors = False  # a note of what failed goes to the stored record instead

    def __init__(self, admin_comment: bool = True, max_chars: int = 240,
                 foreign_markers: tuple[str, ...] | list[str] = ("JS1:", "{", "["), tres_energy: bool = False,
                 scontrol: str = SCONTROL, sacct: str = SACCT, sacctmgr: str = SACCTMGR, run: Callable | None = None,
                 check_version: bool = True):
        self.admin_comment, self.max_chars, self.foreign_markers = admin_comment, max_chars, tuple(foreign_markers)
        self.tres_energy, self.check_version = tres_energy, check_version
        self.scontrol, self.sacct, self.sacctmgr, self.run = scontrol, sacct, sacctmgr, run or _run

    def publish(self, rec: JobRecord) -> list[str]:
        """Write-back for a final record (a running record is ignored). Returns notes; never raises."""
        if rec.status.value == "running":
            return []
        notes = []
        for on, step in ((self.admin_comment, self._admin_comment), (self.tres_energy, self._tres)):
            if not on:
                continue
            try:
                note = step(rec)
            except Exception as e:  # a write-back must never lose the record
                note = f"{type(e).__name__}: {e}"
            if note:
                log.warning("job=%s slurm write-back: %s", rec.job_id, note)
                notes.append(f"slurm write-back: {note}")
        return notes

    def _current(self, job_id: str) -> tuple[str | None, str]:
        rc, out = self.run([self.sacct, "-X", "-n", "-P", "-j", job_id, "-o", "AdminComment"])
        if rc != 0:
            return None, f"sacct could not read job {job_id}'s AdminComment (rc {rc}): {out[:200]}"
        return (out.splitlines() or [""])[0], ""

    def _admin_comment(self, rec: JobRecord) -> str:
        existing, why = self._current(rec.job_id)
        if existing is None:
            return why + "; AdminComment not written"
        ours = summary_text(rec, self.max_chars)
        value, why = merge_comment(existing, ours, self.foreign_markers)
        if value is None:
            return why
        cut = "" if len(summary_text(rec, 10**6)) <= self.max_chars else \
            f"AdminComment summary cut to {self.max_chars} characters (outputs.slurm.admin_comment_max_chars)"
        tried = []
        if value == value.lower():  # slurmdbd (what sacct reads) keeps sacctmgr's values in lower case
            rc, out = self.run([self.sacctmgr, "-i", "modify", "job", "where", f"jobid={rec.job_id}", "set",
                                f"AdminComment={value}"])
            if rc == 0 and "Modified" in out:
                return cut
            tried.append(f"sacctmgr said {out[:160]!r} (rc {rc})")
        else:
            tried.append(f"sacctmgr not used: it would keep other tools' text {existing[:80]!r} only in lower case")
        rc, out = self.run([self.scontrol, "update", f"JobId={rec.job_id}", f"AdminComment={value}"])
        if rc == 0:
            return cut
        tried.append(f"scontrol said {out[:160]!r} (rc {rc})")
        return "AdminComment not written: " + "; ".join(tried)

    def _tres(self, rec: JobRecord) -> str:
        if rec.it_kwh is None:
            return "energy TRES not set: the job's IT energy was not measured (never written as 0)"
        if self.check_version:
            v = slurm_version(self.sacctmgr, self.run)
            if v is None or v < TRES_MIN_VERSION:
                have = "unknown" if v is None else f"{v[0]}.{v[1]:02d}"
                return f"energy TRES not set: needs Slurm >= 25.11 (sacctmgr {have})"
        joules = round(rec.it_kwh * J_PER_KWH)
        rc, out = self.run([self.sacctmgr, "-i", "modify", "job", "where", f"jobid={rec.job_id}", "set",
                            f"TRES=energy={joules}"])
        if rc == 0 and "Modified" in out:
            return ""
        return f"energy TRES not set: sacctmgr refused (rc {rc}): {' '.join(out.split())[:200]}"


def from_config(cfg) -> SlurmWriteback:
    """The sink for site config ``cfg`` (``outputs.slurm``)."""
    sc = cfg.outputs.slurm
    return SlurmWriteback(admin_comment=sc.admin_comment, max_chars=sc.admin_comment_max_chars,
                          foreign_markers=sc.foreign_markers, tres_energy=sc.tres_energy)

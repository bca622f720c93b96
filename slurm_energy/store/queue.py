"""A durable queue of final JobRecords the store did not take (down, or locked past Store.put's
retries): one JSON file per record under ``<spool>/queue/`` (root-only, like the spool; the first
of the spool and the fallback spool that can be written). ``slurm-energy collect`` drains it.

File name: ``<cluster>.<job_id>.r<restart>.<start_time_ms>.json``: putting the same attempt twice
replaces the file (the newer record wins, as in the store). Writes are atomic (temp + rename + fsync).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable

from slurm_energy.core import shown_text
from slurm_energy.fileio import atomic_write
from slurm_energy.model import JobRecord, text_safe

log = logging.getLogger(__name__)


def queue_dir(spool_dir: str) -> str:
    """``<spool_dir>/queue``."""
    return os.path.join(spool_dir, "queue")


def _name(rec: JobRecord) -> str:
    safe = "".join(c if c.isalnum() or c in "_+-" else "_" for c in f"{rec.cluster or 'default'}")
    jid = "".join(c if c.isalnum() or c in "_+-" else "_" for c in rec.job_id)
    return f"{safe}.{jid}.r{int(rec.restart_count)}.{int(rec.start_time * 1000)}.json"


def queue_record(spool_dirs: Iterable[str], rec: JobRecord, reason: str) -> str | None:
    """Write ``rec`` (with ``reason``, why the store failed) to the first writable queue dir.

    Returns the file's path, or None when no queue dir could be written (every spool full or
    read-only); never raises for a filesystem error."""
    body = json.dumps({"reason": shown_text(reason), "record": json.loads(text_safe(rec).model_dump_json())})
    for sp in spool_dirs:
        d = queue_dir(sp)
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            path = os.path.join(d, _name(rec))
            atomic_write(path, body, mode=0o600, fsync=True)
            return path
        except OSError as e:
            log.warning("queue %s not written: %s", d, e)
    return None


def drain(spool_dirs: Iterable[str], put: Callable[[JobRecord], None]) -> tuple[int, list[str]]:
    """Put every queued record with ``put`` (oldest file first) and remove its file once stored.

    Returns (records stored, one message per file that failed: unreadable, or ``put`` raised; those
    files stay for the next run). ``put`` errors are not raised.
    """
    n, problems = 0, []
    for sp in spool_dirs:
        d = queue_dir(sp)
        try:
            names = sorted((n for n in os.listdir(d) if n.endswith(".json") and not n.startswith(".")),
                           key=lambda x: os.path.getmtime(os.path.join(d, x)))
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            try:
                with open(path, encoding="utf-8") as f:
                    rec = JobRecord.model_validate(json.load(f)["record"])
                put(rec)
                os.unlink(path)
                n += 1
            except Exception as e:
                first = str(e).splitlines()[0] if str(e) else ""
                problems.append(f"queued record {path} not stored: {type(e).__name__}: {first}")
    return n, problems

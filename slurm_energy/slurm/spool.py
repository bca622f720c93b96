"""The root-only spool: one directory per job attempt, files per node.

Layout (``spool_dir`` from the site config, default /var/spool/slurm-energy, mode 0700)::

    jobs/<job_id>-r<restart_count>/      0700, one per attempt (a requeued job gets a new one)
        context-<node>.json              the Prolog's JobContext
        static-<node>.json               the sampler's device inventory (device info collector)
        samples-<node>.jsonl             the sample file
        sampler-<node>.pid               the detached sampler's PID
        errors-<node>.jsonl              hook failures recorded on the job (one JSON string a line)
        jobenv-<node>.json               array/het ids and job name read from the job's processes
        epilog-<node>.done               this node's Epilog has run for this attempt
"""

from __future__ import annotations

import json
import os
import time


def _mkdir_private(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path):
        raise OSError(f"{path}: spool path is not a real directory (refusing a symlink)")
    if os.geteuid() == 0 and st.st_uid != 0:
        raise OSError(f"{path}: spool directory is owned by uid {st.st_uid}, not root; fix its owner")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


class JobSpool:
    """Paths of one job attempt on one node, under ``spool_dir``."""

    def __init__(self, spool_dir: str, job_id: str, restart_count: int, node: str):
        self.spool_dir = spool_dir
        self.job_id = job_id
        self.node = node
        self.dir = os.path.join(spool_dir, "jobs", f"{job_id}-r{int(restart_count)}")

    def ensure(self) -> "JobSpool":
        """Create the spool and job directories (0700). Raises OSError."""
        _mkdir_private(self.spool_dir)
        _mkdir_private(os.path.join(self.spool_dir, "jobs"))
        _mkdir_private(self.dir)
        return self

    def path(self, kind: str, ext: str = "json") -> str:
        return os.path.join(self.dir, f"{kind}-{self.node}.{ext}")

    @property
    def context(self) -> str:
        return self.path("context")

    @property
    def static(self) -> str:
        return self.path("static")

    @property
    def samples(self) -> str:
        return self.path("samples", "jsonl")

    @property
    def pidfile(self) -> str:
        return self.path("sampler", "pid")

    @property
    def jobenv(self) -> str:
        return self.path("jobenv")

    @property
    def done(self) -> str:
        return self.path("epilog", "done")

    @property
    def errors(self) -> str:
        return self.path("errors", "jsonl")

    def record_error(self, msg: str) -> None:
        """Append a failure to the job's errors file (never raises)."""
        try:
            self.ensure()
            with open(self.errors, "a", encoding="utf-8") as f:
                f.write(json.dumps(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {msg}") + "\n")
        except OSError:
            pass

    def read_errors(self) -> list[str]:
        try:
            with open(self.errors, encoding="utf-8") as f:
                return [json.loads(x) for x in f if x.strip()]
        except (OSError, ValueError):
            return []


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (tmp + rename), mode 0600."""
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def find_attempt(spool_dir: str, job_id: str, node: str, restart_count: int) -> JobSpool:
    """The attempt an Epilog belongs to.

    A requeued job's Epilog for attempt k may already see SLURM_JOB_RESTART_COUNT = k + 1, so the
    attempt is the one this node's Prolog started (context file present) whose Epilog has not run
    yet: the given restart count if it qualifies, else the newest such attempt below it. Falls back
    to the given restart count (a job whose Prolog never ran).
    """
    want = JobSpool(spool_dir, job_id, restart_count, node)
    jobs = os.path.join(spool_dir, "jobs")
    pending = []
    try:
        names = os.listdir(jobs)
    except OSError:
        return want
    for name in names:
        jid, sep, r = name.rpartition("-r")
        if jid != job_id or not sep or not r.isdigit():
            continue
        sp = JobSpool(spool_dir, job_id, int(r), node)
        if os.path.exists(sp.context) and not os.path.exists(sp.done):
            pending.append((int(r), sp))
    if any(r == restart_count for r, _ in pending):
        return want
    older = [p for p in pending if p[0] < restart_count]
    return max(older, key=lambda p: p[0])[1] if older else want

"""The root-only spool: one directory per job attempt, files per node.

Layout (``spool_dir`` from the site config, default /var/spool/slurm-energy, mode 0700)::

    jobs/<job_id>-r<restart_count>/      0700, one per attempt (a requeued job gets a new one);
                                         <job_id>-r<n>-<tag>/ for a later run of a reused job id
        context-<node>.json              the Prolog's JobContext
        static-<node>.json               the sampler's device inventory (device info collector)
        samples-<node>.jsonl             the sample file
        sampler-<node>.pid               the detached sampler's PID
        errors-<node>.jsonl              hook failures recorded on the job (one JSON string a line)
        jobenv-<node>.json               job name and SLURM_UMASK read from the job's processes (never identity)
        epilog-<node>.done               this node's Epilog has run for this attempt (JSON: t, sampler, exit_code)
        finalized-<node>.done            this node's finalizer has written its record (collect skips it)
        prolog-raw-<node>.json           the Prolog's counter files, until its sampler wrote their row
    prolog-files-<node>.json             the counter files a Prolog reads on this node (slurm/prolograw.py)
"""

from __future__ import annotations

import json
import os
import re
import time

from slurm_energy.fileio import atomic_write


def _mkdir_private(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path):
        raise OSError(f"{path}: spool path is not a real directory (refusing a symlink)")
    if os.geteuid() == 0 and st.st_uid != 0:
        raise OSError(f"{path}: spool directory is owned by uid {st.st_uid}, not root; fix its owner")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


#: ``<job_id>-r<restart_count>`` or, for a second run of a reused job id, ``...-<tag>``
_DIR_RE = re.compile(r"^(\d+)-r(\d+)(?:-([A-Za-z0-9_]+))?$")


class JobSpool:
    """Paths of one job attempt (one run) on one node, under ``spool_dir``.

    ``tag`` separates two runs of one job id (Slurm reused the id, or an old run's directory is
    still there): the directory is ``<job_id>-r<restart_count>-<tag>`` then (see :func:`new_run`).
    """

    def __init__(self, spool_dir: str, job_id: str, restart_count: int, node: str, tag: str = ""):
        self.spool_dir = spool_dir
        self.job_id = job_id
        self.node = node
        self.restart_count = int(restart_count)
        self.tag = tag
        name = f"{job_id}-r{int(restart_count)}" + (f"-{tag}" if tag else "")
        self.dir = os.path.join(spool_dir, "jobs", name)

    @classmethod
    def from_dir(cls, job_dir: str, node: str) -> JobSpool:
        """The spool of an existing job directory (as passed to the sampler and finalizer).

        Raises ValueError if the directory's name is not ``<job_id>-r<n>[-<tag>]``."""
        job_dir = job_dir.rstrip("/")
        m = _DIR_RE.match(os.path.basename(job_dir))
        if not m:
            raise ValueError(f"{job_dir}: not a job spool directory (<job_id>-r<restart>[-<tag>])")
        return cls(os.path.dirname(os.path.dirname(job_dir)), m.group(1), int(m.group(2)), node, m.group(3) or "")

    def ensure(self) -> JobSpool:
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
    def finalized(self) -> str:
        return self.path("finalized", "done")

    @property
    def prolog_running(self) -> str:
        """Made as the Prolog starts its work on the spool, removed as it ends: left behind, it says
        the Prolog was killed (its 1.9 s guard's SIGKILL) before it had finished."""
        return self.path("prolog", "running")

    def epilog_facts(self) -> dict:
        """What the Epilog left in ``epilog-<node>.done``: {"t": end epoch s, "sampler": outcome,
        "exit_code": "0:0"} ({} when it did not run; {"t": ...} for an older plain-number file)."""
        try:
            with open(self.done, encoding="utf-8") as f:
                text = f.read().strip()
        except OSError:
            return {}
        try:
            v = json.loads(text)
        except ValueError:
            return {}
        return v if isinstance(v, dict) else {"t": float(v)}

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


def unfinished_jobs(spools: list[str]) -> set[str]:
    """Job ids with an attempt in one of ``spools`` that a node has not finalized (a context
    without its ``finalized-<node>.done``, or no context yet: a Prolog at work). Root's own files
    only: no time or file a user can set counts."""
    out: set[str] = set()
    for sd in spools:
        jobs = os.path.join(sd, "jobs")
        try:
            names = os.listdir(jobs)
        except OSError:
            continue
        for name in names:
            m = _DIR_RE.match(name)
            if not m:
                continue
            try:
                files = set(os.listdir(os.path.join(jobs, name)))
            except OSError:
                continue
            nodes = [f[len("context-"):-len(".json")] for f in files if f.startswith("context-") and f.endswith(".json")]
            if not nodes or any(f"finalized-{n}.done" not in files for n in nodes):
                out.add(m.group(1))
    return out


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (tmp + rename), mode 0600
    (:func:`slurm_energy.fileio.atomic_write`). Raises OSError (ENOSPC, EROFS...), leaving no temp
    file behind; one left by a killed writer (``<name>.tmp<pid>``) is reused by the next writer
    with that PID and removed by :func:`remove_stale_tmp`."""
    atomic_write(path, text, mode=0o600)


#: The node's queue of finished jobs for its finalizer (:mod:`slurm_energy.slurm.finalize_queue`):
#: ``<spool>/finalize-queue/<node>/``, one entry per job attempt the Epilog (or a sampler that saw
#: no Epilog) handed over, removed once the attempt is finalized. Root-only, like the spool.
FINALIZE_QUEUE = "finalize-queue"
#: In the queue directory: the flock of the one runner working it, of the one standby waiting for
#: it, and the runner's own log (its start-up, one CPU line per process).
RUNNER_LOCK, STANDBY_LOCK, RUNNER_LOG = ".runner.lock", ".standby.lock", ".runner.log"


def finalize_queue_dir(spool_dir: str, node: str) -> str:
    """The queue directory of ``node``'s finalizer in ``spool_dir`` (not created)."""
    return os.path.join(spool_dir, FINALIZE_QUEUE, node)


def enqueue_finalize(sp: JobSpool, t_end: float, exit_code: str, sampler: str) -> str:
    """Queue this attempt for its node's finalizer: ``<queue>/<run dir name>`` holding
    ``{"dir", "node", "t", "exit_code", "sampler", "attempts": 0}`` (``t``: the job's end, epoch s;
    ``sampler``: what the Epilog saw, :func:`slurm_energy.slurm.detach.stop_process`). Returns the
    queue directory. Raises OSError (a full or read-only spool: the caller starts a finalizer for
    this job alone, as before the queue)."""
    q = finalize_queue_dir(sp.spool_dir, sp.node)
    _mkdir_private(os.path.dirname(q))
    _mkdir_private(q)
    write_private(os.path.join(q, os.path.basename(sp.dir)), json.dumps(
        {"dir": sp.dir, "node": sp.node, "t": t_end, "exit_code": exit_code, "sampler": sampler, "attempts": 0}))
    return q


def needs_runner(qdir: str) -> bool:
    """True when the caller (the Epilog, after queueing its job) must start the node's finalizer
    (:mod:`slurm_energy.slurm.finalize_queue`): no runner holds ``qdir``'s lock, or one does but
    no standby waits behind it. Light: two ``flock`` probes (here, not in that module: the Epilog
    imports this one anyway)."""
    from slurm_energy.slurm.processes import lock_taken

    if not lock_taken(os.path.join(qdir, RUNNER_LOCK)):  # none, or the lock file cannot be made
        return True
    return lock_taken(os.path.join(qdir, STANDBY_LOCK)) is False


#: Where the Epilog leaves a job it found no usable spool for (both spools full or read-only):
#: ``<paths.log_dir>/no-spool-jobs/<job>-r<restart>-<node>.json``, the arguments of that job's
#: spool-less finalizer (``hooks finalize-env``), which removes it when done. One left behind (that
#: finalizer killed) is run again by the node finalizer's sweep, or by ``collect``
#: (:func:`slurm_energy.slurm.collect.finish_no_spool`). Root-only, like the spool.
NO_SPOOL_JOBS = "no-spool-jobs"


def no_spool_entry(log_dir: str, job_id: str, restart_count: int, node: str) -> str:
    """The path of a spool-less job's entry (:data:`NO_SPOOL_JOBS`; not created)."""
    return os.path.join(log_dir, NO_SPOOL_JOBS, f"{job_id}-r{int(restart_count)}-{node.replace('/', '_')}.json")


def leave_no_spool_entry(log_dir: str, job_id: str, restart_count: int, node: str, argv: list[str]) -> str:
    """Write a spool-less job's entry: ``{"argv": the finalizer's arguments after finalize-env}``.
    Returns its path. Raises OSError (the log directory full or read-only too: ``collect``'s sacct
    step is left)."""
    path = no_spool_entry(log_dir, job_id, restart_count, node)
    _mkdir_private(os.path.dirname(path))
    write_private(path, json.dumps({"argv": argv}))
    return path


#: a temp file older than this (s) belongs to a writer that was killed: see :func:`remove_stale_tmp`
STALE_TMP_S = 600.0


def remove_stale_tmp(job_dir: str, now: float, older_than_s: float = STALE_TMP_S) -> list[str]:
    """Remove ``*.tmp<pid>`` files in one job directory whose mtime is ``older_than_s`` before
    ``now`` (epoch s): a writer killed between create and rename. Returns the removed paths."""
    out: list[str] = []
    try:
        names = os.listdir(job_dir)
    except OSError:
        return out
    for n in names:
        base, sep, pid = n.rpartition(".tmp")
        if not sep or not base or not pid.isdigit():
            continue
        p = os.path.join(job_dir, n)
        try:
            if now - os.lstat(p).st_mtime >= older_than_s:
                os.unlink(p)
                out.append(p)
        except OSError:
            pass
    return out


def read_json(path: str) -> dict:
    """The JSON object in ``path``; {} when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _same_run(ctx: dict, run: dict | None) -> bool | None:
    """Does a spool's context describe ``run`` (the hook's SLUID / Slurm start time / node list)?
    None when neither side names a SLUID or start time to compare."""
    if not run:
        return None
    for key in ("sluid", "slurm_start_time"):
        if run.get(key) and ctx.get(key):
            return run[key] == ctx[key]
    if run.get("nodelist") and ctx.get("nodelist") and run["nodelist"] != ctx["nodelist"]:
        return False  # another node set: another run of this job id
    return None


def _job_spools(spool_dir: str, job_id: str, node: str) -> list[JobSpool]:
    try:
        names = os.listdir(os.path.join(spool_dir, "jobs"))
    except OSError:
        return []
    out = []
    for name in names:
        m = _DIR_RE.match(name)
        if m and m.group(1) == job_id:
            out.append(JobSpool(spool_dir, job_id, int(m.group(2)), node, m.group(3) or ""))
    return out


def new_run(spool_dir: str, job_id: str, restart_count: int, node: str, run: dict, tag: str) -> JobSpool:
    """The spool for a run a Prolog starts: ``<job_id>-r<n>`` if free (or holding this very run,
    as a retried Prolog), else ``<job_id>-r<n>-<tag>``: a job id Slurm reused (state reset, MaxJobId
    wrap) never writes into an older run's files. ``run`` = {"sluid", "slurm_start_time",
    "nodelist"} of this run; ``tag`` a name part unique to it (the SLUID, else the start time)."""
    plain = JobSpool(spool_dir, job_id, restart_count, node)
    if not os.path.exists(plain.dir):
        return plain
    ctx = read_json(plain.context)
    if not ctx or (_same_run(ctx, run) is True and not os.path.exists(plain.done)):
        return plain
    return JobSpool(spool_dir, job_id, restart_count, node, re.sub(r"[^A-Za-z0-9_]", "_", tag)[:64])


def find_attempt(spool_dir: str, job_id: str, node: str, restart_count: int,
                 run: dict | None = None) -> JobSpool:
    """The attempt (run) an Epilog belongs to.

    A requeued job's Epilog for attempt k may already see SLURM_JOB_RESTART_COUNT = k + 1, so the
    attempt is one this node's Prolog started (context file present) whose Epilog has not run yet:
    the given restart count if it qualifies, else the newest such attempt below it. Of several runs
    of one job id (a reused id), the one whose context matches ``run`` (SLUID, Slurm start time,
    node list: see :func:`new_run`) wins, else the newest Prolog. Falls back to the given restart
    count (a job whose Prolog never ran).
    """
    want = JobSpool(spool_dir, job_id, restart_count, node)
    pending = []
    for sp in _job_spools(spool_dir, job_id, node):
        if os.path.exists(sp.context) and not os.path.exists(sp.done):
            ctx = read_json(sp.context)
            if _same_run(ctx, run) is not False:
                pending.append((sp.restart_count, float(ctx.get("prolog_time") or 0.0), sp))
    same = [p for p in pending if p[0] == restart_count]
    older = [p for p in pending if p[0] < restart_count]
    pick = same or older
    if not pick:
        return want
    return max(pick, key=lambda p: (p[0], p[1]))[2]


def spool_dirs(cfg) -> list[str]:
    """The spool, then the fallback spool (``paths.spool_fallback_dir``), without duplicates."""
    return list(dict.fromkeys(d for d in (cfg.paths.spool_dir, getattr(cfg.paths, "spool_fallback_dir", "")) if d))


def usable_spool(cfg, ctx, errors: list[str], epilog: bool = False) -> JobSpool | None:
    """Where this attempt's files go on this node, or None when no spool can be written.

    Epilog: the spool holding the Prolog's context (spool, then fallback; a requeued job's Epilog
    may carry the next attempt's restart count: :func:`find_attempt`). Otherwise (and when no
    context exists) the first spool in which the context file can be written: a full (ENOSPC) or
    read-only (EROFS) spool falls back to the next, and why is appended to ``errors``.
    """
    run = {"sluid": ctx.sluid, "slurm_start_time": ctx.slurm_start_time, "nodelist": ctx.nodelist}
    tag = ctx.sluid or f"t{ctx.slurm_start_time or int(time.time())}"  # a reused job id's later run
    if epilog:
        for d in spool_dirs(cfg):
            sp = find_attempt(d, ctx.job_id, ctx.node, ctx.restart_count, run)
            if os.path.exists(sp.context) and not (os.path.exists(sp.done) and _same_run(read_json(sp.context), run) is False):
                return sp
    for d in spool_dirs(cfg):
        sp = new_run(d, ctx.job_id, ctx.restart_count, ctx.node, run, tag)  # never an older run's files
        try:
            sp.ensure()
            write_private(sp.context, ctx.to_json())
            return sp
        except OSError as e:
            errors.append(f"spool {d} unusable: {type(e).__name__}: {e}")
    return None


def entries(qdir: str, older_than: float = float("inf")) -> list[str]:
    """Paths of the queue's entries, oldest first (lock files, logs and temp files left out); with
    ``older_than`` (epoch s), those last changed before it only."""
    try:
        with os.scandir(qdir) as it:
            found = [(e.stat().st_mtime, e.path) for e in it
                     if not e.name.startswith(".") and ".tmp" not in e.name and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return [p for t, p in sorted(found) if t <= older_than]

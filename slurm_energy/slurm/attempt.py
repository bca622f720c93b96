"""A job attempt's life on this host: the root-only spool, one directory per attempt, files per node.

The only module that knows the spool's file names: everything else reads an attempt through
:class:`Attempt` and lists attempts through :class:`Journal`. Stdlib only (the Prolog/Epilog import
it: no typing or dataclasses at run time).

Layout (``spool_dir`` from the site config, default /var/spool/slurm-energy, mode 0700)::

    jobs/<job_id>-r<restart_count>/      0700, one per attempt (a requeued job gets a new one);
                                         <job_id>-r<n>-<tag>/ for a later run of a reused job id
        context-<node>.json              the Prolog's JobContext                    (state STARTED)
        static-<node>.json               the sampler's device inventory (device info collector)
        samples-<node>.jsonl             the sample file
        sampler-<node>.pid               the detached sampler's PID
        errors-<node>.jsonl              hook failures recorded on the job (one JSON string a line)
        jobenv-<node>.json               job name and SLURM_UMASK read from the job's processes (never identity)
        epilog-<node>.done               this node's Epilog has run for this attempt (JSON: t, sampler, exit_code;
                                         :class:`EpilogFacts`)                      (state EPILOG_DONE)
        finalized-<node>.done            this node's finalizer has written its record (state FINALIZED)
        prolog-raw-<node>.json           the Prolog's counter files, until its sampler wrote their row
    prolog-files-<node>.json             the counter files a Prolog reads on this node (slurm/prolograw.py)
    finalize-queue/<node>/<run dir name> the attempt handed to the node's finalizer (state QUEUED)

An attempt whose directory is gone (pruned) is RETIRED. An attempt with no spool at all (both
spools full or read-only) is :meth:`Attempt.without_spool`: it reads nothing and writes nothing.
"""

from __future__ import annotations

import enum
import json
import os
import re
import time

from slurm_energy.fileio import atomic_write
from slurm_energy.jobmeta import RunKey, same_run

TYPE_CHECKING = False  # typing is not imported on the hooks' path
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Protocol

    class _Context(Protocol):  # what the spool needs of a job context (JobContext, the hooks' JobFacts)
        @property
        def job_id(self) -> str: ...
        @property
        def restart_count(self) -> int: ...
        @property
        def node(self) -> str: ...

    class _HookContext(_Context, Protocol):  # what a hook's run needs of it (usable_spool)
        @property
        def sluid(self) -> str: ...
        @property
        def slurm_start_time(self) -> float | None: ...
        @property
        def nodelist(self) -> str: ...
        def to_json(self) -> str: ...

    class _Paths(Protocol):
        @property
        def spool_dir(self) -> str: ...

    class _Config(Protocol):
        @property
        def paths(self) -> _Paths: ...


class SamplerEnd(str, enum.Enum):
    """How a job's sampler ended, as the Epilog (or whoever stopped it) saw it; written into
    ``epilog-<node>.done`` and the finalizer's queue entry as its value."""

    TERMINATED = "terminated"  #: stopped by SIGTERM (the normal end)
    KILLED = "killed"  #: ignored SIGTERM, stopped by SIGKILL
    UNKILLABLE = "unkillable"  #: still running after SIGKILL (stuck in D state)
    NOT_RUNNING = "not_running"  #: its PID was gone, or reused by another process (never signalled)
    TIMED_OUT = "timed_out"  #: the node sampler did not write the job's last row within the Epilog's wait
    NO_PIDFILE = "no_pidfile"  #: no pidfile and no sampler of this attempt in /proc
    EPILOG_MISSING = "epilog_missing"  #: the sampler saw the job end and no Epilog came
    NO_EPILOG = "no_epilog"  #: recovery found no Epilog's facts for the attempt
    STOPPED_EARLY = "stopped_early"  #: its ``final`` row came before the Epilog: stopped, the job not

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, text: object, default: SamplerEnd) -> SamplerEnd:
        """The member named by ``text`` (a queue entry's or marker's field), else ``default``."""
        try:
            return cls(str(text)) if text else default
        except ValueError:
            return default


#: how a node's sampler may end with its last sample written: stopped by the Epilog (TERM), or by
#: itself once the job was gone and no Epilog came (``epilog_missing``)
CLEAN_SAMPLER_ENDS = (SamplerEnd.TERMINATED, SamplerEnd.EPILOG_MISSING)
#: the ends where no sampler was signalled (nothing to say about stopping one)
NOT_STOPPED = (SamplerEnd.NO_PIDFILE, SamplerEnd.NOT_RUNNING)


class AttemptState(enum.Enum):
    """Where one node's attempt is in its life (:meth:`Attempt.state`)."""

    STARTED = "started"  #: the Prolog wrote its context (or the Epilog found none: no Prolog)
    EPILOG_DONE = "epilog_done"  #: the Epilog (or the sampler without one) wrote its facts
    QUEUED = "queued"  #: handed to the node's finalizer queue, not yet finalized
    FINALIZED = "finalized"  #: the node's finalizer wrote its record
    RETIRED = "retired"  #: the attempt's directory is gone (pruned), or it never had one


class EpilogFacts:
    """What the Epilog left in ``epilog-<node>.done``: the job's end (epoch s), how its sampler
    ended, the job's exit code. ``present`` False: no Epilog ran (or wrote nothing readable)."""

    __slots__ = ("exit_code", "present", "sampler", "t")

    def __init__(self, t: float | None = None, sampler: SamplerEnd | None = None, exit_code: str = "",
                 present: bool = True) -> None:
        self.t = t
        self.sampler = sampler
        self.exit_code = exit_code
        self.present = present

    @classmethod
    def parse(cls, text: str) -> EpilogFacts:
        """From the marker's text: JSON {"t", "sampler", "exit_code"}, or a plain number (older files)."""
        try:
            v = json.loads(text)
        except ValueError:
            return cls(present=False)
        if not isinstance(v, dict):
            try:
                return cls(t=float(v))
            except (TypeError, ValueError):
                return cls(present=False)
        t = v.get("t")
        return cls(t=float(t) if isinstance(t, (int, float)) and t else None,
                   sampler=SamplerEnd.parse(v.get("sampler"), SamplerEnd.NO_EPILOG) if v.get("sampler") else None,
                   exit_code=str(v.get("exit_code") or ""))

    def to_json(self) -> str:
        return json.dumps({"t": self.t, "sampler": str(self.sampler) if self.sampler else "",
                           "exit_code": self.exit_code})

    def __bool__(self) -> bool:
        return self.present

    def __repr__(self) -> str:
        return f"EpilogFacts(t={self.t!r}, sampler={self.sampler!r}, exit_code={self.exit_code!r}, present={self.present})"


def mkdir_private(path: str) -> None:
    """Make ``path`` (and its parents) a root-only spool directory, 0700; refuse a symlink or a
    directory another user owns (OSError, naming the fix)."""
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


class Attempt:
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
        self.name = f"{job_id}-r{int(restart_count)}" + (f"-{tag}" if tag else "")
        #: "" for an attempt without a spool (:meth:`without_spool`): every path is "" then
        self.dir = os.path.join(spool_dir, JOBS, self.name) if spool_dir else ""

    @classmethod
    def without_spool(cls, ctx: _Context) -> Attempt:
        """The attempt of a job whose node had no usable spool (both spools full or read-only): it
        has no files (every path is "", nothing is read or written), only the job's identity."""
        return cls("", ctx.job_id, ctx.restart_count, ctx.node)

    @property
    def has_spool(self) -> bool:
        return bool(self.dir)

    def __repr__(self) -> str:
        return f"Attempt({self.dir or 'no spool'!r}, node={self.node!r})"

    @classmethod
    def from_dir(cls, job_dir: str, node: str) -> Attempt:
        """The spool of an existing job directory (as passed to the sampler and finalizer).

        Raises ValueError if the directory's name is not ``<job_id>-r<n>[-<tag>]``."""
        job_dir = job_dir.rstrip("/")
        m = _DIR_RE.match(os.path.basename(job_dir))
        if not m:
            raise ValueError(f"{job_dir}: not a job spool directory (<job_id>-r<restart>[-<tag>])")
        return cls(os.path.dirname(os.path.dirname(job_dir)), m.group(1), int(m.group(2)), node, m.group(3) or "")

    def ensure(self) -> Attempt:
        """Create the spool and job directories (0700). Raises OSError."""
        if not self.dir:
            raise OSError(f"job {self.job_id} on {self.node}: no spool")
        mkdir_private(self.spool_dir)
        mkdir_private(os.path.join(self.spool_dir, JOBS))
        mkdir_private(self.dir)
        return self

    def path(self, kind: str, ext: str = "json") -> str:
        return os.path.join(self.dir, f"{kind}-{self.node}.{ext}") if self.dir else ""

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

    def epilog(self) -> EpilogFacts:
        """What the Epilog left in ``epilog-<node>.done`` (``present`` False when it did not run)."""
        try:
            with open(self.done, encoding="utf-8") as f:
                text = f.read().strip()
        except OSError:
            return EpilogFacts(present=False)
        return EpilogFacts.parse(text)

    def mark_epilog(self, t: float, sampler: SamplerEnd, exit_code: str) -> None:
        """Write this node's Epilog facts (the Epilog, or the sampler that saw none). Raises OSError."""
        write_private(self.done, EpilogFacts(t, sampler, exit_code).to_json())

    def epilog_done(self) -> bool:
        return os.path.exists(self.done)

    def mark_finalized(self, now: float) -> None:
        """This node's record is written: ``collect`` and the sweep leave the attempt. Raises OSError."""
        write_private(self.finalized, repr(now))

    def is_finalized(self) -> bool:
        return os.path.exists(self.finalized)

    def has_context(self) -> bool:
        return os.path.exists(self.context)

    def has_prolog(self) -> bool:
        """True if the context in the spool was written by the Prolog (it sets prolog_time)."""
        return bool(read_json(self.context).get("prolog_time"))

    def context_json(self) -> str:
        """The context file's text. Raises OSError."""
        with open(self.context, encoding="utf-8") as f:
            return f.read()

    def newest_mtime(self) -> float:
        """The newest mtime (epoch s) of the attempt directory's files; 0.0 when none."""
        try:
            return max(os.lstat(os.path.join(self.dir, n)).st_mtime for n in os.listdir(self.dir))
        except (OSError, ValueError):
            return 0.0

    def queue_entry(self) -> str:
        """Where this attempt waits in its node's finalizer queue (:func:`enqueue_finalize`)."""
        return os.path.join(finalize_queue_dir(self.spool_dir, self.node), self.name) if self.dir else ""

    def state(self) -> AttemptState:
        """Where this node's attempt is in its life, from its files (the newest state wins)."""
        if not self.dir or not os.path.isdir(self.dir):
            return AttemptState.RETIRED
        if self.is_finalized():
            return AttemptState.FINALIZED
        if os.path.exists(self.queue_entry()):
            return AttemptState.QUEUED
        if self.epilog_done():
            return AttemptState.EPILOG_DONE
        return AttemptState.STARTED

    @property
    def errors(self) -> str:
        return self.path("errors", "jsonl")

    def record_error(self, msg: str) -> None:
        """Append a failure to the job's errors file (never raises)."""
        if not self.dir:
            return
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


#: the spool's directory of attempts
JOBS = "jobs"

# The node sampler's files (slurm/sampler_join.py is their protocol, slurm/sampler/node.py the
# sampler): in the spool, one set per node; in an attempt's directory, one set per node it runs on.
NODE_SAMPLER_LOCK = "node-sampler-{node}.lock"
NODE_SAMPLER_PIDFILE = "node-sampler-{node}.pid"
NODE_SAMPLER_STARTING = "node-sampler-{node}.starting"
NODE_SAMPLER_BEAT = "node-sampler-{node}.beat"
NODE_SAMPLER_LOG = "node-sampler.log"
NODE_SAMPLER_JOIN = "nodesampler-{node}.join"
NODE_SAMPLER_STOP = "nodesampler-{node}.stop"
NODE_SAMPLER_CLAIM = "nodesampler-{node}.claim"
NODE_SAMPLER_ENDED = "nodesampler-{node}.ended"


class RunDir:
    """One attempt directory in a spool, ``jobs/<job_id>-r<restart>[-<tag>]`` (every node's files)."""

    __slots__ = ("job_id", "path", "restart_count", "spool_dir", "tag")

    def __init__(self, spool_dir: str, job_id: str, restart_count: int, tag: str) -> None:
        self.spool_dir, self.job_id, self.restart_count, self.tag = spool_dir, job_id, restart_count, tag
        self.path = Attempt(spool_dir, job_id, restart_count, "", tag).dir

    def nodes(self) -> list[str]:
        """The nodes whose Prolog (or Epilog without one) wrote a context here, sorted."""
        try:
            names = os.listdir(self.path)
        except OSError:
            return []
        return sorted(f[len("context-"):-len(".json")] for f in names
                      if f.startswith("context-") and f.endswith(".json") and len(f) > len("context-.json"))

    def attempt(self, node: str) -> Attempt:
        return Attempt(self.spool_dir, self.job_id, self.restart_count, node, self.tag)

    def attempts(self) -> list[Attempt]:
        return [self.attempt(n) for n in self.nodes()]

    def newest_mtime(self) -> float:
        return Attempt(self.spool_dir, self.job_id, self.restart_count, "", self.tag).newest_mtime()


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


class Journal:
    """The attempts in the spools (the spool, then the fallback spool): the only lister of ``jobs/``."""

    def __init__(self, spool_dirs: list[str] | tuple[str, ...]) -> None:
        self.spool_dirs = list(dict.fromkeys(d for d in spool_dirs if d))

    def runs(self, job_id: str | None = None) -> Iterator[RunDir]:
        """Every attempt directory (a name that is not ``<job_id>-r<n>[-<tag>]`` is not one), by
        name, of ``job_id`` only when given."""
        for sd in self.spool_dirs:
            jobs = os.path.join(sd, JOBS)
            try:
                names = sorted(os.listdir(jobs))
            except OSError:
                continue
            for name in names:
                m = _DIR_RE.match(name)
                if not m or (job_id is not None and m.group(1) != job_id):
                    continue
                if os.path.isdir(os.path.join(jobs, name)) and not os.path.islink(os.path.join(jobs, name)):
                    yield RunDir(sd, m.group(1), int(m.group(2)), m.group(3) or "")

    def attempts(self, node: str | None = None, since: float = 0.0, job_id: str | None = None) -> Iterator[Attempt]:
        """Each node attempt with a context file, of ``node`` and ``job_id`` only when given.
        ``since`` (epoch s): an attempt directory last changed (a file created or renamed in it)
        before it is not looked into, unless ``node``'s samples file changed since (a long job's
        sampler appends to it, which leaves the directory's mtime)."""
        for run in self.runs(job_id):
            if since and _mtime(run.path) < since and (
                    node is None or _mtime(run.attempt(node).samples) < since):
                continue
            if node is not None:
                a = run.attempt(node)
                if a.has_context():
                    yield a
                continue
            yield from run.attempts()

    def joined(self, node: str) -> list[str]:
        """The attempt directories (paths) that ``node``'s node sampler is asked to sample: those
        holding its join file (:data:`NODE_SAMPLER_JOIN`), by name."""
        name = NODE_SAMPLER_JOIN.format(node=node)
        return [run.path for run in self.runs() if os.path.exists(os.path.join(run.path, name))]

    def unfinished_jobs(self) -> set[str]:
        """Job ids with an attempt that a node has not finalized (a context without its finalized
        marker, or no context yet: a Prolog at work). Root's own files only: no time or file a
        user can set counts."""
        out: set[str] = set()
        for run in self.runs():
            atts = run.attempts()
            if not atts or any(not a.is_finalized() for a in atts):
                out.add(run.job_id)
        return out


def unfinished_jobs(spools: list[str]) -> set[str]:
    """:meth:`Journal.unfinished_jobs` of ``spools``."""
    return Journal(spools).unfinished_jobs()


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (tmp + rename), mode 0600
    (:func:`slurm_energy.fileio.atomic_write`). Raises OSError (ENOSPC, EROFS...), leaving no temp
    file behind; one left by a killed writer (``<name>.tmp<pid>``) is reused by the next writer
    with that PID and removed by :func:`remove_stale_tmp`."""
    atomic_write(path, text, mode=0o600)


#: The node's queue of finished jobs for its finalizer (:mod:`slurm_energy.slurm.jobend.queue`):
#: ``<spool>/finalize-queue/<node>/``, one entry per job attempt the Epilog (or a sampler that saw
#: no Epilog) handed over, removed once the attempt is finalized. Root-only, like the spool.
FINALIZE_QUEUE = "finalize-queue"
#: In the queue directory: the flock of the one runner working it, of the one standby waiting for
#: it, and the runner's own log (its start-up, one CPU line per process).
RUNNER_LOCK, STANDBY_LOCK, RUNNER_LOG = ".runner.lock", ".standby.lock", ".runner.log"


def finalize_queue_dir(spool_dir: str, node: str) -> str:
    """The queue directory of ``node``'s finalizer in ``spool_dir`` (not created)."""
    return os.path.join(spool_dir, FINALIZE_QUEUE, node)


def enqueue_finalize(sp: Attempt, t_end: float, exit_code: str, sampler: SamplerEnd) -> str:
    """Queue this attempt for its node's finalizer: ``<queue>/<run dir name>`` holding
    ``{"dir", "node", "t", "exit_code", "sampler", "attempts": 0}`` (``t``: the job's end, epoch s;
    ``sampler``: what the Epilog saw, :func:`slurm_energy.slurm.detach.stop_process`). Returns the
    queue directory. Raises OSError (a full or read-only spool: the caller starts a finalizer for
    this job alone, as before the queue)."""
    q = finalize_queue_dir(sp.spool_dir, sp.node)
    mkdir_private(os.path.dirname(q))
    mkdir_private(q)
    write_private(os.path.join(q, os.path.basename(sp.dir)), json.dumps(
        {"dir": sp.dir, "node": sp.node, "t": t_end, "exit_code": exit_code, "sampler": str(sampler), "attempts": 0}))
    return q


def needs_runner(qdir: str) -> bool:
    """True when the caller (the Epilog, after queueing its job) must start the node's finalizer
    (:mod:`slurm_energy.slurm.jobend.queue`): no runner holds ``qdir``'s lock, or one does but
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
#: (:func:`slurm_energy.slurm.jobend.recover.finish_no_spool`). Root-only, like the spool.
NO_SPOOL_JOBS = "no-spool-jobs"


def no_spool_entry(log_dir: str, job_id: str, restart_count: int, node: str) -> str:
    """The path of a spool-less job's entry (:data:`NO_SPOOL_JOBS`; not created)."""
    return os.path.join(log_dir, NO_SPOOL_JOBS, f"{job_id}-r{int(restart_count)}-{node.replace('/', '_')}.json")


def leave_no_spool_entry(log_dir: str, job_id: str, restart_count: int, node: str, argv: list[str]) -> str:
    """Write a spool-less job's entry: ``{"argv": the finalizer's arguments after finalize-env}``.
    Returns its path. Raises OSError (the log directory full or read-only too: ``collect``'s sacct
    step is left)."""
    path = no_spool_entry(log_dir, job_id, restart_count, node)
    mkdir_private(os.path.dirname(path))
    write_private(path, json.dumps({"argv": argv}))
    return path


def no_spool_entries(log_dir: str, node: str | None = None) -> list[str]:
    """Paths of the spool-less jobs' entries (:data:`NO_SPOOL_JOBS`) of ``node`` (None: every
    node's), by name."""
    d = os.path.join(log_dir, NO_SPOOL_JOBS)
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    tail = f"-{node.replace('/', '_')}.json" if node else ".json"
    return [os.path.join(d, n) for n in names if n.endswith(tail)]


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


def read_json(path: str) -> dict[str, Any]:
    """The JSON object in ``path``; {} when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _same_run(ctx: dict[str, object], run: RunKey | None) -> bool | None:
    """Does a spool's context describe ``run`` (the hook's SLUID / Slurm start time / node list)?
    The one run rule (:func:`slurm_energy.jobmeta.same_run`); the restart count is not compared
    (a requeued job's Epilog may carry the next attempt's: :func:`find_attempt`), nor the times (a
    hook's run has none yet). None when neither side names a SLUID or start time to compare."""
    if run is None or not ctx:
        return None
    mine = RunKey.of_context(ctx, restart=False)
    mine.start = None
    return same_run(mine, run)


def new_run(spool_dir: str, job_id: str, restart_count: int, node: str, run: RunKey, tag: str) -> Attempt:
    """The spool for a run a Prolog starts: ``<job_id>-r<n>`` if free (or holding this very run,
    as a retried Prolog), else ``<job_id>-r<n>-<tag>``: a job id Slurm reused (state reset, MaxJobId
    wrap) never writes into an older run's files. ``run``: this run's
    :class:`~slurm_energy.jobmeta.RunKey` (SLUID, Slurm start time, node list); ``tag`` a name
    part unique to it (the SLUID, else the start time)."""
    plain = Attempt(spool_dir, job_id, restart_count, node)
    if not os.path.exists(plain.dir):
        return plain
    ctx = read_json(plain.context)
    if not ctx or (_same_run(ctx, run) is True and not os.path.exists(plain.done)):
        return plain
    return Attempt(spool_dir, job_id, restart_count, node, re.sub(r"[^A-Za-z0-9_]", "_", tag)[:64])


def find_attempt(spool_dir: str, job_id: str, node: str, restart_count: int,
                 run: RunKey | None = None) -> Attempt:
    """The attempt (run) an Epilog belongs to.

    A requeued job's Epilog for attempt k may already see SLURM_JOB_RESTART_COUNT = k + 1, so the
    attempt is one this node's Prolog started (context file present) whose Epilog has not run yet:
    the given restart count if it qualifies, else the newest such attempt below it. Of several runs
    of one job id (a reused id), the one whose context matches ``run`` (SLUID, Slurm start time,
    node list: see :func:`new_run`) wins, else the newest Prolog. Falls back to the given restart
    count (a job whose Prolog never ran).
    """
    want = Attempt(spool_dir, job_id, restart_count, node)
    pending = []
    for sp in Journal([spool_dir]).attempts(node=node, job_id=job_id):
        if not sp.epilog_done():
            ctx = read_json(sp.context)
            if _same_run(ctx, run) is not False:
                pending.append((sp.restart_count, float(ctx.get("prolog_time") or 0.0), sp))
    same = [p for p in pending if p[0] == restart_count]
    older = [p for p in pending if p[0] < restart_count]
    pick = same or older
    if not pick:
        return want
    return max(pick, key=lambda p: (p[0], p[1]))[2]


def spool_dirs(cfg: _Config) -> list[str]:
    """The spool, then the fallback spool (``paths.spool_fallback_dir``), without duplicates."""
    return list(dict.fromkeys(d for d in (cfg.paths.spool_dir, getattr(cfg.paths, "spool_fallback_dir", "")) if d))


def usable_spool(cfg: _Config, ctx: _HookContext, errors: list[str], epilog: bool = False) -> Attempt | None:
    """Where this attempt's files go on this node, or None when no spool can be written.

    Epilog: the spool holding the Prolog's context (spool, then fallback; a requeued job's Epilog
    may carry the next attempt's restart count: :func:`find_attempt`). Otherwise (and when no
    context exists) the first spool in which the context file can be written: a full (ENOSPC) or
    read-only (EROFS) spool falls back to the next, and why is appended to ``errors``.
    """
    run = RunKey(ctx.job_id, sluid=ctx.sluid, slurm_start_time=ctx.slurm_start_time,
                 nodes=(str(ctx.nodelist),) if ctx.nodelist else None)
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

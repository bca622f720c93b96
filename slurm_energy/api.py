"""``slurm_energy.track``: measure from inside the training script, per phase and stage.

::

    from slurm_energy import track

    with track(label="bert-small") as t:
        t.tag(model_params=110e6, tokens=2e9, flops=1.32e18)   # 6 N D = 6 x 110e6 x 2e9
        for epoch in range(3):
            with t.phase(f"epoch {epoch}"):
                train_one_epoch()
            t.stage((epoch + 1) / 3)          # energy so far at 33 %, 67 %, 100 % of training
        print(t.result().it_kwh)             # energy so far (final after the block)

    @track(label="eval")                     # as a decorator: one measurement per call
    def evaluate(): ...

Where it runs decides what it does (chosen when the block starts):

* **Inside a Slurm job the Prolog samples** (``SLURM_JOB_ID`` set and the job's marks directory
  made by the Prolog exists, :mod:`slurm_energy.sampling.marks`): no second sampler. Phase, stage
  and tag marks (names, times, numbers) are appended to that directory as the job's user; the
  node's finalizer reads them as data and the job's one record gets per-phase and per-stage energy.
* **Anywhere else** (a laptop, a Slurm cluster without the hooks): the same sampler as
  ``slurm-energy run`` in a child process over this process and its children
  (:class:`slurm_energy.pipeline.LocalMeasurement`), and the same HTML/CSV report
  (``energy-<label>.html``/``.csv`` in ``out``) when the block ends.
* **Other ranks** (``LOCAL_RANK``, else ``SLURM_LOCALID``, not 0: torchrun, ``srun -n``): every
  call is a cheap no-op; local rank 0 measures the node (no double counting).

A ``track`` started while another is active in this process becomes a phase of it (no second
sampler). Importing :mod:`slurm_energy` stays light: nothing heavy is imported before a block starts.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sys
import threading
import time
import warnings
from typing import Any, Callable, Optional

from slurm_energy.api_result import ClassResult, Result, from_store

__all__ = ["track", "current", "Tracker", "Phase", "Result", "ClassResult", "local_rank"]

#: Tag keys the prediction uses (issue 13 item 5, docs/CONTRACTS.md); other tags are kept too.
KNOWN_TAGS = ("flops", "model_params", "tokens", "precision")

_ids = itertools.count(1)
_active: list["Tracker"] = []
_lock = threading.Lock()


def local_rank(env=None) -> int:
    """This process's rank on its node: ``LOCAL_RANK`` (torchrun), else ``SLURM_LOCALID`` (srun),
    else 0. An unparsable value counts as 0 (measure rather than silently not)."""
    env = os.environ if env is None else env
    for var in ("LOCAL_RANK", "SLURM_LOCALID"):
        v = env.get(var, "")
        if v.strip():
            try:
                return int(v)
            except ValueError:
                return 0
    return 0


def slurm_marks_path(env=None) -> Optional[str]:
    """The marks file this job's Prolog prepared for this node, or None (not in a sampled job):
    ``<marks root>/<SLURM_JOB_ID>/marks-<SLURMD_NODENAME>.jsonl`` when that directory exists and
    this user may write it."""
    from slurm_energy.sampling.marks import job_marks_dir, marks_file_name, marks_root

    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID", "")
    if not job:
        return None
    try:
        d = job_marks_dir(job, env.get("SLURM_ENERGY_MARKS_DIR") or marks_root())
    except ValueError:
        return None
    if not (os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)):
        return None
    import socket

    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return os.path.join(d, marks_file_name(node))


class Phase:
    """A named window, begun when created; ends at :meth:`end` or when its ``with`` block exits."""

    def __init__(self, tracker: "Tracker", name: str):
        self.name = name
        self._tracker = tracker
        self._id = next(_ids)
        self._open = tracker._write("begin", id=self._id, name=name)

    def end(self) -> None:
        """End the phase (idempotent)."""
        if self._open:
            self._open = False
            self._tracker._write("end", id=self._id)

    def __enter__(self) -> "Phase":
        return self

    def __exit__(self, *exc) -> None:
        self.end()


class Tracker:
    """One measurement (see the module doc). Use through :func:`track`."""

    def __init__(self, label: Optional[str] = None, *, out: str = ".", interval_s: Optional[float] = None,
                 config: Optional[str] = None, report: bool = True, partition: str = ""):
        self.label = label or _default_label()
        self.out, self.interval_s, self.config, self.report, self.partition = out, interval_s, config, report, partition
        self.mode = ""  # "local" | "slurm" | "noop" | "phase" once started
        self.record = None  # the final JobRecord (local mode), after the block
        self.report_paths: tuple[str, ...] = ()
        self._writer = None
        self._measure = None
        self._parent: Optional[Tracker] = None
        self._outer_phase: Optional[Phase] = None
        self._open_phases: dict[int, str] = {}
        self._tags: dict = {}
        self._stopped = False

    # -------------------------------------------------------------- life cycle
    def start(self) -> "Tracker":
        """Begin measuring (see the module doc for the mode chosen). Returns self."""
        with _lock:
            parent = _active[-1] if _active else None
            _active.append(self)
        if parent is not None and parent.mode != "noop":
            self.mode, self._parent = "phase", parent
            self._outer_phase = parent.phase(self.label)
            return self
        if local_rank() != 0:
            self.mode = "noop"
            return self
        from slurm_energy.sampling.marks import MarksWriter

        path = slurm_marks_path()
        if path is not None:
            try:
                self._writer, self.mode = MarksWriter(path), "slurm"
                return self
            except OSError as e:
                warnings.warn(f"slurm_energy.track: cannot write marks to {path} ({e}); measuring here instead",
                              stacklevel=3)
        self._start_local()
        return self

    def _start_local(self) -> None:
        from slurm_energy.config import ConfigError, load_site_config
        from slurm_energy.pipeline import LocalMeasurement
        from slurm_energy.sampling.local import visible_gpus
        from slurm_energy.sampling.marks import MarksWriter

        try:
            cfg = load_site_config(self.config)
        except ConfigError as e:
            raise ValueError(f"slurm_energy.track: site config: {e}") from None
        self._measure = LocalMeasurement(cfg, None, self.label, visible_gpus(), interval_s=self.interval_s,
                                         partition=self.partition, work_dir=self.out, child_of=os.getpid()).start()
        self._writer = MarksWriter(os.path.join(self._measure.dir, "marks.jsonl"))
        self.mode = "local"

    def stop(self):
        """End the measurement; in local mode summarise and write the report. Returns the final
        JobRecord in local mode, else None. A phase never closed is warned about and counted to
        the end (flag ``never_closed``)."""
        if self._stopped:
            return self.record
        self._stopped = True
        with _lock:
            if self in _active:
                _active.remove(self)
        if self.mode == "phase":
            self._outer_phase.end()
            return None
        if self._open_phases:
            warnings.warn("slurm_energy.track: phases never closed, counted to the end: "
                          + ", ".join(repr(n) for n in self._open_phases.values()), stacklevel=3)
        if self._writer is not None:
            self._writer.close()
        if self.mode == "local":
            self._measure.stop()
            self.record = self._measure.record(self._marks(), self._tags)
            self._measure.cleanup()
            self._write_report()
        return self.record

    def _write_report(self) -> None:
        if not self.report:
            return
        from slurm_energy.reporting.report import ReportWriteError, write_reports

        try:
            self.report_paths = write_reports(self.record, os.path.abspath(self.out), os.getuid(), os.getgid())
            print(f"slurm-energy: report {self.report_paths[0]}", file=sys.stderr)
        except (ReportWriteError, ValueError) as e:
            print(f"slurm-energy: report not (fully) written: {e}", file=sys.stderr)

    def _marks(self):
        from slurm_energy.accounting.phases import parse_marks
        from slurm_energy.sampling.marks import read_marks_file

        lines, flags = read_marks_file(self._measure.dir, "marks.jsonl")
        m = parse_marks(lines)
        m.flags = flags + m.flags
        return m

    def __enter__(self) -> "Tracker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __call__(self, fn: Callable) -> Callable:
        """Decorator: each call of ``fn`` is measured by a fresh tracker with these settings."""
        settings = dict(label=self.label, out=self.out, interval_s=self.interval_s, config=self.config,
                        report=self.report, partition=self.partition)

        @functools.wraps(fn)
        def wrapper(*a, **kw):
            with Tracker(**settings):
                return fn(*a, **kw)

        return wrapper

    # -------------------------------------------------------------- marks
    def _write(self, ev: str, **fields) -> bool:
        if self.mode == "phase":
            return self._parent._write(ev, **fields)
        if self._writer is None or self._stopped:
            return False
        try:
            self._writer.write(ev, **fields)
        except OSError as e:  # a full disk must not stop the training
            warnings.warn(f"slurm_energy.track: mark not written ({e})", stacklevel=3)
            return False
        if ev == "begin":
            self._open_phases[fields["id"]] = fields["name"]
        elif ev == "end":
            self._open_phases.pop(fields["id"], None)
        return True

    def phase(self, name: str) -> Phase:
        """Begin a named phase now; use as ``with t.phase("epoch 3"):`` or call ``.end()``.
        Phases may nest or leave gaps; energy outside every phase is reported too."""
        if not isinstance(name, str) or not name.strip():
            warnings.warn(f"slurm_energy.track: phase name {name!r} is not a non-empty string; "
                          "named 'phase' instead", stacklevel=2)
            name = "phase"
        return Phase(self, name)

    def stage(self, fraction: float) -> None:
        """Mark that ``fraction`` (0..1) of the training is done now: the record gets the energy
        from the start to here. A value outside 0..1 (or not a number) is ignored with a warning."""
        try:
            f = float(fraction)
        except (TypeError, ValueError):
            f = math.nan
        if not (0.0 <= f <= 1.0):
            warnings.warn(f"slurm_energy.track: stage({fraction!r}) ignored: give the fraction of training "
                          "done, between 0 and 1 (e.g. 0.6 for 60 %)", stacklevel=2)
            return
        self._write("stage", frac=f)

    def tag(self, **tags) -> None:
        """Record facts about the training for prediction, e.g. ``flops`` (total FLOPs),
        ``model_params``, ``tokens`` (:data:`KNOWN_TAGS`), ``precision="bf16"``; they end up in the
        record's ``tags``. Values are finite numbers or short words (letters, digits, ``_.+-``, at
        most 32); anything else is ignored with a warning."""
        from slurm_energy.accounting.phases import tag_value

        good = {}
        for k, v in tags.items():
            if isinstance(v, bool) or tag_value(v) is None:
                warnings.warn(f"slurm_energy.track: tag {k}={v!r} ignored: tags are finite numbers or short words "
                              "(e.g. precision='bf16')", stacklevel=2)
                continue
            good[k] = v
        if good:
            self._tags.update(good)
            self._write("tag", tags=good)

    # -------------------------------------------------------------- results
    def result(self) -> Result:
        """Energy, CO2e, method and coverage per device class: so far while running, final after.

        Local mode: computed from this process's sample file. Slurm mode: the job's latest record
        in the site's store (interim records are stored every ``sampling.interim_s``), when this
        user can read it; else ``source="unavailable"`` with a note."""
        if self.mode == "phase":
            return self._parent.result()
        if self.mode == "local":
            if self.record is not None:
                return Result.from_record(self.record, True, "local sampler")
            return Result.from_record(self._measure.record(self._marks(), self._tags), False, "local sampler")
        if self.mode == "slurm":
            return from_store(os.environ.get("SLURM_JOB_ID", ""))
        if self.mode == "noop":
            return Result(final=False, source="other rank",
                          note=f"local rank {local_rank()}: local rank 0 of this node measures it")
        return Result(final=False, source="unavailable", note="the tracker has not started")


def _default_label() -> str:
    script = os.path.splitext(os.path.basename(sys.argv[0] or ""))[0] if sys.argv else ""
    script = "".join(ch if ch.isalnum() or ch in "_.+-" else "_" for ch in script)
    return f"{script or 'track'}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


def track(label: Any = None, **kwargs) -> Any:
    """Measure a block, a function or a whole script (see the module doc).

    ``with track(label="x") as t:``, ``@track(label="x")`` or plain ``@track``.

    Args:
        label: the measurement's name (the report is ``energy-<label>.html``); default
            ``<script>-<time>-<pid>``. Inside a Slurm job the record is the job's (its job id).
        out: directory for the report outside Slurm (default ``.``).
        interval_s: sampling interval outside Slurm, s (default: site config, 5 s).
        config: site config YAML path (default ``$SLURM_ENERGY_CONFIG``, /etc/slurm-energy/site.yaml).
        report: write the HTML/CSV report outside Slurm (default True).
    Returns:
        A :class:`Tracker` (context manager and decorator).
    Raises:
        ValueError: (when the block starts outside Slurm) the site config is invalid; the message
            names the field.
    """
    if callable(label):
        return Tracker(**kwargs)(label)
    return Tracker(label, **kwargs)


def current() -> Optional[Tracker]:
    """The innermost active tracker of this process, or None (callbacks use it to add their
    phases to the user's measurement instead of starting another)."""
    with _lock:
        return _active[-1] if _active else None

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

The mode is chosen when the block starts (docs/researchers/track.md):

* ``slurm``: a Slurm job whose Prolog samples (``SLURM_JOB_ID`` and the job's marks directory,
  :mod:`slurm_energy.sampling.marks`): the marks go to that directory, as the job's user, and the
  job's one record gets per-phase and per-stage energy;
* ``run``: inside ``slurm-energy run`` (:data:`RUN_MARKS_ENV`): the marks go into run's measurement;
* ``noop``: a local rank other than 0 (``LOCAL_RANK``, else ``SLURM_LOCALID``); rank 0 measures the
  node, under torchrun the launcher's whole tree;
* ``local``: anywhere else, the sampler of ``slurm-energy run`` in a child process over this process
  tree (:class:`slurm_energy.pipeline.LocalMeasurement`) and its report ``energy-<label>.html/.csv``
  in ``out``; a block left by an exception, Ctrl-C or SIGTERM writes a ``partial`` record saying how;
* ``phase``: a ``track`` started inside an active one is a phase of it.

Each mode is one object of :mod:`slurm_energy.tracking`; :class:`Tracker` is a facade over it.

Importing :mod:`slurm_energy` stays light: nothing heavy is imported before a block starts.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from slurm_energy.reporting.result import ClassResult, Result
from slurm_energy.sampling.local import RUN_LABEL_ENV, RUN_MARKS_ENV, RunEnd
from slurm_energy.tracking import (
    LocalMode,
    MarksChannel,
    Mode,
    NoopMode,
    PhaseMode,
    RunMarks,
    SlurmJobMarks,
    TrackSettings,
    writable_dir,
)

if TYPE_CHECKING:
    from types import TracebackType

    from slurm_energy.model import JobRecord
    from slurm_energy.sampling.local import LocalSampler

__all__ = ["ClassResult", "Phase", "Result", "Tracker", "current", "local_rank", "track"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_ids = itertools.count(1)
_active: list[Tracker] = []
_lock = threading.Lock()


def local_rank(env: Mapping[str, str] | None = None) -> int:
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


def slurm_marks_path(env: Mapping[str, str] | None = None) -> str | None:
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
    if not writable_dir(d):
        return None
    import socket

    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return os.path.join(d, marks_file_name(node))


def run_marks_path(env: Mapping[str, str] | None = None) -> str | None:
    """The marks file of the ``slurm-energy run`` this process runs under (:data:`RUN_MARKS_ENV`),
    when its directory exists and is writable; else None."""
    path = (os.environ if env is None else env).get(RUN_MARKS_ENV, "")
    return path if path and os.path.isabs(path) and writable_dir(os.path.dirname(path)) else None


class Phase:
    """A named window, begun when created; ends at :meth:`end` or when its ``with`` block exits."""

    def __init__(self, tracker: Tracker, name: str):
        self.name = name
        self._tracker = tracker
        self._id = next(_ids)
        self._open = tracker._write("begin", id=self._id, name=name)
        if self._open:
            tracker._boundary_reading()

    def end(self) -> None:
        """End the phase (idempotent)."""
        if self._open:
            self._open = False
            if self._tracker._write("end", id=self._id):
                self._tracker._boundary_reading()

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


class Tracker:
    """One measurement (see the module doc). Use through :func:`track`, or in a notebook::

        t = track(label="nb", pue=1.0).start()   # cell 1: the sampler starts
        t.result()                                # energy up to now (a short summary)
        t.stop()                                  # the final record; energy-nb.html is written

    Outside Slurm, SIGTERM/SIGHUP raise :class:`~slurm_energy.sampling.local.SignalExit` in the main
    thread while measuring (where the process had no handler); a script that ends without
    :meth:`stop` is stopped at interpreter exit, its record saying how it ended.

    A facade: the mode chosen at :meth:`start` (:mod:`slurm_energy.tracking`) writes the marks,
    answers :meth:`result` and ends the measurement."""

    def __init__(self, label: str | None = None, *, out: str = ".", interval_s: float | None = None,
                 config: str | None = None, report: bool = True, partition: str = "", overwrite: bool = False,
                 country: str | None = None, zone: str | None = None, pue: float | None = None,
                 ci: float | None = None, alpha: float | None = None):
        #: the arguments, label resolved (a decorator's fresh tracker per call, the child sampler's at-exit finish)
        self.settings = TrackSettings(label or default_label(), out, interval_s, config, report, partition, overwrite,
                                      country, zone, pue, ci, alpha)
        #: set by a callback whose framework gives no exception hook: what it means when the
        #: interpreter exits with this tracker still running (atexit)
        self.abandoned_means = ""
        self._label_given = bool(label)
        self._mode: Mode | None = None  # once started
        self._local: LocalMode | None = None  # the same object, when it is the local sampler
        self._outer_phase: Phase | None = None  # the block as a phase named by its label
        self._tags: dict[str, Any] = {}
        self._stopped = False

    @property
    def label(self) -> str:
        return self.settings.label

    @property
    def mode(self) -> str:
        """``local`` | ``slurm`` | ``run`` | ``noop`` | ``phase`` once started, else empty."""
        return self._mode.name if self._mode is not None else ""

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def record(self) -> JobRecord | None:
        """The final JobRecord (local mode), after the block; else None."""
        return self._local.record if self._local is not None else None

    @property
    def report_paths(self) -> tuple[str, ...]:
        """The report's HTML and CSV (local mode), once written."""
        return self._local.measurement.report_paths if self._local is not None else ()

    @property
    def covers(self) -> str:
        """What the local sampler measures (the process tree), once started; else empty."""
        return self._local.covers if self._local is not None else ""

    @property
    def ended(self) -> RunEnd | None:
        """How the run ended (local mode), once stopped."""
        return self._local.ended if self._local is not None else None

    @property
    def samples_kept(self) -> str:
        """The sample directory, when it was kept (the report not written); else empty."""
        return self._local.samples_kept if self._local is not None else ""

    @property
    def sampler(self) -> LocalSampler | None:
        """The local sampler (local mode: its ``dir`` of samples, removed once the report is written,
        its child's ``pid``, ``overhead_s``); None in the other modes."""
        return self._local.sampler if self._local is not None else None

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("running" if self._mode is not None else "not started")
        return f"<slurm_energy.Tracker {self.label!r} {self.mode or '-'} {state}>"

    # -------------------------------------------------------------- life cycle
    def start(self) -> Tracker:
        """Begin measuring (see the module doc for the mode chosen). Returns self.

        Raises:
            ValueError: (outside Slurm) the site config or a carbon argument is invalid (the
                message names the field and the fix).
            FileExistsError: ``out`` already holds this label's report and ``overwrite`` is False
                (nothing has been measured yet: pick another label or pass ``overwrite=True``).
        """
        with _lock:
            parent = _active[-1] if _active else None
            _active.append(self)
        try:
            self._mode = self._choose_mode(parent)
        except BaseException:
            with _lock:
                if self in _active:
                    _active.remove(self)
            raise
        if self._mode.label_is_phase:  # `jobenergy --label`/`--cite` find the block by its label
            self._outer_phase = Phase(self, self.label)
        return self

    def _choose_mode(self, parent: Tracker | None) -> Mode:
        if parent is not None and parent._mode is not None and not isinstance(parent._mode, NoopMode):
            return PhaseMode(parent._mode, parent.result)
        rank = local_rank()
        if rank != 0:
            return NoopMode(rank)
        from slurm_energy.sampling.marks import MarksWriter

        for path, make in ((slurm_marks_path(), SlurmJobMarks), (run_marks_path(), RunMarks)):
            if path is None:
                continue
            try:
                marks = MarksChannel(MarksWriter(path))
            except OSError as e:
                warnings.warn(f"slurm_energy.track: cannot write marks to {path} ({e}); measuring here " + (
                    "instead" if make is SlurmJobMarks else "too: run's report and this one then measure the same "
                    "processes"), stacklevel=4)
                continue
            given = self.settings.carbon()
            if given:  # the job's record is another process's: the site's facts (or run's) apply
                where = "the site config's (the job's record is the site's accounting)" if make is SlurmJobMarks \
                    else "those `slurm-energy run` was given"
                print(f"slurm-energy: track({', '.join(f'{k}={v!r}' for k, v in given.items())}) inside "
                      f"{'a Slurm job' if make is SlurmJobMarks else '`slurm-energy run`'}: not used; the carbon "
                      f"facts are {where}", file=sys.stderr)
            if make is RunMarks:
                print(f"slurm-energy: track({self.label!r}) runs inside `slurm-energy run` "
                      f"({os.environ.get(RUN_LABEL_ENV, '')}): its phases, stages and tags go into run's one "
                      "measurement and report, which cover the whole command; no second report", file=sys.stderr)
            return make(marks, self._label_given)
        self._local = LocalMode.begin(self.settings)
        _register_at_exit()
        return self._local

    def stop(self, ended: RunEnd | None = None) -> JobRecord | None:
        """End the measurement; in local mode summarise and write the report. Returns the final
        JobRecord in local mode, else None. A phase never closed is warned about and counted to
        the end (flag ``never_closed``). ``ended``: how the run ended (:class:`~slurm_energy.sampling.local.RunEnd`;
        default completed); one that did not end cleanly makes the record ``partial``, saying how."""
        if self._stopped:
            return self.record
        if self._outer_phase is not None:
            self._outer_phase.end()
        self._stopped = True
        with _lock:
            if self in _active:
                _active.remove(self)
        return self._mode.stop(ended, self._tags) if self._mode is not None else None

    def __enter__(self) -> Tracker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop(RunEnd.from_exception(exc))

    def __call__(self, fn: Callable[_P, _R]) -> Callable[_P, _R]:
        """Decorator: each call of ``fn`` is measured by a fresh tracker with these settings."""
        @functools.wraps(fn)
        def wrapper(*a: _P.args, **kw: _P.kwargs) -> _R:
            with Tracker(**self.settings.kwargs()):
                return fn(*a, **kw)

        return wrapper

    # -------------------------------------------------------------- marks
    def _write(self, ev: str, **fields: Any) -> bool:
        return self._mode is not None and self._mode.write(ev, **fields)

    def _boundary_reading(self) -> None:
        """A sample row right after a phase or stage mark, where the sampler runs in this process
        tree (local mode; :meth:`slurm_energy.tracking.LocalMode.boundary_reading`). Under Slurm or
        ``run`` the node's sampler is another process tree: the edge stays cut there, flagged
        ``interval_cut``."""
        if self._mode is not None:
            self._mode.boundary_reading()

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
        if self._write("stage", frac=f):
            self._boundary_reading()

    def tag(self, **tags: Any) -> None:
        """Record facts about the training for prediction, e.g. ``flops`` (total FLOPs),
        ``model_params``, ``tokens`` (the prediction uses these), ``precision="bf16"``; they end up in the
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
        if self._mode is None:
            return Result(final=False, source="unavailable", note="the tracker has not started")
        return self._mode.result(self._tags)


def default_label(prefix: str = "") -> str:
    """``<prefix or script>-<local time YYYYmmddTHHMMSS>-<pid>``: unique per run, so a re-run never
    meets an earlier report's name."""
    script = os.path.splitext(os.path.basename(sys.argv[0] or ""))[0] if sys.argv else ""
    script = "".join(ch if ch.isalnum() or ch in "_.+-" else "_" for ch in (prefix or script))
    return f"{script or 'track'}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


_at_exit: list[bool] = []  # one atexit hook per process, once a local measurement started


def _register_at_exit() -> None:
    with _lock:
        if not _at_exit:
            _at_exit.append(atexit.register(_stop_all_at_exit) is not None)


def _stop_all_at_exit() -> None:
    """At interpreter exit: stop every local measurement still running (no ``stop()``: a script
    ended, or a callback's training raised), saying how the run ended: the signal that stopped it,
    the uncaught exception (``sys.last_value``), or what a callback said an open tracker means."""
    from slurm_energy.sampling.local import SIGNALS_SEEN

    with _lock:
        open_ = [t for t in reversed(_active) if t._local is not None and not t._stopped]
    for t in open_:
        ended: RunEnd | None
        if SIGNALS_SEEN:
            ended = RunEnd.from_signal(SIGNALS_SEEN[-1])
        elif getattr(sys, "last_value", None) is not None:
            ended = RunEnd.from_exception(sys.last_value)
        elif t.abandoned_means:
            ended = RunEnd("interrupted", t.abandoned_means)
        else:
            ended = None  # the script ended without stop(): measured to its end
        try:
            t.stop(ended)
        except Exception as e:  # at exit: say it, never raise
            print(f"slurm-energy: measurement {t.label!r} not finished at exit: {type(e).__name__}: {e}",
                  file=sys.stderr)


def track(label: Any = None, **kwargs: Any) -> Any:
    """Measure a block, a function or a whole script (see the module doc).

    ``with track(label="x") as t:``, ``@track(label="x")`` or plain ``@track``.

    Args:
        label: the measurement's name (the report is ``energy-<label>.html``); default
            ``<script>-<time>-<pid>``. Inside a Slurm job the record is the job's (its job id).
        out: directory for the report outside Slurm (default ``.``).
        interval_s: sampling interval outside Slurm, s (default: site config, 5 s).
        config: site config YAML path (default ``$SLURM_ENERGY_CONFIG``, /etc/slurm-energy/site.yaml).
        report: write the HTML/CSV report outside Slurm (default True).
        overwrite: replace an existing ``energy-<label>.html`` in ``out`` (default False: a
            block whose label's report exists does not start, FileExistsError).
        country, zone: where the power comes from (ISO 3166 ``"FR"``; grid zone ``"US-CA"``):
            the grid's carbon intensity from the bundled table.
        pue: facility / IT energy (a workstation: 1.0). ci: gCO2e/kWh. alpha: fraction counted, 0..1.
            Each overrides site.yaml for this measurement, labelled ``track() pue=1`` in the
            record's ``*_source``; without them and without site.yaml the defaults (PUE 1.58, a
            datacenter average; CI 475 g/kWh, the world average) are used, labelled DEFAULT, and
            a line on stderr says so at the end.
    Returns:
        A :class:`Tracker` (context manager, decorator, or ``.start()``/``.stop()`` by hand).
    Raises:
        ValueError: (when the block starts outside Slurm) the site config or a carbon argument is
            invalid; the message names the field and the fix.
        FileExistsError: (when the block starts) the label's report exists and not ``overwrite``.
    """
    if callable(label):
        return Tracker(**kwargs)(label)
    return Tracker(label, **kwargs)


def current() -> Tracker | None:
    """The innermost active tracker of this process, or None (callbacks use it to add their
    phases to the user's measurement instead of starting another)."""
    with _lock:
        return _active[-1] if _active else None


def _finish_orphan(d: str) -> int:
    """``python -m slurm_energy.api DIR``, exec'd by a ``track()`` child sampler whose measured
    process ended without stopping it (SIGKILL, the OOM killer, ``os._exit``): the local mode's stop
    as that process would have called it, the partial record saying it was killed."""
    LocalMode.resume(d).stop(RunEnd("interrupted", "the measured process ended without stopping the measurement "
                                                   "(killed by SIGKILL or the OOM killer, or os._exit); measured to "
                                                   "its last sample"), {})
    return 0


if __name__ == "__main__":
    sys.exit(_finish_orphan(sys.argv[1]))

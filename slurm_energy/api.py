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

Importing :mod:`slurm_energy` stays light: nothing heavy is imported before a block starts.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import json
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.sampling.local import RUN_LABEL_ENV, RUN_MARKS_ENV

__all__ = ["ClassResult", "Phase", "Result", "Tracker", "current", "local_rank", "track"]

_ids = itertools.count(1)
_active: list[Tracker] = []
_lock = threading.Lock()


@dataclass
class ClassResult:
    """One device class: job-share energy (kWh, None = not measured), its share of kgCO2e, the
    method (counter / power_integration / tdp_estimate / unavailable) and coverage in [0, 1]."""

    device_class: str
    energy_kwh: float | None
    co2e_kg: float | None
    method: str
    coverage: float | None


@dataclass
class Result:
    """Energy so far (``final`` False) or final: IT kWh, facility kWh (x PUE), kgCO2e, per class,
    the phases and stages so far (``WindowEnergy`` objects) and the record itself (None when the
    numbers are not available here: ``note`` says why and where to look)."""

    final: bool
    source: str  # "local sampler" | "slurm store" | "unavailable" | "other rank"
    elapsed_s: float = 0.0
    it_kwh: float | None = None
    facility_kwh: float | None = None
    co2e_kg: float | None = None
    classes: dict[str, ClassResult] = field(default_factory=dict)
    phases: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    record: Any = field(default=None, repr=False)
    note: str = ""
    covers: str = ""  # what was measured: "process 123 and its children", "torchrun launcher ..."

    def _summary_parts(self) -> tuple[str, list[str]]:
        """(the headline, per-class parts) of :meth:`__repr__` and :meth:`_repr_html_`."""
        when = "final" if self.final else "so far"
        if self.it_kwh is None and self.record is None:  # the numbers are elsewhere: the note says where
            return f"{when}, {self.source}: no energy ({self.note or 'not measured'})", []
        if self.it_kwh is None:  # a record, nothing in it measured (yet)
            why = "no device could be measured" if self.final else \
                "no sampling interval measured yet (each device needs two readings)"
            return f"{when}, {self.elapsed_s:.3g} s: no energy: {why}", []
        rec = self.record
        head = f"{when}, {self.elapsed_s:.3g} s: IT {self.it_kwh:.3g} kWh"
        if rec is not None and rec.carbon is not None:
            c = rec.carbon
            pue = f"PUE {c.pue:g}{' DEFAULT' if 'pue' in c.defaults_used else ''}"
            ci = f"CI {c.ci_g_per_kwh:g} g/kWh{' DEFAULT' if 'ci' in c.defaults_used else ''}"
            head += f" -> facility {self.facility_kwh:.3g} kWh ({pue}) -> {self.co2e_kg:.3g} kgCO2e ({ci})"
            head += f"; status {rec.status_text}"
        parts = [f"{c.device_class} {'n/a' if c.energy_kwh is None else f'{c.energy_kwh:.3g} kWh'} {c.method}"
                 + ("" if c.coverage is None else f" cov {c.coverage:.2f}") for c in self.classes.values()]
        return head, parts

    def __repr__(self) -> str:
        """One line (a notebook's or a print's view): IT, facility and CO2e with PUE/CI (DEFAULT
        marked), the status, then per class energy, method and coverage; the record is ``.record``."""
        head, parts = self._summary_parts()
        cut = sum("interval_cut" in w.flags for w in self.phases)
        extra = [f"{len(self.phases)} phases" + (f" ({cut} cut from sampling intervals: flag interval_cut)" if cut else "")
                 ] if self.phases else []
        extra += [f"{len(self.stages)} stages"] if self.stages else []
        tail = f" [{', '.join(parts + extra)}]" if parts or extra else ""
        return f"<slurm_energy.Result {head}{tail}>"

    def _repr_html_(self) -> str:
        """A small table for Jupyter: the headline, then one row per device class."""
        from html import escape

        head, _ = self._summary_parts()
        rows = "".join(
            f"<tr><td>{escape(c.device_class)}</td><td>{'n/a' if c.energy_kwh is None else f'{c.energy_kwh:.4g}'}</td>"
            f"<td>{escape(c.method)}</td><td>{'' if c.coverage is None else f'{c.coverage:.2f}'}</td></tr>"
            for c in self.classes.values())
        table = ("<table><tr><th>class</th><th>kWh (IT)</th><th>method</th><th>coverage</th></tr>"
                 f"{rows}</table>") if rows else ""
        note = f"<br><small>{escape(self.note)}</small>" if self.note else ""
        covers = f"<br><small>measures: {escape(self.covers)}</small>" if self.covers else ""
        return f"<div><b>slurm-energy</b> {escape(head)}{table}{covers}{note}</div>"

    def cite(self, phase: str = "", fmt: str = "all", training_type: str = "") -> str:
        """A methods paragraph (text and LaTeX), a citation line and a Hugging Face model-card
        ``co2_eq_emissions`` block for this measurement (``phase``: one phase or stage only, e.g.
        ``"fine-tuning"``; ``fmt``: ``all``, ``text``, ``latex``, ``line`` or ``modelcard``)
        (:mod:`slurm_energy.reporting.cite`). Raises CiteError (a ValueError) when there is no
        record here (``note`` says where the numbers are) or no such phase."""
        from slurm_energy.reporting.cite import CiteError, citation, render

        if self.record is None:
            raise CiteError(f"nothing to cite here: {self.note or self.source}")
        return render(citation([self.record], phase=phase, training_type=training_type), fmt)

    @classmethod
    def from_record(cls, rec, final: bool, source: str, note: str = "", covers: str = "") -> Result:
        from slurm_energy.reporting.report import class_rows

        classes = {r.device_class: ClassResult(r.device_class, r.energy_it_kwh, r.co2e_kg, r.method.value, r.coverage)
                   for r in class_rows(rec)[:-1]}
        return cls(final=final, source=source, elapsed_s=rec.elapsed_s, it_kwh=rec.it_kwh,
                   facility_kwh=rec.facility_kwh, co2e_kg=rec.co2e_kg, classes=classes, phases=list(rec.phases),
                   stages=list(rec.stages), record=rec, note=note, covers=covers)


def from_store(job_id: str) -> Result:
    """The job's latest record in the site's store (interim while it runs), as a Result; ``source``
    ``unavailable`` with a note when this user cannot read it (never raises)."""
    note = (f"measured by the node's sampler; the numbers appear in the store about a minute into the job "
            f"and finally after it: jobenergy {job_id}")
    try:
        from contextlib import closing

        from slurm_energy.config import load_site_config_for_hooks
        from slurm_energy.store import open_store

        with closing(open_store(load_site_config_for_hooks(save=False)[0].paths.store_url, readonly=True)) as st:
            recs = st.get_job(job_id)
    except Exception as e:  # the store may be unreadable to users: numbers come after the job
        return Result(final=False, source="unavailable", note=f"{note} (store: {type(e).__name__}: {e})")
    if not recs:
        return Result(final=False, source="unavailable", note=note)
    rec = max(recs, key=lambda r: (r.restart_count, r.end_time))
    return Result.from_record(rec, rec.status.value != "running", "slurm store", note)


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


def slurm_marks_path(env=None) -> str | None:
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
    if not _writable_dir(d):
        return None
    import socket

    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return os.path.join(d, marks_file_name(node))


def run_marks_path(env=None) -> str | None:
    """The marks file of the ``slurm-energy run`` this process runs under (:data:`RUN_MARKS_ENV`),
    when its directory exists and is writable; else None."""
    path = (os.environ if env is None else env).get(RUN_MARKS_ENV, "")
    return path if path and os.path.isabs(path) and _writable_dir(os.path.dirname(path)) else None


def _writable_dir(d: str) -> bool:
    return os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)


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

    def __exit__(self, *exc) -> None:
        self.end()


class Tracker:
    """One measurement (see the module doc). Use through :func:`track`, or in a notebook::

        t = track(label="nb", pue=1.0).start()   # cell 1: the sampler starts
        t.result()                                # energy up to now (a short summary)
        t.stop()                                  # the final record; energy-nb.html is written

    Outside Slurm, SIGTERM/SIGHUP raise :class:`~slurm_energy.sampling.local.SignalExit` in the main
    thread while measuring (where the process had no handler); a script that ends without
    :meth:`stop` is stopped at interpreter exit, its record saying how it ended."""

    def __init__(self, label: str | None = None, *, out: str = ".", interval_s: float | None = None,
                 config: str | None = None, report: bool = True, partition: str = "", overwrite: bool = False,
                 country: str | None = None, zone: str | None = None, pue: float | None = None,
                 ci: float | None = None, alpha: float | None = None):
        self.label = label or _default_label()
        self._label_given = bool(label)
        self.out, self.interval_s, self.config, self.report, self.partition = out, interval_s, config, report, partition
        self.overwrite = overwrite
        self.carbon_args = {k: v for k, v in dict(country=country, zone=zone, pue=pue, ci=ci, alpha=alpha).items()
                            if v is not None}
        #: the arguments (a decorator's fresh tracker per call, the child sampler's at-exit finish)
        self.settings = dict(label=self.label, out=out, interval_s=interval_s, config=config, report=report,
                             partition=partition, overwrite=overwrite, **self.carbon_args)
        self.mode = ""  # "local" | "slurm" | "run" | "noop" | "phase" once started
        self.record = None  # the final JobRecord (local mode), after the block
        self.report_paths: tuple[str, ...] = ()
        self.covers = ""  # what the local sampler measures (process tree), once started
        self.ended = None  # how the run ended (RunEnd), once stopped
        self.samples_kept = ""  # the sample directory, when it was kept (report not written)
        self._writer = None
        self._measure = None
        self._parent: Tracker | None = None
        self._outer_phase: Phase | None = None
        self._open_phases: dict[int, str] = {}
        self._tags: dict = {}
        self._stopped = False
        self._out_ok = True
        self._restore_signals = lambda: None
        #: set by a callback whose framework gives no exception hook: what it means when the
        #: interpreter exits with this tracker still running (atexit)
        self.abandoned_means = ""

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("running" if self.mode else "not started")
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
            return self._start(parent)
        except BaseException:
            with _lock:
                if self in _active:
                    _active.remove(self)
            raise

    def _start(self, parent: Tracker | None) -> Tracker:
        if parent is not None and parent.mode != "noop":
            self.mode, self._parent = "phase", parent
            self._outer_phase = parent.phase(self.label)
            return self
        if local_rank() != 0:
            self.mode = "noop"
            return self
        from slurm_energy.sampling.marks import MarksWriter

        for path, mode in ((slurm_marks_path(), "slurm"), (run_marks_path(), "run")):
            if path is None:
                continue
            try:
                self._writer, self.mode = MarksWriter(path), mode
            except OSError as e:
                warnings.warn(f"slurm_energy.track: cannot write marks to {path} ({e}); measuring here " + (
                    "instead" if mode == "slurm" else "too: run's report and this one then measure the same "
                    "processes"), stacklevel=4)
                continue
            if mode == "run":
                print(f"slurm-energy: track({self.label!r}) runs inside `slurm-energy run` "
                      f"({os.environ.get(RUN_LABEL_ENV, '')}): its phases, stages and tags go into run's one "
                      "measurement and report, which cover the whole command; no second report", file=sys.stderr)
            if self._label_given:  # the block is a phase of that name: `jobenergy --label`/`--cite` find it
                self._outer_phase = Phase(self, self.label)
            return self
        self._start_local()
        return self

    def _start_local(self) -> None:
        from slurm_energy.outputs.report import report_path
        from slurm_energy.pipeline import LocalMeasurement
        from slurm_energy.sampling.local import measured_root, raise_signal_exit, set_handlers
        from slurm_energy.sampling.marks import MarksWriter

        cfg = self._site_config()
        out = os.path.abspath(self.out)
        if self.report:
            self._out_ok = _writable_dir(out)
            existing = report_path(out, self.label)
            if self._out_ok and os.path.lexists(existing) and not self.overwrite:
                raise FileExistsError(f"slurm_energy.track: {existing} exists (an earlier run's report); pass "
                                      "overwrite=True to replace it, or another label= (the default label is unique)")
        root, self.covers, job = measured_root()
        self._measure = LocalMeasurement(cfg, None, self.label, interval_s=self.interval_s,
                                         partition=self.partition, work_dir=self.out, child_of=os.getpid(),
                                         tree_root=root, job_marker=job).start()
        self._writer = MarksWriter(self._measure.marks_path)
        self.mode = "local"
        try:  # so the child sampler can finish this measurement if this process is killed (_finish_orphan)
            self._measure.save_state(settings=dict(self.settings, out=out), covers=self.covers, out_ok=self._out_ok)
        except OSError:
            pass
        if root != os.getpid() or job is not None:
            print(f"slurm-energy: local rank 0 measures {self.covers} (each process once; the other ranks' "
                  "track() calls are no-ops)", file=sys.stderr)
        if self.report and not self._out_ok:
            import tempfile

            home = os.path.expanduser("~")
            example = os.path.join(home, "energy") if os.access(home, os.W_OK) else tempfile.gettempdir()
            warnings.warn(f"slurm_energy.track: {out} is not a writable directory, so the report cannot be written "
                          f"there: pass out='<a writable directory>' (e.g. out='{example}'). Measuring "
                          f"anyway; the samples are kept in {self._measure.dir} and the record is t.record",
                          stacklevel=4)
        # SIGTERM/SIGHUP -> SignalExit in the main thread while measuring, where the process has no
        # handler of its own (a framework's or the user's is left alone)
        self._restore_signals = set_handlers(raise_signal_exit, only_default=True)
        _register_at_exit()

    def _site_config(self):
        """The site config with this tracker's carbon arguments applied; ValueError naming the field."""
        from slurm_energy.config import ConfigError
        from slurm_energy.pipeline import local_site_config

        try:
            return local_site_config(self.config, "track()", self.partition, **self.carbon_args)
        except ConfigError as e:
            raise ValueError(f"slurm_energy.track: site config: {e}") from None

    def stop(self, ended=None):
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
        if self.mode == "phase":
            return None
        if self._open_phases:
            warnings.warn("slurm_energy.track: phases never closed, counted to the end: "
                          + ", ".join(repr(n) for n in self._open_phases.values()), stacklevel=3)
        if self._writer is not None:
            self._writer.close()
        if self.mode == "local":
            from slurm_energy.sampling.local import RunEnd

            self._restore_signals()
            self.ended = ended if ended is not None else RunEnd.completed()
            self._measure.stop()
            self.record = self._measure.record(self._measure.marks(), self._tags, ended=self.ended)
            self._write_report()
        return self.record

    def _write_report(self) -> None:
        """Publish the record to the report (as ``run`` does); the samples are removed once the
        report is written (or none was asked for), else kept and their place printed."""
        from slurm_energy.config.overrides import default_facts_warning

        rec = self.record
        problems: list[str] = []
        if self.report and self._out_ok:
            problems = self._measure.report(rec, self.out, self.overwrite, "overwrite=True")
            self.report_paths = self._measure.report_paths
            if self.report_paths:
                print(f"slurm-energy: report {self.report_paths[0]}", file=sys.stderr)
        elif self.report:
            problems = [f"{os.path.abspath(self.out)} is not writable: report not written (pass out=)"]
            print(f"slurm-energy: {problems[0]}", file=sys.stderr)
        if self.ended is not None and not self.ended.clean:
            print(f"slurm-energy: measurement {rec.job_id!r} is partial: {self.ended.detail}", file=sys.stderr)
        warn = default_facts_warning(rec.carbon, pue_arg="track(pue=1.0)", ci_arg="track(country='FR')")
        if warn:
            print(warn, file=sys.stderr)
        if problems:
            self.samples_kept = self._measure.dir
        self._measure.close(bool(problems), " (the record is also t.record)")

    def __enter__(self) -> Tracker:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        from slurm_energy.sampling.local import RunEnd

        self.stop(RunEnd.from_exception(exc))

    def __call__(self, fn: Callable) -> Callable:
        """Decorator: each call of ``fn`` is measured by a fresh tracker with these settings."""
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            with Tracker(**self.settings):
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

    def _boundary_reading(self) -> None:
        """A sample row right after a phase or stage mark, where the sampler runs in this process
        tree (local mode): the window's edge is then read, not cut from a sampling interval (its
        energy would otherwise be that interval's mean power times its seconds inside). Costs one
        sample (a few ms) per mark. Under Slurm or ``run`` the node's sampler is another process
        tree: the edge stays cut there, flagged ``interval_cut``."""
        if self.mode == "phase":
            self._parent._boundary_reading()
        elif self.mode == "local" and self._measure is not None and not self._stopped:
            self._measure.sample_now()

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

    def tag(self, **tags) -> None:
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
        if self.mode == "phase":
            return self._parent.result()
        if self.mode == "local":
            if self.record is not None:
                return Result.from_record(self.record, True, "local sampler", covers=self.covers)
            # asking and summarising run in this (measured) process: not the run's CPU time. The whole
            # process's (numpy's BLAS threads spin after a call): other threads' work meanwhile is left out too
            mark = self._measure.overhead_begin()
            try:
                fresh = self._measure.sample_now()  # a row now: the result covers the run up to this call
                note = "energy from the start up to this call" if fresh else \
                    "energy up to the sampler's last row (no row could be taken now)"
                return Result.from_record(self._measure.record(self._measure.marks(), self._tags), False,
                                          "local sampler", note, covers=self.covers)
            finally:
                self._measure.overhead_end(mark)
        if self.mode == "slurm":
            return from_store(os.environ.get("SLURM_JOB_ID", ""))
        if self.mode == "run":
            return Result(final=False, source="slurm-energy run",
                          note=f"measured by `slurm-energy run` ({os.environ.get(RUN_LABEL_ENV, '')}), which covers the "
                               "whole command; its report is written when the command ends")
        if self.mode == "noop":
            return Result(final=False, source="other rank",
                          note=f"local rank {local_rank()}: local rank 0 of this node measures it")
        return Result(final=False, source="unavailable", note="the tracker has not started")


def _default_label(prefix: str = "") -> str:
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
    from slurm_energy.sampling.local import SIGNALS_SEEN, RunEnd

    with _lock:
        open_ = [t for t in reversed(_active) if t.mode == "local" and not t._stopped]
    for t in open_:
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
    process ended without stopping it (SIGKILL, the OOM killer, ``os._exit``): :meth:`Tracker.stop`
    as that process would have called it, the partial record saying it was killed."""
    from slurm_energy.pipeline import LocalMeasurement
    from slurm_energy.sampling.local import RunEnd

    with open(os.path.join(d, LocalMeasurement.STATE_FILE)) as f:
        x = json.load(f)["extra"]
    t = Tracker(**x["settings"])
    m, _ = LocalMeasurement.from_state(t._site_config(), d)
    t._measure, t.mode, t.covers, t._out_ok = m, "local", x["covers"], x["out_ok"]
    t.stop(RunEnd("interrupted", "the measured process ended without stopping the measurement (killed by "
                                 "SIGKILL or the OOM killer, or os._exit); measured to its last sample"))
    return 0


if __name__ == "__main__":
    sys.exit(_finish_orphan(sys.argv[1]))

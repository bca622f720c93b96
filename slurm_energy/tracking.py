"""The measurement modes behind ``track()``: :class:`slurm_energy.api.Tracker` is a facade over one
of them, chosen when its block starts (docs/researchers/track.md):

* :class:`SlurmJobMarks`: inside a Slurm job whose Prolog samples: marks into the job's marks
  directory; the numbers are the job's record in the store;
* :class:`RunMarks`: inside ``slurm-energy run``: marks into run's measurement, which reports;
* :class:`LocalMode`: anywhere else: a child sampler over this process tree
  (:class:`~slurm_energy.pipeline.LocalMeasurement`), marks beside its samples, a report at the end;
* :class:`NoopMode`: a local rank other than 0 (rank 0 measures the node);
* :class:`PhaseMode`: a ``track()`` inside an active one is a phase of it.

Each mode is a :class:`Mode`: it writes marks, reads a phase's edge where it can, answers
``result()`` and ends at ``stop()``. The modes that write marks hold a :class:`MarksChannel`.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from slurm_energy.reporting.result import Result
from slurm_energy.sampling.local import RUN_LABEL_ENV, RunEnd

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig
    from slurm_energy.model import JobRecord
    from slurm_energy.pipeline import LocalMeasurement
    from slurm_energy.sampling.local import LocalSampler
    from slurm_energy.sampling.marks import MarksWriter


@dataclass(frozen=True)
class TrackSettings:
    """``track()``'s arguments (:func:`slurm_energy.api.track`), label resolved: what a decorator's
    fresh tracker per call and the child sampler's at-exit finish start from."""

    label: str
    out: str = "."
    interval_s: float | None = None
    config: str | None = None
    report: bool = True
    partition: str = ""
    overwrite: bool = False
    country: str | None = None
    zone: str | None = None
    pue: float | None = None
    ci: float | None = None
    alpha: float | None = None

    def carbon(self) -> dict[str, Any]:
        """The carbon facts given (country, zone, pue, ci, alpha), None ones left out."""
        got = dict(country=self.country, zone=self.zone, pue=self.pue, ci=self.ci, alpha=self.alpha)
        return {k: v for k, v in got.items() if v is not None}

    def kwargs(self) -> dict[str, Any]:
        """As :func:`~slurm_energy.api.track`'s keyword arguments (JSON-safe)."""
        return asdict(self)

    def site_config(self) -> SiteConfig:
        """The site config with the carbon arguments applied; ValueError naming the field."""
        from slurm_energy.config import ConfigError
        from slurm_energy.pipeline import local_site_config

        try:
            return local_site_config(self.config, "track()", self.partition, **self.carbon())
        except ConfigError as e:
            raise ValueError(f"slurm_energy.track: site config: {e}") from None


class Mode(Protocol):
    """What :class:`~slurm_energy.api.Tracker` asks of its mode."""

    #: "slurm" | "run" | "local" | "noop" | "phase" (``Tracker.mode``)
    name: str
    #: whether the tracker's label names a phase of the block (a phase of the outer tracker, or a
    #: given label inside a Slurm job or ``run``, so ``jobenergy --label``/``--cite`` find it)
    label_is_phase: bool

    def write(self, ev: str, **fields: Any) -> bool:
        """Append one mark (``begin``/``end``/``stage``/``tag``); whether it was written."""
        ...

    def boundary_reading(self) -> None:
        """A sample row at a phase's or stage's edge, where the sampler runs in this process tree."""
        ...

    def result(self, tags: dict[str, Any]) -> Result:
        """Energy so far (final once stopped), or why it is not here."""
        ...

    def stop(self, ended: RunEnd | None, tags: dict[str, Any]) -> JobRecord | None:
        """End the mode (``ended``: how the run ended); the final record where this mode makes one."""
        ...


class MarksChannel:
    """One marks file being written (:class:`~slurm_energy.sampling.marks.MarksWriter`): the phases
    open in it, and nothing written after :meth:`close`."""

    def __init__(self, writer: MarksWriter):
        self._writer = writer
        self._open: dict[int, str] = {}  # phase id -> name, begun and not ended
        self._closed = False

    def write(self, ev: str, **fields: Any) -> bool:
        if self._closed:
            return False
        try:
            self._writer.write(ev, **fields)
        except OSError as e:  # a full disk must not stop the training
            warnings.warn(f"slurm_energy.track: mark not written ({e})", stacklevel=5)
            return False
        if ev == "begin":
            self._open[fields["id"]] = fields["name"]
        elif ev == "end":
            self._open.pop(fields["id"], None)
        return True

    def close(self) -> None:
        """Stop writing; a phase never closed is warned about (it is counted to the end, flag ``never_closed``)."""
        if self._closed:
            return
        self._closed = True
        if self._open:
            warnings.warn("slurm_energy.track: phases never closed, counted to the end: "
                          + ", ".join(repr(n) for n in self._open.values()), stacklevel=5)
        self._writer.close()


class _MarksMode:
    """A mode whose measurement is another process's (the job's sampler, run's): it only writes
    marks, through one :class:`MarksChannel`; the edge of a phase is cut, flagged ``interval_cut``."""

    name = ""

    def __init__(self, marks: MarksChannel, label_is_phase: bool):
        self.marks, self.label_is_phase = marks, label_is_phase

    def write(self, ev: str, **fields: Any) -> bool:
        return self.marks.write(ev, **fields)

    def boundary_reading(self) -> None:
        """Nothing: the sampler is another process (tree); the edge is cut, flagged ``interval_cut``."""

    def stop(self, ended: RunEnd | None, tags: dict[str, Any]) -> JobRecord | None:
        self.marks.close()
        return None


class SlurmJobMarks(_MarksMode):
    """Inside a Slurm job whose Prolog samples: the marks go to the job's marks directory (as the
    job's user); the job's one record, in the site's store, gets per-phase and per-stage energy."""

    name = "slurm"

    def result(self, tags: dict[str, Any]) -> Result:
        """The job's latest record in the site's store (interim records every ``sampling.interim_s``)."""
        return from_store(os.environ.get("SLURM_JOB_ID", ""))


class RunMarks(_MarksMode):
    """Inside ``slurm-energy run``: the marks go into run's one measurement, whose report covers
    the whole command."""

    name = "run"

    def result(self, tags: dict[str, Any]) -> Result:
        return Result(final=False, source="slurm-energy run",
                      note=f"measured by `slurm-energy run` ({os.environ.get(RUN_LABEL_ENV, '')}), which covers the "
                           "whole command; its report is written when the command ends")


class NoopMode:
    """A local rank other than 0: writes nothing (local rank 0 measures the node)."""

    name = "noop"
    label_is_phase = False

    def __init__(self, rank: int):
        self.rank = rank

    def write(self, ev: str, **fields: Any) -> bool:
        return False

    def boundary_reading(self) -> None:
        pass

    def result(self, tags: dict[str, Any]) -> Result:
        return Result(final=False, source="other rank",
                      note=f"local rank {self.rank}: local rank 0 of this node measures it")

    def stop(self, ended: RunEnd | None, tags: dict[str, Any]) -> JobRecord | None:
        return None


class PhaseMode:
    """A ``track()`` started inside an active one: a phase (its label) of the outer one, whose mode
    writes its marks and answers its results."""

    name = "phase"
    label_is_phase = True

    def __init__(self, outer: Mode, outer_result: Callable[[], Result]):
        self.outer, self._outer_result = outer, outer_result

    def write(self, ev: str, **fields: Any) -> bool:
        return self.outer.write(ev, **fields)

    def boundary_reading(self) -> None:
        self.outer.boundary_reading()

    def result(self, tags: dict[str, Any]) -> Result:
        return self._outer_result()

    def stop(self, ended: RunEnd | None, tags: dict[str, Any]) -> JobRecord | None:
        return None  # the outer tracker ends the measurement


class LocalMode:
    """Outside a sampled Slurm job: the sampler of ``slurm-energy run`` in a child process over this
    process tree (:class:`~slurm_energy.pipeline.LocalMeasurement`), the marks beside its samples,
    the record and report ``energy-<label>.html/.csv`` at :meth:`stop`. Start with :meth:`begin`;
    :meth:`resume` finishes one whose process died."""

    name = "local"
    label_is_phase = False

    def __init__(self, measurement: LocalMeasurement, marks: MarksChannel, settings: TrackSettings, covers: str,
                 out_ok: bool):
        self.measurement, self.marks, self.settings = measurement, marks, settings
        self.covers = covers  # what the sampler measures (the process tree)
        self.out_ok = out_ok  # the report's directory is writable
        self.record: JobRecord | None = None  # the final record, once stopped
        self.ended: RunEnd | None = None  # how the run ended, once stopped
        self.samples_kept = ""  # the sample directory, when it was kept (report not written)
        self.restore_signals: Callable[[], None] = lambda: None

    @property
    def sampler(self) -> LocalSampler:
        return self.measurement.sampler

    @classmethod
    def begin(cls, settings: TrackSettings) -> LocalMode:
        """Start the child sampler over this process tree (its first row written) and say what it
        covers. Raises ValueError (site config, carbon arguments), FileExistsError (the label's
        report exists and not ``overwrite``)."""
        from slurm_energy.outputs.report import report_path
        from slurm_energy.pipeline import LocalMeasurement
        from slurm_energy.sampling.local import LocalSampler, measured_root, raise_signal_exit, set_handlers
        from slurm_energy.sampling.marks import MarksWriter

        cfg = settings.site_config()
        out = os.path.abspath(settings.out)
        out_ok = True
        if settings.report:
            out_ok = writable_dir(out)
            existing = report_path(out, settings.label)
            if out_ok and os.path.lexists(existing) and not settings.overwrite:
                raise FileExistsError(f"slurm_energy.track: {existing} exists (an earlier run's report); pass "
                                      "overwrite=True to replace it, or another label= (the default label is unique)")
        root, covers, job = measured_root()
        sampler = LocalSampler(cfg, None, settings.label, interval_s=settings.interval_s, partition=settings.partition,
                               work_dir=settings.out, child_of=os.getpid(), tree_root=root, job_marker=job).start()
        m = LocalMeasurement(sampler)
        self = cls(m, MarksChannel(MarksWriter(m.marks_path)), settings, covers, out_ok)
        try:  # so the child sampler can finish this measurement if this process is killed (resume)
            sampler.save_state(settings=dict(settings.kwargs(), out=out), covers=covers, out_ok=out_ok)
        except OSError:
            pass
        if root != os.getpid() or job is not None:
            print(f"slurm-energy: local rank 0 measures {covers} (each process once; the other ranks' "
                  "track() calls are no-ops)", file=sys.stderr)
        if settings.report and not out_ok:
            import tempfile

            home = os.path.expanduser("~")
            example = os.path.join(home, "energy") if os.access(home, os.W_OK) else tempfile.gettempdir()
            warnings.warn(f"slurm_energy.track: {out} is not a writable directory, so the report cannot be written "
                          f"there: pass out='<a writable directory>' (e.g. out='{example}'). Measuring "
                          f"anyway; the samples are kept in {sampler.dir} and the record is t.record",
                          stacklevel=5)
        # SIGTERM/SIGHUP -> SignalExit in the main thread while measuring, where the process has no
        # handler of its own (a framework's or the user's is left alone)
        self.restore_signals = set_handlers(raise_signal_exit, only_default=True)
        return self

    @classmethod
    def resume(cls, d: str) -> LocalMode:
        """The measurement whose sampler state is in directory ``d`` (saved by :meth:`begin`), its
        sampler ended at its last row: :meth:`stop` finishes it as its process would have.
        Raises OSError/ValueError for a bad state."""
        from slurm_energy.pipeline import LocalMeasurement
        from slurm_energy.sampling.local import LocalSampler
        from slurm_energy.sampling.marks import MarksWriter

        with open(os.path.join(d, LocalSampler.STATE_FILE)) as f:
            x = json.load(f)["extra"]
        settings = TrackSettings(**x["settings"])
        sampler, _ = LocalSampler.from_state(settings.site_config(), d)
        m = LocalMeasurement(sampler)
        return cls(m, MarksChannel(MarksWriter(m.marks_path)), settings, x["covers"], x["out_ok"])

    def write(self, ev: str, **fields: Any) -> bool:
        return self.marks.write(ev, **fields)

    def boundary_reading(self) -> None:
        """A sample row right after a phase or stage mark: the window's edge is then read, not cut
        from a sampling interval (its energy would otherwise be that interval's mean power times its
        seconds inside). Costs one sample (a few ms) per mark."""
        if self.record is None:
            self.sampler.sample_now()

    def result(self, tags: dict[str, Any]) -> Result:
        """From this process's sample file: up to now (a row taken now) while running, final after."""
        if self.record is not None:
            return Result.from_record(self.record, True, "local sampler", covers=self.covers)
        # asking and summarising run in this (measured) process: not the run's CPU time. The whole
        # process's (numpy's BLAS threads spin after a call): other threads' work meanwhile is left out too
        mark = self.sampler.overhead_begin()
        try:
            fresh = self.sampler.sample_now()  # a row now: the result covers the run up to this call
            note = "energy from the start up to this call" if fresh else \
                "energy up to the sampler's last row (no row could be taken now)"
            return Result.from_record(self.measurement.record(self.measurement.marks(), tags), False,
                                      "local sampler", note, covers=self.covers)
        finally:
            self.sampler.overhead_end(mark)

    def stop(self, ended: RunEnd | None, tags: dict[str, Any]) -> JobRecord:
        """The final sample, the record (``partial`` saying how when ``ended`` is not clean), the report."""
        if self.record is not None:
            return self.record
        self.marks.close()
        self.restore_signals()
        self.ended = ended if ended is not None else RunEnd.completed()
        self.sampler.stop()
        rec = self.record = self.measurement.record(self.measurement.marks(), tags, ended=self.ended)
        self._write_report(rec)
        return rec

    def _write_report(self, rec: JobRecord) -> None:
        """Publish the record to the report (as ``run`` does); the samples are removed once the
        report is written (or none was asked for), else kept and their place printed."""
        from slurm_energy.config.overrides import default_facts_warning

        s = self.settings
        problems: list[str] = []
        if s.report and self.out_ok:
            problems = self.measurement.report(rec, s.out, s.overwrite, "overwrite=True")
            if self.measurement.report_paths:
                print(f"slurm-energy: report {self.measurement.report_paths[0]}", file=sys.stderr)
        elif s.report:
            problems = [f"{os.path.abspath(s.out)} is not writable: report not written (pass out=)"]
            print(f"slurm-energy: {problems[0]}", file=sys.stderr)
        if self.ended is not None and not self.ended.clean:
            print(f"slurm-energy: measurement {rec.job_id!r} is partial: {self.ended.detail}", file=sys.stderr)
        warn = default_facts_warning(rec.carbon, pue_arg="track(pue=1.0)", ci_arg="track(country='FR')")
        if warn:
            print(warn, file=sys.stderr)
        if problems:
            self.samples_kept = self.sampler.dir
        self.measurement.close(bool(problems), " (the record is also t.record)")


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


def writable_dir(d: str) -> bool:
    return os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)

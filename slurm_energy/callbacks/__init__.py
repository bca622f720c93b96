"""Training-framework callbacks for :func:`slurm_energy.track` (``pip install slurm-energy[ml]``):
:mod:`~slurm_energy.callbacks.lightning` and :mod:`~slurm_energy.callbacks.hf` each hold an
``EnergyCallback``; nothing here imports a framework.

Epochs become phases (``epoch 0``...), training progress stages (each epoch's end, plus the
fractions asked for, e.g. ``stages=(0.6, 0.8)``), the parameter count, tokens and FLOPs tags. Inside
an active ``track()`` they add to it; else they start their own, labelled ``<hf-train|lightning-fit>-
<time>-<pid>`` unless ``label=``; a run that raises or is stopped gets a ``partial`` record. Other
keyword arguments are :func:`slurm_energy.track`'s.
"""

from __future__ import annotations

from collections.abc import Sequence


class TrainingMarks:
    """Framework-neutral bookkeeping shared by the callbacks: one tracker (the user's active one,
    else our own), the open epoch phase and which stage fractions have been marked."""

    def __init__(self, label: str | None, stages: Sequence[float], track_kwargs: dict):
        bad = [f for f in stages if not 0.0 < float(f) <= 1.0]
        if bad:
            raise ValueError(f"stages={list(stages)!r}: fractions of training must be in (0, 1], e.g. (0.6, 0.8)")
        self.label, self.track_kwargs = label, track_kwargs
        self._stages = sorted(float(f) for f in stages)
        self.pending, self.done, self.phase = list(self._stages), 0.0, None  # done: the largest fraction marked
        self.tracker, self.own = None, False
        self.record = None  # our own measurement's JobRecord, once it ended

    def begin(self, default_prefix: str, abandoned_means: str = "") -> None:
        """Use the active ``track()`` or start one (labelled ``label``, else ``<default_prefix>-<time>-<pid>``).
        ``abandoned_means``: what our tracker still running at interpreter exit means (the
        framework has no exception hook), recorded as how the run ended."""
        from slurm_energy.api import current, default_label, track
        from slurm_energy.sampling.local import RunEnd

        if self.own and self.tracker is not None and not self.tracker.stopped:
            # the previous training never reached its end hook (it raised and was caught)
            self.end(RunEnd("interrupted", abandoned_means or "the previous training did not reach its end"))
        self.pending, self.done, self.phase = list(self._stages), 0.0, None
        self.own = False
        self.tracker = current()
        if self.tracker is None:
            self.tracker = track(self.label or default_label(default_prefix), **self.track_kwargs).start()
            self.tracker.abandoned_means = abandoned_means
            self.own = True

    def epoch_begin(self, epoch: int) -> None:
        self.epoch_end(None)
        if self.tracker is not None:
            self.phase = self.tracker.phase(f"epoch {epoch}")

    def epoch_end(self, fraction: float | None) -> None:
        """Close the epoch's phase; mark ``fraction`` (progress at the epoch's end) as a stage."""
        if self.phase is not None:
            self.phase.end()
            self.phase = None
        if fraction is not None:
            self.progress(fraction, always=True)

    def progress(self, fraction: float | None, always: bool = False) -> None:
        """Mark every requested stage fraction reached (and ``fraction`` itself if ``always``)."""
        if self.tracker is None or fraction is None:
            return
        fraction = min(1.0, max(0.0, float(fraction)))
        while self.pending and self.pending[0] <= fraction + 1e-12:
            f = self.pending.pop(0)
            if f > self.done:
                self.tracker.stage(f)
                self.done = f
        if always and fraction > self.done:
            self.tracker.stage(fraction)
            self.done = fraction

    def tag(self, **tags) -> None:
        if self.tracker is not None:
            self.tracker.tag(**{k: v for k, v in tags.items() if v})

    def end(self, ended=None):
        """Close an open phase; stop our own tracker (not the user's), ``ended`` saying how the
        training ended (:class:`slurm_energy.sampling.local.RunEnd`; default completed). Returns
        its record or None."""
        self.epoch_end(None)
        rec = None
        if self.own and self.tracker is not None:
            rec = self.tracker.stop(ended)
            self.record = rec
        return rec

    def crashed(self, exc: BaseException, where: str):
        """The training raised ``exc`` (``where``: ``in Trainer.train()``): end with a partial record."""
        from slurm_energy.sampling.local import RunEnd

        return self.end(RunEnd.from_exception(exc, where))


class MarksCallback:
    """What both frameworks' ``EnergyCallback`` share: the :class:`TrainingMarks` and the record.

    Args:
        label: the measurement's label when no ``track()`` is active (default
            ``<hf-train|lightning-fit>-<time>-<pid>``, unique per run).
        stages: extra fractions of training (0..1] to mark as stages, by optimizer step.
        **track_kwargs: passed to :func:`slurm_energy.track` (``out``, ``interval_s``, ``overwrite``,
            ``pue``, ``country``, ``zone``, ``ci``, ``alpha``...).
    """

    def __init__(self, label: str | None = None, stages: Sequence[float] = (), **track_kwargs):
        self.marks = TrainingMarks(label, stages, track_kwargs)

    @property
    def record(self):
        """The JobRecord of our own measurement, once training ended (None before, or in a ``track()``)."""
        return self.marks.record


def count_parameters(model) -> int | None:
    """Number of parameters of a torch module (``sum(p.numel())``), or None."""
    try:
        return int(sum(p.numel() for p in model.parameters()))
    except Exception:
        return None

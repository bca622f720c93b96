"""Hugging Face transformers callback: ``Trainer(..., callbacks=[EnergyCallback()])``.

Epochs become phases, each epoch's end a stage (``global_step / max_steps``; ``stages=`` adds
fractions of the steps); tags from the Trainer's counts: ``model_params`` (``model.num_parameters()``),
``tokens`` (``state.num_input_tokens_seen``, with ``include_num_input_tokens_seen=True``), ``flops``
(``state.total_flos``). transformers has no exception hook for callbacks, so ``on_init_end`` wraps
that Trainer's ``train``: an exception, Ctrl-C or SIGTERM out of ``train()`` ends our measurement
with a ``partial`` record. A callback added later (``add_callback``) is not wrapped: an uncaught
exception is then recorded at interpreter exit, a caught one when the next ``train()`` begins.
"""

from __future__ import annotations

import functools
import sys

from transformers import TrainerCallback

from slurm_energy.callbacks import MarksCallback, TrainingMarks, count_parameters


class EnergyCallback(MarksCallback, TrainerCallback):
    """Marks a transformers ``Trainer.train()`` for :func:`slurm_energy.track` (see the module doc;
    arguments: :class:`~slurm_energy.callbacks.MarksCallback`)."""

    def on_init_end(self, args, state, control, **kwargs):
        trainer = _calling_trainer()
        if trainer is not None:
            _wrap_train(trainer, self.marks)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.marks.begin("hf-train", "transformers Trainer.train() ended without reaching on_train_end "
                                     "(it raised, or the process was stopped)")
        n = None
        if model is not None:
            try:
                n = int(model.num_parameters())
            except Exception:
                n = count_parameters(model)
        self.marks.tag(model_params=n)

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.marks.epoch_begin(int(state.epoch or 0))

    def on_step_end(self, args, state, control, **kwargs):
        if state.max_steps:
            self.marks.progress(state.global_step / state.max_steps)

    def on_epoch_end(self, args, state, control, **kwargs):
        self.marks.epoch_end(state.global_step / state.max_steps if state.max_steps else None)

    def on_train_end(self, args, state, control, **kwargs):
        self.marks.tag(tokens=getattr(state, "num_input_tokens_seen", 0) or 0,
                       flops=float(getattr(state, "total_flos", 0) or 0))
        self.marks.end()


def _calling_trainer():
    """The ``transformers.Trainer`` whose ``__init__`` is calling us (a few frames up), or None."""
    from transformers import Trainer

    f = sys._getframe(1)
    for _ in range(12):
        if f is None:
            return None
        obj = f.f_locals.get("self")
        if isinstance(obj, Trainer):
            return obj
        f = f.f_back
    return None


def _wrap_train(trainer, marks: TrainingMarks) -> None:
    """Make ``trainer.train`` end ``marks``' own measurement when it raises (then re-raise)."""
    orig = trainer.train
    if getattr(orig, "_slurm_energy_wrapped", False):
        return

    @functools.wraps(orig)
    def train(*a, **kw):
        try:
            return orig(*a, **kw)
        except BaseException as e:
            try:
                marks.crashed(e, "in Trainer.train()")
            except Exception as err:  # never hide the training's own exception
                print(f"slurm-energy: partial record not written: {type(err).__name__}: {err}", file=sys.stderr)
            raise

    train._slurm_energy_wrapped = True  # type: ignore[attr-defined]
    trainer.train = train

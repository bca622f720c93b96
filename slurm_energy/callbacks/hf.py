"""Hugging Face transformers callback: ``Trainer(..., callbacks=[EnergyCallback()])``.

Epochs become phases (``epoch 0``...), the end of each epoch a stage (``global_step / max_steps``;
with ``stages=(0.6, 0.8)`` also those fractions of the steps), and the tags come from the
Trainer's own counts: ``model_params`` (``model.num_parameters()``), ``tokens``
(``state.num_input_tokens_seen``, counted when ``TrainingArguments(include_num_input_tokens_seen=True)``)
and ``flops`` (``state.total_flos``, the Trainer's estimate). Requires ``transformers``; imported
only when this module is.
"""

from __future__ import annotations

from typing import Optional, Sequence

from transformers import TrainerCallback

from slurm_energy.callbacks import TrainingMarks, count_parameters


class EnergyCallback(TrainerCallback):
    """Marks a transformers ``Trainer.train()`` for :func:`slurm_energy.track` (see the module doc).

    Args:
        label: the measurement's label when no ``track()`` is active (default ``hf-train``).
        stages: extra fractions of training (0..1] to mark as stages, by optimizer step.
        **track_kwargs: passed to :func:`slurm_energy.track` (``out``, ``interval_s``...).
    Attributes:
        record: the JobRecord of our own measurement (outside Slurm), after training ends.
    """

    def __init__(self, label: Optional[str] = None, stages: Sequence[float] = (), **track_kwargs):
        self.marks = TrainingMarks(label, stages, track_kwargs)
        self.record = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.marks.begin("hf-train")
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
        self.record = self.marks.end()

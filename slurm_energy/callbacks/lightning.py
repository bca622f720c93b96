"""PyTorch Lightning callback: ``Trainer(callbacks=[EnergyCallback()])``.

Epochs become phases (``epoch 0``...), the end of each epoch a stage (its fraction of
``max_epochs``; with ``stages=(0.6, 0.8)`` also those fractions of the estimated optimizer steps),
the model's parameter count and the tokens in batches that carry ``input_ids`` tags. Requires
``lightning`` (or the older ``pytorch_lightning``); imported only when this module is.
"""

from __future__ import annotations

try:
    from lightning.pytorch import Callback
except ImportError:  # pragma: no cover - the older package name
    from pytorch_lightning import Callback

from slurm_energy.callbacks import MarksCallback, count_parameters


def _tokens(batch) -> int:
    ids = batch.get("input_ids") if isinstance(batch, dict) else None
    try:
        return int(ids.numel()) if ids is not None else 0
    except Exception:
        return 0


class EnergyCallback(MarksCallback, Callback):
    """Marks a Lightning fit for :func:`slurm_energy.track` (see the module doc; arguments:
    :class:`~slurm_energy.callbacks.MarksCallback`)."""

    tokens = 0  # in the batches' input_ids since on_fit_start

    def on_fit_start(self, trainer, pl_module) -> None:
        self.tokens = 0
        self.marks.begin("lightning-fit", "Lightning Trainer.fit() ended without on_fit_end or on_exception")
        self.marks.tag(model_params=count_parameters(pl_module))

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.marks.epoch_begin(trainer.current_epoch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.tokens += _tokens(batch)
        total = getattr(trainer, "estimated_stepping_batches", None)
        if isinstance(total, (int, float)) and 0 < total < float("inf"):
            self.marks.progress(trainer.global_step / total)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        max_epochs = trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None
        self.marks.epoch_end((trainer.current_epoch + 1) / max_epochs if max_epochs else None)

    def on_fit_end(self, trainer, pl_module) -> None:
        self.marks.tag(tokens=self.tokens)
        self.marks.end()

    def on_exception(self, trainer, pl_module, exception) -> None:
        """Lightning calls this for an exception out of ``fit`` (Ctrl-C included, which it turns into
        a graceful shutdown): a ``partial`` record and report saying how the run ended."""
        self.marks.tag(tokens=self.tokens)
        self.marks.crashed(exception, "in Trainer.fit()")

"""The Lightning and transformers callbacks with the REAL libraries, on the CPU, with tiny models
built in code (no model hub). Skipped only where the ``ml`` extra is not installed; CI installs it
(scripts/setup.sh)."""

import importlib.util
import math
import os

import pytest

from slurm_energy import track

HAVE_ML = all(importlib.util.find_spec(m) is not None for m in ("torch", "lightning", "transformers"))
# scripts/run-tests.sh (and so CI) sets SLURM_ENERGY_TEST_CLUSTER after scripts/setup.sh installed the
# [ml] extra: there a missing library is a failure, never a skip
IN_CI = bool(os.environ.get("SLURM_ENERGY_TEST_CLUSTER"))
pytestmark = pytest.mark.skipif(not HAVE_ML and not IN_CI, reason="the ml extra (pip install .[ml]) is not installed")


@pytest.fixture(autouse=True)
def _ml_installed():
    if not HAVE_ML:
        pytest.fail("torch/lightning/transformers missing although scripts/setup.sh installs the [ml] extra")

N, SEQ, VOCAB = 64, 6, 10  # samples, tokens per sample, vocabulary


def _token_data():
    import torch

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (N, SEQ), generator=g)
    labels = (ids.sum(dim=1) % 2).long()
    return [{"input_ids": ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": labels[i]}
            for i in range(N)]


# ------------------------------------------------------------------------------------ Lightning


def _lightning_fit(tmp_path, callback, epochs=2):
    import lightning.pytorch as L
    import torch
    from torch.utils.data import DataLoader

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(VOCAB, 4)  # 40 parameters
            self.out = torch.nn.Linear(4, 2)  # 10 parameters

        def training_step(self, batch, batch_idx):
            logits = self.out(self.emb(batch["input_ids"]).mean(dim=1))
            return torch.nn.functional.cross_entropy(logits, batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path),
                        callbacks=[callback])
    trainer.fit(Tiny(), DataLoader(_token_data(), batch_size=16))  # 4 steps per epoch
    return trainer


def test_lightning_callback_epochs_as_phases_progress_as_stages(outside_slurm):
    from slurm_energy.callbacks.lightning import EnergyCallback

    cb = EnergyCallback(label="pl-tiny", stages=(0.25,), out=str(outside_slurm), interval_s=0.1)
    _lightning_fit(outside_slurm, cb)
    rec = cb.record
    assert rec is not None and rec.job_id == "pl-tiny"
    assert [p.name for p in rec.phases] == ["epoch 0", "epoch 1"]
    # 0.25 after 2 of the 8 steps, 0.5 and 1.0 at the ends of the 2 epochs
    assert [s.fraction for s in rec.stages] == [0.25, 0.5, 1.0]
    assert rec.tags["model_params"] == VOCAB * 4 + 4 * 2 + 2
    assert rec.tags["tokens"] == 2 * N * SEQ  # input_ids seen over 2 epochs
    assert all(p.it_j is not None and p.it_j >= 0 for p in rec.phases)
    assert (outside_slurm / "energy-pl-tiny.html").exists()


def test_lightning_callback_adds_to_the_users_track(outside_slurm):
    from slurm_energy.callbacks.lightning import EnergyCallback

    cb = EnergyCallback()
    with track(label="outer", out=str(outside_slurm), interval_s=0.1, report=False) as t:
        with t.phase("setup"):
            pass
        _lightning_fit(outside_slurm, cb, epochs=1)
    assert cb.record is None  # no second measurement
    assert [p.name for p in t.record.phases] == ["setup", "epoch 0"]
    assert [s.fraction for s in t.record.stages] == [1.0]


def test_callback_rejects_bad_stage_fractions():
    from slurm_energy.callbacks.lightning import EnergyCallback

    with pytest.raises(ValueError, match=r"stages=\[1.5\]: fractions of training must be in \(0, 1\]"):
        EnergyCallback(stages=(1.5,))


# --------------------------------------------------------------------------------- transformers


def test_hf_trainer_callback_with_a_tiny_bert(outside_slurm):
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    from slurm_energy.callbacks.hf import EnergyCallback

    cfg = BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    model = BertForSequenceClassification(cfg)  # random init, built in code: no download
    n_params = sum(p.numel() for p in model.parameters())
    args = TrainingArguments(output_dir=str(outside_slurm / "hf"), num_train_epochs=2, per_device_train_batch_size=16,
                             report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no",
                             disable_tqdm=True, include_num_input_tokens_seen=True)
    cb = EnergyCallback(label="hf-tiny", stages=(0.6,), out=str(outside_slurm), interval_s=0.1)
    trainer = Trainer(model=model, args=args, train_dataset=_token_data(), callbacks=[cb])
    trainer.train()
    rec = cb.record
    assert [p.name for p in rec.phases] == ["epoch 0", "epoch 1"]
    # 0.6 is marked at the first step that reaches it (step 5 of 8: 62.5 %), the epochs' ends at 0.5 and 1.0
    assert [s.fraction for s in rec.stages] == [0.5, 0.6, 1.0]
    assert rec.tags["model_params"] == n_params
    assert rec.tags["tokens"] == 2 * N * SEQ
    # the Trainer's FLOPs estimate: 6 x parameters (without embeddings) x tokens
    assert rec.tags["flops"] == pytest.approx(trainer.state.total_flos) and rec.tags["flops"] > 0
    assert not math.isnan(rec.it_kwh)

"""The Lightning and transformers callbacks with the REAL libraries, on the CPU, with tiny models
built in code (no model hub). Skipped only where the ``ml`` extra is not installed; CI installs it
(scripts/setup.sh)."""

import csv
import importlib.util
import io
import json
import math
import os
import signal

import pytest

from slurm_energy import track
from tests.helpers import ordinary_user as ou

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


# --------------------------------------------------------------------------------------------------
# Issue 28, with the real libraries, as an ordinary user (tests/helpers/ordinary_user.py): training runs
# that end badly (an exception, Ctrl-C, SIGTERM) under the transformers and Lightning callbacks get a
# partial report saying how they ended and leave no samples behind; default labels never collide;
# under ``torch.distributed.run`` with 2 CPU processes (gloo) rank 0 measures both ranks once, and
# ``slurm-energy run`` around it gives one report, not two.
#
# Each scenario is a script in a directory the user owns, run in a fresh interpreter (tiny models
# built from a config in code: no download).

DATA = '''
import os, sys, time
import torch
N, SEQ, VOCAB = 64, 6, 10
g = torch.Generator().manual_seed(0)
ids = torch.randint(0, VOCAB, (N, SEQ), generator=g)
labels = (ids.sum(dim=1) % 2).long()
data = [{"input_ids": ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": labels[i]}
        for i in range(N)]
MODE = os.environ.get("MODE", "ok")


def fault(step):
    """At step 3: raise (crash), or say so and wait to be signalled (sigint/sigterm)."""
    if step != 3:
        return
    if MODE == "crash":
        raise RuntimeError("boom at step 3")
    if MODE in ("sigint", "sigterm"):
        print("AT-STEP-3", flush=True)
        time.sleep(120)
'''

HF = DATA + '''
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments
from slurm_energy.callbacks.hf import EnergyCallback


class Fault(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        fault(state.global_step)


cfg = BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=16, num_labels=2)
args = TrainingArguments(output_dir="hf", num_train_epochs=2, per_device_train_batch_size=16, report_to=[],
                         use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True)
cb = EnergyCallback(interval_s=0.1)
Trainer(model=BertForSequenceClassification(cfg), args=args, train_dataset=data, callbacks=[cb, Fault()]).train()
print("RECORD", cb.record.job_id, flush=True)
'''

LIGHTNING = DATA + '''
import lightning.pytorch as L
from torch.utils.data import DataLoader
from slurm_energy.callbacks.lightning import EnergyCallback


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 4)
        self.out = torch.nn.Linear(4, 2)

    def training_step(self, batch, batch_idx):
        fault(self.global_step)
        logits = self.out(self.emb(batch["input_ids"]).mean(dim=1))
        return torch.nn.functional.cross_entropy(logits, batch["labels"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


cb = EnergyCallback(interval_s=0.1)
trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, callbacks=[cb])
trainer.fit(Tiny(), DataLoader(data, batch_size=16))
print("RECORD", cb.record.job_id, flush=True)
'''


def _reports(d):
    return sorted(p.name for p in d.glob("energy-*.html"))


def _status(d, html_name):
    rows = list(csv.DictReader(io.StringIO((d / html_name.replace(".html", ".csv")).read_text())))
    return {r["status"] for r in rows}


def _signalled(d, script, sig):
    """Run ``script`` until it prints AT-STEP-3 (training under way), then send ``sig``."""
    p = ou.popen([ou.PY, str(script)], d, MODE="sigint" if sig == signal.SIGINT else "sigterm")
    try:
        for line in p.stdout:
            if "AT-STEP-3" in line:
                break
        else:
            raise AssertionError(f"never reached step 3: {p.stderr.read()[-3000:]}")
        p.send_signal(sig)
        _out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err


def _no_samples_left(d):
    left = [str(x) for x in (d / "tmp").glob("slurm-energy-*")]
    assert left == [], f"samples left in a temp dir: {left}"


# ------------------------------------------------------------------------------------ transformers


def test_hf_trainer_that_raises_gets_a_partial_report_saying_so(home):
    script = ou.write(home, "train.py", HF)
    r = ou.run([ou.PY, str(script)], home, MODE="crash")
    assert r.returncode == 1 and "RuntimeError: boom at step 3" in r.stderr
    (name,) = _reports(home)
    assert name.startswith("energy-hf-train-")  # the unique default label
    assert _status(home, name) == {"partial"}
    html = (home / name).read_text()
    assert "run ended early: the run raised RuntimeError: boom at step 3 in Trainer.train()" in html
    assert "exit code 1" in html
    assert "is partial: the run raised RuntimeError: boom at step 3" in r.stderr
    _no_samples_left(home)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_hf_trainer_stopped_by_a_signal_gets_a_partial_report(home, sig):
    script = ou.write(home, "train.py", HF)
    rc, err = _signalled(home, script, sig)
    (name,) = _reports(home)
    assert _status(home, name) == {"partial"}
    html = (home / name).read_text()
    if sig == signal.SIGINT:
        assert rc in (-2, 130, 1), err  # KeyboardInterrupt: Python re-raises SIGINT on itself
        assert "the run was interrupted in Trainer.train() (KeyboardInterrupt: Ctrl-C or SIGINT)" in html
        assert "exit code 0:2" in html
    else:
        assert rc == 128 + 15, err  # SignalExit: the exit status a shell gives a SIGTERM'd process
        assert "the run was stopped by SIGTERM" in html and "exit code 0:15" in html
    _no_samples_left(home)


def test_hf_default_labels_are_unique_so_a_rerun_keeps_the_first_report(home):
    script = ou.write(home, "train.py", HF)
    names = []
    for _ in range(2):
        r = ou.run([ou.PY, str(script)], home)
        assert r.returncode == 0, r.stderr[-3000:]
        names.append(r.stdout.split("RECORD", 1)[1].split()[0])
    assert names[0] != names[1]
    assert _reports(home) == sorted(f"energy-{n}.html" for n in names)
    assert all(_status(home, f"energy-{n}.html") <= {"complete(estimated)", "complete(partial-coverage,estimated)"}
               for n in names)
    _no_samples_left(home)


# --------------------------------------------------------------------------------------- Lightning


def test_lightning_fit_that_raises_gets_a_partial_report_saying_so(home):
    script = ou.write(home, "fit.py", LIGHTNING)
    r = ou.run([ou.PY, str(script)], home, MODE="crash")
    assert r.returncode == 1 and "boom at step 3" in r.stderr
    (name,) = _reports(home)
    assert name.startswith("energy-lightning-fit-") and _status(home, name) == {"partial"}
    assert "the run raised RuntimeError: boom at step 3 in Trainer.fit()" in (home / name).read_text()
    _no_samples_left(home)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_lightning_fit_stopped_by_a_signal_gets_a_partial_report(home, sig):
    script = ou.write(home, "fit.py", LIGHTNING)
    rc, err = _signalled(home, script, sig)
    (name,) = _reports(home)
    assert _status(home, name) == {"partial"}, err[-3000:]
    html = (home / name).read_text()
    assert "run ended early" in html and ("SIGTERM" in html if sig == signal.SIGTERM else "SIGINT" in html)
    assert rc != 0
    _no_samples_left(home)


# ------------------------------------------------------------------- torch.distributed.run, 2 ranks

DDP = '''
import json, os, sys, time
import torch, torch.distributed as dist
from slurm_energy import track

dist.init_process_group("gloo")
rank = int(os.environ["LOCAL_RANK"])
with track(label="ddp", interval_s=0.2) as t:
    dist.barrier()
    c0 = time.process_time()
    with t.phase("train"):
        x = torch.randn(200, 200)
        for _ in range(int(os.environ.get("STEPS", "2500"))):
            x = (x @ x).tanh()
            dist.all_reduce(x)
    cpu = time.process_time() - c0
    dist.barrier()
with open(f"cpu-{rank}.json", "w") as f:
    json.dump({"cpu_s": cpu, "mode": t.mode, "covers": t.covers,
               "record_cpu_s": t.record.nodes[0].cpu_time_s if t.record is not None else None}, f)
dist.destroy_process_group()
'''


def _torchrun(script):
    return [ou.PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)]


def test_torchrun_rank0_measures_every_local_rank_once(home):
    script = ou.write(home, "ddp.py", DDP)
    r = ou.run(_torchrun(script), home, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    r0, r1 = (json.loads((home / f"cpu-{i}.json").read_text()) for i in (0, 1))
    assert r0["mode"] == "local" and r1["mode"] == "noop" and r1["record_cpu_s"] is None
    assert r0["covers"].startswith("torchrun launcher ") and "2 local ranks" in r0["covers"]
    assert _reports(home) == ["energy-ddp.html"]
    both = r0["cpu_s"] + r1["cpu_s"]
    # both ranks' CPU time in the block (each measured by itself), once: rank 0 alone would be about
    # half; counting a rank twice, about 1.5x. Slack: the launcher's own CPU and the barriers' edges.
    print("torchrun CPU s: rank 0", r0["cpu_s"], "rank 1", r1["cpu_s"], "record", r0["record_cpu_s"])
    assert 0.85 * both <= r0["record_cpu_s"] <= both + 1.5, (r0, r1)
    assert r0["record_cpu_s"] > 1.5 * r0["cpu_s"]
    assert "local rank 0 measures torchrun launcher" in r.stderr


def test_run_around_torchrun_is_one_measurement_with_tracks_phases(home):
    script = ou.write(home, "ddp.py", DDP)
    r = ou.run([ou.PY, "-m", "slurm_energy.cli.main", "run", "--interval", "0.2", "--label", "wrapped", "--"]
               + _torchrun(script), home, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert _reports(home) == ["energy-wrapped.html"]  # track() deferred: no energy-ddp.html
    assert "runs inside `slurm-energy run` (wrapped)" in r.stderr
    r0 = json.loads((home / "cpu-0.json").read_text())
    assert r0["mode"] == "run" and r0["record_cpu_s"] is None
    phases = (home / "energy-wrapped.phases.csv").read_text()
    assert ",phase,train," in phases
    _no_samples_left(home)

"""A small real ML training job: an MLP on scikit-learn's bundled digits data set (8x8 images).

Trains for TRAIN_SECONDS (default 40 s) of wall time split into EPOCHS (default 4) epochs of
partial_fit passes, then prints the held-out accuracy and the CPU time the job measured itself (to
compare with `jobenergy`). Each epoch is a phase and each epoch's end a stage of
``slurm_energy.track``: under Slurm with the slurm-energy hooks the job's one record gets per-epoch
energy; run directly (``python train_digits.py``) the same sampler runs in this process and writes
``energy-train-digits.html``/``.csv`` (+ ``.phases.csv``) here.
"""

import os
import time

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

from slurm_energy import track

budget = float(os.environ.get("TRAIN_SECONDS", "40"))
epochs = int(os.environ.get("EPOCHS", "4"))
with track(label="train-digits", interval_s=float(os.environ.get("SAMPLE_SECONDS", "1"))) as t:
    with t.phase("load data"):
        X, y = load_digits(return_X_y=True)  # ships with scikit-learn: no download
        X = StandardScaler().fit_transform(X)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
    clf = MLPClassifier(hidden_layer_sizes=(512, 256), learning_rate_init=1e-3, random_state=0)
    # weights and biases of 64 -> 512 -> 256 -> 10
    t.tag(model_params=64 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10)
    t0 = time.time()
    passes = 0
    for epoch in range(epochs):
        with t.phase(f"epoch {epoch}"):
            end = t0 + budget * (epoch + 1) / epochs
            while time.time() < end:
                clf.partial_fit(X_tr, y_tr, classes=list(range(10)))
                passes += 1
        t.stage((epoch + 1) / epochs)
    with t.phase("evaluate"):
        acc = clf.score(X_te, y_te)
print(f"epochs={epochs} passes={passes} wall_s={time.time() - t0:.1f} test_accuracy={acc:.4f}")
print(f"self_cpu_s={time.process_time():.2f}")

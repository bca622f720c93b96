"""A small real ML training job: an MLP on scikit-learn's bundled digits data set (8x8 images).

Trains epoch by epoch (partial_fit) for TRAIN_SECONDS (default 40 s) of wall time, then prints the
held-out accuracy and the CPU time the job measured itself (to compare with `jobenergy`).
"""

import os
import time

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

budget = float(os.environ.get("TRAIN_SECONDS", "40"))
X, y = load_digits(return_X_y=True)  # ships with scikit-learn: no download
X = StandardScaler().fit_transform(X)
X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
clf = MLPClassifier(hidden_layer_sizes=(512, 256), learning_rate_init=1e-3, random_state=0)
t0 = time.time()
epochs = 0
while time.time() - t0 < budget:
    clf.partial_fit(X_tr, y_tr, classes=list(range(10)))
    epochs += 1
print(f"epochs={epochs} wall_s={time.time() - t0:.1f} test_accuracy={clf.score(X_te, y_te):.4f}")
print(f"self_cpu_s={time.process_time():.2f}")

#!/usr/bin/python3
"""Synthetic data for tests/bench/train.sh, in a form both sides read
without parsing: DIR/{train,test}.shape ("rows cols") and .f64 (the
columns one after the other, float64, then the target).

The target is positive (MAPE is defined), depends nonlinearly on a few
features (so the forest has something to find) and linearly on the rest.

usage: train_data.py DIR ROWS COLS TEST_ROWS SEED
"""
import sys

import numpy as np

out, n, p, n_test, seed = sys.argv[1], *map(int, sys.argv[2:6])
rng = np.random.default_rng(seed)
X = rng.random((n + n_test, p)) * rng.uniform(1, 1e6, p)  # counters of very different sizes
U = X / X.max(axis=0)
w = rng.uniform(-1, 1, p)
y = (60 + 10 * np.sin(np.pi * U[:, 0] * U[:, 1]) + 20 * (U[:, 2] - 0.5) ** 2 + 10 * U[:, 3]
     + 5 * U[:, 4] + U @ w + rng.normal(0, 1, n + n_test))
for name, rows in (("train", slice(0, n)), ("test", slice(n, n + n_test))):
    with open(f"{out}/{name}.shape", "w") as f:
        f.write(f"{rows.stop - rows.start} {p}\n")
    with open(f"{out}/{name}.f64", "wb") as f:
        f.write(np.asfortranarray(X[rows]).tobytes(order="F"))
        f.write(y[rows].tobytes())

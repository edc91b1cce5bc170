#!/usr/bin/python3
"""scikit-learn side of tests/bench/train.sh: the same fit as train_fit.c
on the same files, min-max scaling included for the linear models. Prints
one JSON line like train_fit.

usage: train_peer.py ols|ridge|forest DIR THREADS
"""
import json
import resource
import sys
import time

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler


def load(d, name):
    n, p = map(int, open(f"{d}/{name}.shape").read().split())
    raw = np.fromfile(f"{d}/{name}.f64", dtype=np.float64)
    return raw[: n * p].reshape((n, p), order="F"), raw[n * p:]


def cpu_s():
    """CPU seconds of this process and of finished joblib workers."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


engine, d, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
Xtr, ytr = load(d, "train")
Xte, yte = load(d, "test")
loaded = peak_mb()
if engine == "forest":
    model = RandomForestRegressor(n_estimators=100, n_jobs=threads, random_state=0)
else:
    model = make_pipeline(MinMaxScaler(), LinearRegression() if engine == "ols" else Ridge(alpha=1.0))
c0 = cpu_s()
t0 = time.monotonic()
model.fit(Xtr, ytr)
t1 = time.monotonic()
c1 = cpu_s()
p = model.predict(Xte)
e = yte - p
print(json.dumps({"fit_s": round(t1 - t0, 4), "cpu_s": round(c1 - c0, 4), "mape": float(np.mean(np.abs(e) / yte)),
                  "r2": float(1 - np.sum(e * e) / np.sum((yte - yte.mean()) ** 2)),
                  "rss_loaded_mb": round(loaded, 1), "rss_peak_mb": round(peak_mb(), 1)}))

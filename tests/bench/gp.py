#!/usr/bin/python3
"""Benchmark: `wattprof gp` against scikit-learn's GaussianProcessRegressor
in the same run. For each n, both fit an rbf+white GP (variance, one length
scale, noise) with 5 random restarts on n points of 15 standardised features
and predict 500 more (mean and standard deviation). Each side runs as its
own process; wall time and peak resident memory come from wait4(), and
scikit-learn's time inside Python (fit + predict, without starting the
interpreter and importing it) is shown too; the median of the repeats is
reported, with the log marginal likelihood each
reached. `--fixed` times the same at fixed hyperparameters instead (all 1:
wattprof --no-optimize, scikit-learn optimizer=None): one Cholesky
factorisation and the predictions, without the optimiser.

Usage: tests/bench/gp.py [--build DIR] [--sizes 200,1000,3000] [--repeats 3]
                         [--restarts 5] [--fixed]"""
import argparse
import json
import os
import subprocess
import statistics
import sys
import tempfile
import time

import numpy as np

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchjson import Summary, spread  # noqa: E402
D, N_TEST = 15, 500


def dataset(n, folder):
    rng = np.random.default_rng(n)
    X = rng.uniform(0, 1, (n + N_TEST, D))
    y = (np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.5 * X[:, 2] * X[:, 3] + 0.1 * X[:, 4:].sum(1)
         + 0.05 * rng.standard_normal(n + N_TEST))
    names = [f"x{j}" for j in range(D)]
    paths = []
    for part, rows in (("train", range(n)), ("test", range(n, n + N_TEST))):
        path = os.path.join(folder, f"gp{n}_{part}.csv")
        with open(path, "w") as f:
            f.write(",".join(names + ["y"]) + "\n")
            for i in rows:
                f.write(",".join(repr(float(v)) for v in X[i]) + f",{y[i]!r}\n")
        paths.append(path)
    return X, y, names, paths


def measure(cmd, stdin=None):
    """Runs cmd; returns (seconds, peak RSS in MiB, stdout)."""
    out = tempfile.TemporaryFile()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin else None, stdout=out)
    if stdin:
        p.stdin.write(stdin.encode())
        p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed with status {p.returncode}")
    out.seek(0)
    return secs, ru.ru_maxrss / 1024, out.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--sizes", default="200,1000,3000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--fixed", action="store_true")
    a = ap.parse_args()
    wattprof = os.path.join(a.build, "client", "wattprof")
    print(f"| n | wattprof s | scikit-learn s (in Python) | speed-up | wattprof MiB "
          f"| scikit-learn MiB | LML wattprof | LML scikit-learn |")
    print("|---|---|---|---|---|---|---|---|")
    sm = Summary()
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in a.sizes.split(",")):
            X, y, names, (train, test) = dataset(n, tmp)
            query = json.dumps({"mode": "fixed" if a.fixed else "fit", "kernel": "rbf+white",
                                "standardize": True, "x": X[:n].tolist(), "y": y[:n].tolist(),
                                "xs": X[n:].tolist(), "restarts": a.restarts, "seed": 0,
                                "variance": 1.0, "length_scale": [1.0], "noise": 1.0})
            how = ["--no-optimize"] if a.fixed else ["--restarts", str(a.restarts), "--seed", "0"]
            ours, theirs = [], []
            for _ in range(a.repeats):
                ours.append(measure([wattprof, "gp", "--data", train, "--target", "y",
                                     "--features", ",".join(names), "--kernel", "rbf+white"]
                                    + how + ["--loocv", "none", "--predict", test, "--json"]))
                theirs.append(measure(["/usr/bin/python3", os.path.join(SRC, "tests", "gp_peer.py")],
                                      query))
            lml_o = json.loads(ours[0][2])["log_marginal_likelihood"]
            lml_t = json.loads(theirs[0][2])["lml"]
            to = statistics.median(r[0] for r in ours)
            tt = statistics.median(r[0] for r in theirs)
            mo = statistics.median(r[1] for r in ours)
            mt = statistics.median(r[1] for r in theirs)
            inner = statistics.median(json.loads(r[2])["seconds"] for r in theirs)
            how_s = "fixed hyperparameters" if a.fixed else f"fit with {a.restarts} restarts"
            sm.figure(f"Gaussian process, n = {n}, {how_s}, s",
                      spread([r[0] for r in ours]), spread([r[0] for r in theirs]),
                      "scikit-learn GaussianProcessRegressor process",
                      f"{tt / to:.2f}× (wattprof faster when > 1)",
                      note=f"scikit-learn inside Python {inner:.2f} s; LML {lml_o:.4f} vs {lml_t:.4f}")
            print(f"| {n} | {to:.2f} | {tt:.2f} ({inner:.2f}) | {tt / to:.2f}x ({inner / to:.2f}x) "
                  f"| {mo:.0f} | {mt:.0f} "
                  f"| {lml_o:.4f} | {lml_t:.4f} |", flush=True)
    sm.emit()


if __name__ == "__main__":
    main()

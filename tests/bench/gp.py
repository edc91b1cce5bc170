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

Both sides run on OpenBLAS with --threads threads (OPENBLAS_NUM_THREADS;
1 by default): wattprof links it, and numpy is pointed at it through
LD_LIBRARY_PATH (Debian's openblas-pthread directory holds a libblas.so.3
and liblapack.so.3) unless --peer-blas system leaves numpy on whatever
BLAS the system's alternatives select. The peer reports the BLAS it ran
on. --count adds each side's number of likelihood evaluations, from an
untimed run (ours through a perf uprobe on gp_evaluate, which includes the
final conditioning; needs root).

Usage: tests/bench/gp.py [--build DIR] [--sizes 200,1000,3000] [--repeats 3]
                         [--restarts 5] [--fixed] [--threads 1]
                         [--peer-blas openblas|system] [--count]"""
import argparse
import json
import os
import subprocess
import statistics
import sys
import tempfile
import time

import numpy as np

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
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


def measure(cmd, stdin=None, env=None):
    """Runs cmd; returns (seconds, peak RSS in MiB, stdout)."""
    out = tempfile.TemporaryFile()
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin else None, stdout=out, env=env)
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
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--peer-blas", choices=("openblas", "system"), default="openblas")
    ap.add_argument("--count", action="store_true")
    a = ap.parse_args()
    wattprof = os.path.join(a.build, "client", "wattprof")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads))
    peer_env = dict(env)
    if a.peer_blas == "openblas":
        peer_env["LD_LIBRARY_PATH"] = OPENBLAS_DIR
    print(f"load average at the start: {os.getloadavg()}")
    print(f"| n | wattprof s | scikit-learn s (in Python) | speed-up | wattprof MiB "
          f"| scikit-learn MiB | LML wattprof | LML scikit-learn |"
          + (" evaluations wattprof | evaluations scikit-learn |" if a.count else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if a.count else ""))
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
            cmd = ([wattprof, "gp", "--data", train, "--target", "y", "--features", ",".join(names),
                    "--kernel", "rbf+white"] + how + ["--loocv", "none", "--predict", test, "--json"])
            peer = ["/usr/bin/python3", os.path.join(SRC, "tests", "gp_peer.py")]
            for _ in range(a.repeats):
                ours.append(measure(cmd, env=env))
                theirs.append(measure(peer, query, env=peer_env))
                lo = json.loads(ours[-1][2])["log_marginal_likelihood"]
                peer_out = json.loads(theirs[-1][2])
                print(f"  n={n} run {len(ours)}: wattprof {ours[-1][0]:.2f} s {ours[-1][1]:.0f} MiB "
                      f"LML {lo!r}, scikit-learn {theirs[-1][0]:.2f} s "
                      f"({peer_out['seconds']:.2f} in Python) {theirs[-1][1]:.0f} MiB "
                      f"LML {peer_out['lml']!r} evaluations {peer_out.get('evaluations')}, "
                      f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
            lml_o = json.loads(ours[0][2])["log_marginal_likelihood"]
            lml_t = json.loads(theirs[0][2])["lml"]
            to = statistics.median(r[0] for r in ours)
            tt = statistics.median(r[0] for r in theirs)
            mo = statistics.median(r[1] for r in ours)
            mt = statistics.median(r[1] for r in theirs)
            inner = statistics.median(json.loads(r[2])["seconds"] for r in theirs)
            wall = (f"ours {min(r[0] for r in ours):.2f}..{max(r[0] for r in ours):.2f}, "
                    f"peer {min(r[0] for r in theirs):.2f}..{max(r[0] for r in theirs):.2f}")
            counts = ""
            if a.count:
                counts = f" {count_ours(cmd, env)} | {json.loads(theirs[0][2]).get('evaluations')} |"
            how_s = "fixed hyperparameters" if a.fixed else f"fit with {a.restarts} restarts"
            sm.figure(f"Gaussian process, n = {n}, {how_s}, s",
                      spread([r[0] for r in ours]), spread([r[0] for r in theirs]),
                      "scikit-learn GaussianProcessRegressor process",
                      f"{tt / to:.2f}× (wattprof faster when > 1)",
                      note=f"scikit-learn inside Python {inner:.2f} s; LML {lml_o:.4f} vs {lml_t:.4f}")
            print(f"| {n} | {to:.2f} | {tt:.2f} ({inner:.2f}) | {tt / to:.2f}x ({inner / to:.2f}x) "
                  f"| {mo:.0f} | {mt:.0f} "
                  f"| {lml_o:.6f} | {lml_t:.6f} |{counts}", flush=True)
            print(f"  n={n}: {a.repeats} runs, wall s {wall}; peer BLAS "
                  f"{json.loads(theirs[0][2]).get('blas')}; load {os.getloadavg()}",
                  file=sys.stderr, flush=True)
    sm.emit()


def count_ours(cmd, env):
    """wattprof's calls of gp_evaluate in one run, through a perf uprobe."""
    # A probe left from an earlier build would point into the old binary.
    subprocess.run(["perf", "probe", "-q", "-d", "probe_wattprof:gp_evaluate"],
                   stderr=subprocess.DEVNULL)
    subprocess.run(["perf", "probe", "-q", "-x", cmd[0], "gp_evaluate"], stderr=subprocess.DEVNULL)
    r = subprocess.run(["perf", "stat", "-x", ",", "-e", "probe_wattprof:gp_evaluate", "--"] + cmd,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in r.stderr.splitlines():
        if "gp_evaluate" in line:
            return line.split(",")[0]
    return "?"


if __name__ == "__main__":
    main()

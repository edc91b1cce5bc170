#!/usr/bin/python3
"""Peer for the Gaussian-process tests and benchmark: scikit-learn's
GaussianProcessRegressor on the same data and kernel as wattprof's GP.

Reads one JSON object (or a list of them) on stdin and writes the answer (or
the list of answers) on stdout.
  {"mode": "fixed", "kernel": "matern32+white", "x": [[...]...], "y": [...],
   "xs": [[...]...], "variance": v, "length_scale": [l...], "noise": s}
      -> {"lml": ..., "mean": [...], "var": [...], "seconds": fit + predict}  (optimizer=None)
  {"mode": "fit", "kernel": ..., "ard": bool, "x": ..., "y": ..., "restarts": N, "seed": S,
   "xs": optional points to predict}
      -> {"lml": ..., "theta": [...], "mean": [...], "std": [...], "seconds": fit + predict,
          "evaluations": calls of the log marginal likelihood with its gradient}
Every answer also names the BLAS numpy runs on ("blas": threadpoolctl's
"internal_api/num_threads" of each, or "reference" when it knows none).
"standardize": true scales the features as wattprof does (mean 0, population sd 1).
Kernels: rbf, matern12, matern32, matern52, each with its own variance
(ConstantKernel * base), optionally "+white" (WhiteKernel). Rows of x are
points; alpha is 0 so that K is exactly the kernel's matrix."""
import json
import sys
import time

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, WhiteKernel

NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


class CountingGPR(GaussianProcessRegressor):
    """Counts the optimiser's evaluations (the likelihood with its gradient),
    which is what the two sides' optimisers are compared on."""

    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        if eval_gradient:
            self.evaluations_ = getattr(self, "evaluations_", 0) + 1
        return super().log_marginal_likelihood(theta, eval_gradient, clone_kernel)


def blas():
    from threadpoolctl import threadpool_info
    found = [f"{i['internal_api']}/{i['num_threads']}" for i in threadpool_info()
             if i["user_api"] == "blas"]
    return ",".join(found) or "reference"


def kernel(spec, d, ard, variance=1.0, length_scale=None, noise=1.0):
    parts = spec.split("+")
    base = parts[0]
    ls = length_scale if length_scale is not None else ([1.0] * d if ard else 1.0)
    ls = np.asarray(ls) if np.ndim(ls) else float(ls)
    if base == "rbf":
        k = RBF(length_scale=ls)
    elif base in NU:
        k = Matern(length_scale=ls, nu=NU[base])
    else:
        raise SystemExit(f"gp_peer: unknown kernel {base}")
    k = ConstantKernel(variance) * k
    if parts[1:] == ["white"]:
        k = k + WhiteKernel(noise)
    elif parts[1:]:
        raise SystemExit(f"gp_peer: unsupported kernel {spec}")
    return k


def answer(q):
    x = np.asarray(q["x"], dtype=float)
    y = np.asarray(q["y"], dtype=float)
    xs = np.asarray(q.get("xs", x[:0]), dtype=float)
    if q.get("standardize"):  # as wattprof: population standard deviation
        mu, sd = x.mean(0), x.std(0)
        sd[sd == 0] = 1
        x, xs = (x - mu) / sd, (xs - mu) / sd
    if q["mode"] == "fixed":
        ls = q["length_scale"]
        k = kernel(q["kernel"], x.shape[1], len(ls) > 1, q["variance"],
                   ls if len(ls) > 1 else ls[0], q.get("noise", 1.0))
        t = time.perf_counter()
        gp = GaussianProcessRegressor(kernel=k, alpha=0.0, optimizer=None).fit(x, y)
        mean, std = gp.predict(xs, return_std=True)
        out = {"lml": gp.log_marginal_likelihood_value_, "mean": mean.tolist(),
               "var": (std ** 2).tolist(), "seconds": time.perf_counter() - t}
    else:
        k = kernel(q["kernel"], x.shape[1], q.get("ard", False))
        t = time.perf_counter()
        gp = CountingGPR(kernel=k, alpha=0.0, n_restarts_optimizer=q["restarts"],
                         random_state=q["seed"]).fit(x, y)
        out = {"lml": gp.log_marginal_likelihood_value_, "theta": gp.kernel_.theta.tolist(),
               "evaluations": getattr(gp, "evaluations_", 0)}
        if len(xs):
            mean, std = gp.predict(xs, return_std=True)
            out["mean"], out["std"] = mean.tolist(), std.tolist()
        out["seconds"] = time.perf_counter() - t
    out["blas"] = blas()
    return out


def main():
    q = json.load(sys.stdin)
    json.dump([answer(x) for x in q] if isinstance(q, list) else answer(q), sys.stdout)


if __name__ == "__main__":
    main()

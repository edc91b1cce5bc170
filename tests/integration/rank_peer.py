"""Peer for `wattprof rank`: the ranking of docs/design.md written independently
with numpy (outliers by strict 1.5 IQR fences, numpy's default linear
quantiles, the bubble sort from h0 with merged ranks, mean over ranges).

    rank_peer.py gen DIR N SEED   writes N random datasets DIR/case-K.json
    rank_peer.py check DIR N WATTPROF
                                  ranks each with numpy and with
                                  `wattprof rank --h0 given --json`, and
                                  fails on the first disagreement
"""
import json
import subprocess
import sys

import numpy as np

RANGES = [(95, 5), (90, 10), (85, 15), (80, 20), (75, 25), (70, 30), (65, 35), (55, 45)]


def clean(x):
    x = np.asarray(x, dtype=float)
    q1, q3 = np.quantile(x, [0.25, 0.75])
    iqr = q3 - q1
    return x[(x >= q1 - 1.5 * iqr) & (x <= q3 + 1.5 * iqr)]


def compare(a, b, rng):
    u, l = rng[0] / 100, rng[1] / 100
    if np.quantile(a, u) < np.quantile(b, l):
        return -1
    if np.quantile(b, u) < np.quantile(a, l):
        return 1
    return 0


def ranks(samples, rng):
    order = list(range(len(samples)))
    p = len(order)
    for i in range(p):
        for j in range(p - 1 - i):
            if compare(samples[order[j + 1]], samples[order[j]], rng) < 0:
                order[j], order[j + 1] = order[j + 1], order[j]
    r = [0] * p
    r[order[0]] = 1
    for k in range(1, p):
        same = compare(samples[order[k - 1]], samples[order[k]], rng) == 0
        r[order[k]] = r[order[k - 1]] + (0 if same else 1)
    return r


def gen(d, n, seed):
    g = np.random.default_rng(seed)
    for k in range(n):
        p = int(g.integers(2, 9))
        data = {}
        for v in range(p):
            m = int(g.integers(4, 41))
            mu = g.uniform(1, 1.6)
            x = mu + g.standard_normal(m) * g.uniform(0.01, 0.2)
            if g.uniform() < 0.5:  # some outliers
                x[: int(g.integers(1, 3))] *= g.uniform(1.5, 3)
            data[f"v{v}"] = [float(abs(t)) for t in x]
        json.dump(data, open(f"{d}/case-{k}.json", "w"))


def check(d, n, wattprof):
    for k in range(n):
        path = f"{d}/case-{k}.json"
        data = json.load(open(path))
        names = list(data)
        samples = [clean(data[v]) for v in names]
        per_range = [ranks(samples, r) for r in RANGES]
        mean = [sum(pr[v] for pr in per_range) / len(RANGES) for v in range(len(names))]
        rep = ranks(samples, (75, 25))
        out = subprocess.run([wattprof, "rank", "--data", path, "--h0", "given", "--json"],
                             capture_output=True, text=True, check=True)
        got = {v["name"]: v for v in json.loads(out.stdout)["variants"]}
        for i, v in enumerate(names):
            if abs(got[v]["mean_rank"] - mean[i]) > 1e-12 or got[v]["rank"] != rep[i] or \
                    got[v]["ranks"] != [pr[i] for pr in per_range]:
                print(f"{path}: {v}: wattprof mean {got[v]['mean_rank']} rank {got[v]['rank']} "
                      f"ranks {got[v]['ranks']}, numpy mean {mean[i]} rank {rep[i]} "
                      f"ranks {[pr[i] for pr in per_range]}")
                sys.exit(1)
    print(f"{n} random datasets: wattprof and numpy agree on every rank")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        check(sys.argv[2], int(sys.argv[3]), sys.argv[4])

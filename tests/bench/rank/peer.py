"""Benchmark peer: the ranking of docs/design.md in numpy, written to be quick
(outliers removed and quantiles taken once per variant and range, then the
bubble sort on table lookups). Prints the mean ranks as JSON and, on
stderr, the seconds spent ranking (after imports and reading)."""
import json
import sys
import time

import numpy as np

RANGES = [(95, 5), (90, 10), (85, 15), (80, 20), (75, 25), (70, 30), (65, 35), (55, 45)]


def clean(x):
    q1, q3 = np.quantile(x, [0.25, 0.75])
    iqr = q3 - q1
    return x[(x >= q1 - 1.5 * iqr) & (x <= q3 + 1.5 * iqr)]


def sort_rank(up, lo, p):
    def cmp(a, b):
        return -1 if up[a] < lo[b] else 1 if up[b] < lo[a] else 0
    order = list(range(p))
    for i in range(p):
        for j in range(p - 1 - i):
            if cmp(order[j + 1], order[j]) < 0:
                order[j], order[j + 1] = order[j + 1], order[j]
    r = [0] * p
    r[order[0]] = 1
    for k in range(1, p):
        r[order[k]] = r[order[k - 1]] + (0 if cmp(order[k - 1], order[k]) == 0 else 1)
    return r


data = json.load(open(sys.argv[1]))
t0 = time.perf_counter()
names = list(data)
samples = [clean(np.asarray(data[v], dtype=float)) for v in names]
p = len(names)
mean = np.zeros(p)
for u, l in RANGES:
    up = [np.quantile(s, u / 100) for s in samples]
    lo = [np.quantile(s, l / 100) for s in samples]
    mean += sort_rank(up, lo, p)
mean /= len(RANGES)
print(f"{time.perf_counter() - t0:.6f}", file=sys.stderr)
print(json.dumps(dict(zip(names, mean.tolist()))))

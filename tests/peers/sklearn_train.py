#!/usr/bin/python3
"""scikit-learn peer for `wattprof train`.

Writes a copy of a CSV with a `fold` column from KFold(K, shuffle=True,
random_state=SEED), then prints (JSON) the cross-validated errors that
scikit-learn gets on exactly those folds with min-max scaling fitted on each
training fold: OLS, Ridge, Lasso, RandomForestRegressor, and ridge per
cache-miss class (one scaler per training fold, one model per class); and
the two-class ridge fitted on every row, as a model file would hold it.

usage: sklearn_train.py IN.csv OUT.csv TARGET FEATURES CLASS_COLUMN THRESHOLD
"""
import csv
import json
import sys

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Lasso, LinearRegression, Ridge
from sklearn.model_selection import KFold
from sklearn.preprocessing import MinMaxScaler


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def metrics(y, p):
    e = y - p
    return {"rows": len(y), "mape": float(np.mean(np.abs(e) / y)),
            "mae": float(np.mean(np.abs(e))), "rmse": float(np.sqrt(np.mean(e * e))),
            "r2": float(1 - np.sum(e * e) / np.sum((y - y.mean()) ** 2))}


def cv(make, X, y, fold, klass=None):
    pred = np.empty(len(y))
    for f in np.unique(fold):
        tr, te = np.where(fold != f)[0], np.where(fold == f)[0]
        sc = MinMaxScaler().fit(X[tr])
        groups = [None] if klass is None else [True, False]
        for g in groups:
            a = tr if g is None else tr[klass[tr] == g]
            b = te if g is None else te[klass[te] == g]
            m = make().fit(sc.transform(X[a]), y[a])
            pred[b] = m.predict(sc.transform(X[b]))
    return pred


def main():
    src, out, target, features, class_col, threshold = sys.argv[1:7]
    header, rows = read(src)
    fold = np.empty(len(rows), dtype=int)
    for k, (_, te) in enumerate(KFold(5, shuffle=True, random_state=0).split(rows)):
        fold[te] = k
    with open(out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header + ["fold"])
        for r, k in zip(rows, fold):
            w.writerow(r + [k])
    col = {n: i for i, n in enumerate(header)}
    data = np.array(rows, dtype=float)
    X = data[:, [col[n] for n in features.split(",")]]
    y = data[:, col[target]]
    hi = data[:, col[class_col]] >= float(threshold)
    engines = {
        "ols": LinearRegression,
        "ridge": lambda: Ridge(alpha=0.01),
        "lasso": lambda: Lasso(alpha=1.0),
        "lasso-0.01": lambda: Lasso(alpha=0.01),
        "forest": lambda: RandomForestRegressor(n_estimators=100, random_state=0),
    }
    res = {name: metrics(y, cv(make, X, y, fold)) for name, make in engines.items()}
    p = cv(lambda: Ridge(alpha=0.01), X, y, fold, hi)
    res["ridge-classes"] = {"high-miss": metrics(y[hi], p[hi]), "low-miss": metrics(y[~hi], p[~hi]),
                            "all": metrics(y, p)}
    sc = MinMaxScaler().fit(X)
    final = []
    for g in [True, False]:
        m = Ridge(alpha=0.01).fit(sc.transform(X[hi == g]), y[hi == g])
        final.append({"intercept": float(m.intercept_), "coef": m.coef_.tolist()})
    res["ridge-classes-final"] = {"min": sc.data_min_.tolist(), "max": sc.data_max_.tolist(),
                                  "models": final}
    json.dump(res, sys.stdout, indent=1)


main()

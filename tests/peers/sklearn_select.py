#!/usr/bin/python3
"""scikit-learn/scipy peer for `wattprof select`: prints (JSON) per feature
Spearman |rho| with the target (scipy), the PCA score sum_k
explained_variance_ratio_k * |component_kj| of the standardised features
(scikit-learn PCA), and RandomForestRegressor's impurity importances.

usage: sklearn_select.py IN.csv TARGET FEATURES TREES
"""
import csv
import json
import sys

import numpy as np
from scipy.stats import spearmanr
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestRegressor

src, target, features, trees = sys.argv[1:5]
with open(src, newline="") as f:
    rows = list(csv.reader(f))
col = {n: i for i, n in enumerate(rows[0])}
data = np.array(rows[1:], dtype=float)
names = features.split(",")
X = data[:, [col[n] for n in names]]
y = data[:, col[target]]
sd = X.std(axis=0)
live = sd > 0  # a constant feature has no correlation and no loading
Z = (X[:, live] - X[:, live].mean(axis=0)) / sd[live]
pca = PCA().fit(Z)
score = np.zeros(len(names))
score[live] = (pca.explained_variance_ratio_[:, None] * np.abs(pca.components_)).sum(axis=0)
rf = RandomForestRegressor(n_estimators=int(trees), random_state=0).fit(X, y)
out = {}
for j, n in enumerate(names):
    rho = spearmanr(X[:, j], y)[0] if live[j] else None
    out[n] = {"spearman": None if rho is None else abs(float(rho)), "pca": float(score[j]),
              "forest": float(rf.feature_importances_[j])}
json.dump(out, sys.stdout, indent=1)

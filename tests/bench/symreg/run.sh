#!/usr/bin/env bash
# Symbolic regression against DEAP: the same problems, population,
# generations, limits and loop (see deap_peer.py), 10 seeds each; prints
# evaluations per second, wall time, median and best test error, and ratios.
#
# usage: tests/bench/symreg/run.sh [BUILDDIR] (GENERATIONS, SEEDS, POPULATION
# in the environment; defaults 30, 10, 300). Run on an otherwise idle machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../../build}
wattprof=$(cd "$build" && pwd)/client/wattprof
python=/usr/bin/python3
gens=${GENERATIONS:-30} seeds=${SEEDS:-10} pop=${POPULATION:-300}
threads=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

"$python" - <<'PY'
import math, random
r = random.Random(2024)
def write(path, cols, rows):
    with open(path, "w") as f:
        f.write(",".join(cols) + "\n")
        for row in rows:
            f.write(",".join(repr(v) for v in row) + "\n")
for part in ("train", "test"):
    rows = [(n, m, 3 * n**3 + 2 * n * m + 5)
            for n, m in ((r.uniform(1, 10), r.uniform(1, 10)) for _ in range(30))]
    write(f"memory-{part}.csv", ("n", "m", "y"), rows)
    xs = [r.uniform(0, 2) for _ in range(20)]
    write(f"nguyen7-{part}.csv", ("x", "y"),
          [(x, math.log(x + 1) + math.log(x * x + 1)) for x in xs])
    xs = [r.uniform(-1, 1) for _ in range(20)]
    write(f"koza1-{part}.csv", ("x", "y"), [(x, x**4 + x**3 + x**2 + x) for x in xs])
PY

# problem name, features, primitives, fitness
problems=(
  "memory|n,m|add,mul,square,cube|mape"
  "nguyen7|x|add,sub,mul,div,log,exp|rmse"
  "koza1|x|add,sub,mul,div|rmse"
)
for p in "${problems[@]}"; do
  IFS='|' read -r name feats prims fit <<<"$p"
  cat >"$name.ini" <<EOF2
[data]
train = $name-train.csv
test = $name-test.csv
target = y
features = ${feats//,/, }
[primitives]
functions = ${prims//,/, }
constants = on
[evolution]
population = $pop
generations = $gens
crossover = 1.0
mutation = 0.5
tournament_fitness = 3
tournament_parsimony = 1.1
tie = exact
max_depth = 17
max_size = 60
init_min_depth = 1
init_max_depth = 3
restarts = 0
stall = 0
[fitness]
metric = $fit
[constants]
lm = on
lm_iterations = 20
cache = off
EOF2
  for s in $(seq 1 "$seeds"); do
    "$python" - "$name" "$feats" "$prims" "$fit" "$s" "$pop" "$gens" >"$name-$s.peer.json" <<'PY'
import json, sys
name, feats, prims, fit, seed, pop, gens = sys.argv[1:]
json.dump({"seed": int(seed), "train": f"{name}-train.csv", "test": f"{name}-test.csv",
           "features": feats.split(","), "target": "y", "fitness": fit,
           "primitives": prims.split(","), "population": int(pop), "generations": int(gens),
           "crossover": 1.0, "mutation": 0.5, "tournament_fitness": 3,
           "tournament_parsimony": 1.1, "max_depth": 17, "max_size": 60,
           "init_min_depth": 1, "init_max_depth": 3}, sys.stdout)
PY
    # Interleaved, so that any drift in machine load hits both sides.
    "$wattprof" symreg "$name.ini" --json --seed "$s" --threads 1 >"$name-$s.c1.json"
    "$wattprof" symreg "$name.ini" --json --seed "$s" --threads "$threads" >"$name-$s.cn.json"
    "$python" "$here/deap_peer.py" "$name-$s.peer.json" >"$name-$s.deap.json"
    echo "$name seed $s done" >&2
  done
done

"$python" - "$seeds" "$gens" "$pop" "$threads" "$here/.." <<'PY'
import json, statistics as st, sys
seeds, gens, pop, threads = map(int, sys.argv[1:5])
sys.path.insert(0, sys.argv[5])
from benchjson import Summary, spread
sm = Summary()
print(f"population {pop}, {gens} generations, {seeds} seeds; wattprof on 1 and {threads} threads")
print()
print("| problem | tool | evaluations/s (median) | wall s (median) | test error median | test error best |")
print("|---|---|---|---|---|---|")
for name, metric in (("memory", "MAPE"), ("nguyen7", "RMSE"), ("koza1", "RMSE")):
    rows, eps_of = {}, {}
    for tool in ("c1", "cn", "deap"):
        runs = [json.load(open(f"{name}-{s}.{tool}.json")) for s in range(1, seeds + 1)]
        if tool == "deap":
            eps = [r["evaluations"] / r["seconds"] for r in runs]
            wall = [r["seconds"] for r in runs]
            test = [r["test"] for r in runs]
        else:
            eps = [r["evaluations_per_second"] for r in runs]
            wall = [r["seconds"] for r in runs]
            test = [r["test"]["mape" if metric == "MAPE" else "rmse"] for r in runs]
        rows[tool] = (st.median(eps), st.median(wall), st.median(test), min(test))
        eps_of[tool] = eps
    label = {"c1": "wattprof, 1 thread", "cn": f"wattprof, {threads} threads", "deap": "DEAP"}
    for tool, (eps, wall, med, best) in rows.items():
        print(f"| {name} ({metric}) | {label[tool]} | {eps:.0f} | {wall:.2f} | {med:.3g} | {best:.3g} |")
    d = rows["deap"]
    print(f"| {name} | ratio wattprof 1 thread / DEAP | {rows['c1'][0] / d[0]:.1f}x | "
          f"{d[1] / rows['c1'][1]:.1f}x faster | "
          f"{'better' if rows['c1'][2] < d[2] else 'equal' if rows['c1'][2] == d[2] else 'worse'} | |")
    sm.figure(f"symbolic regression, {name}: evaluations/s, 1 thread", spread(eps_of["c1"], 0),
              spread(eps_of["deap"], 0), "DEAP, same problem and loop",
              f"{rows['c1'][0] / d[0]:.1f}×",
              note=f"test {metric} median {rows['c1'][2]:.3g} vs DEAP {d[2]:.3g}")
sm.emit()
PY

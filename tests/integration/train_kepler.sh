#!/usr/bin/env bash
# wattprof train against scikit-learn on the Kepler Broadwell data, on the
# same folds (KFold(5, shuffle=True, random_state=0), written to a column by
# the peer): OLS, ridge and lasso agree on CV MAPE to 0.01 percentage points,
# the forest is within 10 % relative, two-class ridge reports both classes
# and agrees too (the one-class runs say --classes none: the default would
# split on cache_miss). Then the model file of each engine is checked.
set -euo pipefail
data="$TEST_DATA/kepler-broadwell-coremark.csv"
[ -f "$data" ] || { echo "FAIL: $data missing (tests/data is part of the repository)"; exit 1; }
"$PYTHON" -c 'import sklearn' 2>/dev/null || { echo "skip: $PYTHON has no scikit-learn"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
features=cache_miss,cpu_cycles,cpu_instr,cpu_time
"$PYTHON" "$SRCDIR/tests/peers/sklearn_train.py" "$data" "$tmp/kepler.csv" energy_in_pkg_joule \
    "$features" cache_miss 2e7 >"$tmp/sklearn.json"

run() { # NAME ARGS...: wattprof's JSON report into $tmp/NAME.json
    local name=$1; shift
    "$WATTPROF" train "$tmp/kepler.csv" --target energy_in_pkg_joule --features "$features" \
        --folds fold --json --classes none "$@" >"$tmp/$name.json"
}
run ols --engine ols
run ridge --engine ridge --alpha 0.01
run lasso --engine lasso --alpha 1
run lasso-0.01 --engine lasso --alpha 0.01
run forest --engine forest --trees 100 --threads 2
run ridge-classes --engine ridge --alpha 0.01 --classes cache_miss:2e7 --out "$tmp/ridge-model.json"
run compare --compare --alpha 0.01 --classes cache_miss:2e7
"$WATTPROF" train "$tmp/kepler.csv" --target energy_in_pkg_joule --features "$features" \
    --folds fold --engine forest --trees 20 --classes none --out "$tmp/forest-model.json" \
    >"$tmp/forest.txt"

"$PYTHON" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
ref = json.load(open(f"{tmp}/sklearn.json"))
fails = []
def ours(name):
    return json.load(open(f"{tmp}/{name}.json"))["results"][0]["classes"]
for name in ["ols", "ridge", "lasso", "lasso-0.01"]:
    a, b = ours(name)["all"]["mape"] * 100, ref[name]["mape"] * 100
    print(f"{name}: wattprof {a:.4f} %, scikit-learn {b:.4f} %")
    if abs(a - b) > 0.01:
        fails.append(f"{name} MAPE {a:.4f} vs {b:.4f}")
a, b = ours("forest")["all"]["mape"], ref["forest"]["mape"]
print(f"forest: wattprof {a*100:.4f} %, scikit-learn {b*100:.4f} %")
if abs(a - b) > 0.10 * b:
    fails.append(f"forest MAPE {a} vs {b}: more than 10 % apart")
cls = ours("ridge-classes")
for c in ["high-miss", "low-miss", "all"]:
    a, b = cls[c]["mape"] * 100, ref["ridge-classes"][c]["mape"] * 100
    print(f"ridge {c}: wattprof {a:.4f} % ({cls[c]['rows']} rows), scikit-learn {b:.4f} %")
    if abs(a - b) > 0.01 or cls[c]["rows"] != ref["ridge-classes"][c]["rows"]:
        fails.append(f"ridge class {c}: {a} vs {b}")
table = json.load(open(f"{tmp}/compare.json"))["results"]
if [r["engine"] for r in table] != ["ols", "ridge", "lasso", "forest"] or \
        any(set(r["classes"]) != {"high-miss", "low-miss", "all"} for r in table):
    fails.append(f"--compare table has the wrong shape: {table}")
for metric in ["mae", "rmse", "r2"]:
    a, b = ours("ols")["all"][metric], ref["ols"][metric]
    if abs(a - b) > 1e-6 * max(1, abs(b)):
        fails.append(f"OLS {metric} {a} vs {b}")
m = json.load(open(f"{tmp}/ridge-model.json"))
if m["format"] != "wattprof-model/1" or m["engine"] != "ridge" or \
        m["events"] != ["cache_miss", "cpu_cycles", "cpu_instr", "cpu_time"] or \
        len(m["classes"]["models"]) != 2 or m["training"]["rows"] != 390 or \
        len(m["training"]["dataset_sha256"]) != 64:
    fails.append(f"ridge model file: {m}")
fin = ref["ridge-classes-final"]
close = lambda a, b: all(abs(x - y) <= 1e-6 * max(1, abs(y)) for x, y in zip(a, b))
if not close(m["scaler"]["min"], fin["min"]) or not close(m["scaler"]["max"], fin["max"]):
    fails.append("model scaler differs from scikit-learn's MinMaxScaler")
for ours_m, ref_m in zip(m["classes"]["models"], fin["models"]):
    if not close([ours_m["intercept"]] + ours_m["coef"], [ref_m["intercept"]] + ref_m["coef"]):
        fails.append(f"model {ours_m['name']}: {ours_m} vs scikit-learn {ref_m}")
f = json.load(open(f"{tmp}/forest-model.json"))
if f["engine"] != "forest" or len(f["classes"]["models"][0]["trees"]) != 20:
    fails.append("forest model file has the wrong shape")
if fails:
    print("FAIL: " + "; ".join(fails))
    sys.exit(1)
PY

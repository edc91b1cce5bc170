#!/usr/bin/env bash
# `wattprof gp` end to end: the accelerator paper's experiment regenerated
# (tests/gp_conv_layers.py), where the GP with the analytic model as its mean
# must beat both the analytic model alone and the zero-mean GP on LOOCV MAE;
# --predict and --out checked against a prediction recomputed from the
# model file; and every bad input named on one line with a non-zero exit.
set -euo pipefail
: "${WATTPROF:?}" "${SRCDIR:?}" "${PYTHON:=/usr/bin/python3}" "${TEST_SLOW:=1}"
tmp=$(mktemp -d /tmp/wattprof-gp-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$PYTHON" "$SRCDIR/tests/gp_conv_layers.py" >"$tmp/layers.csv"
expr=$("$PYTHON" "$SRCDIR/tests/gp_conv_layers.py" --expr)
feats=H,W,C,F,K,HO,WO,first,last
# The paper refits the hyperparameters for every left-out layer; that takes
# about a minute here, so the quick run uses the closed form.
if [ "$TEST_SLOW" = 1 ]; then loocv=refit restarts=0; else loocv=closed restarts=2; fi
common=(--data "$tmp/layers.csv" --target latency_ms --features "$feats" --kernel matern32+white
        --restarts "$restarts" --seed 1 --loocv "$loocv" --json)
"$WATTPROF" gp "${common[@]}" --mean "$expr" >"$tmp/analytic.json"
"$WATTPROF" gp "${common[@]}" >"$tmp/zero.json"
"$PYTHON" - "$tmp/analytic.json" "$tmp/zero.json" <<'PY'
import json, sys
a, z = (json.load(open(p)) for p in sys.argv[1:3])
gp, alone, zero = a["loocv"]["mae"], a["mean_loocv"]["mae"], z["loocv"]["mae"]
print(f"LOOCV MAE ({a['loocv_method']}), {a['rows']} layers: analytic model {alone:.4f} ms, "
      f"zero-mean GP {zero:.4f} ms, GP with analytic mean {gp:.4f} ms")
assert a["rows"] > 140, a["rows"]
assert gp < alone, "the analytic mean GP does not beat the analytic model"
assert gp < zero, "the analytic mean GP does not beat the zero-mean GP"
PY

# --fit-mean: the analytic model's constants fitted jointly with the kernel
# reach a higher likelihood than the constants as written.
for fitted in "" --fit-mean; do
  "$WATTPROF" gp --data "$tmp/layers.csv" --target latency_ms --features "$feats" \
    --mean "$expr" $fitted --restarts 1 --seed 1 --loocv none --json >"$tmp/fit$fitted.json"
done
"$PYTHON" - "$tmp/fit.json" "$tmp/fit--fit-mean.json" <<'PY'
import json, sys
fixed, fitted = (json.load(open(p)) for p in sys.argv[1:3])
names = [p["name"] for p in fitted["params"]]
assert names[3:] == [f"mean.c{i}" for i in range(7)], names
print(f"LML with the analytic constants {fixed['log_marginal_likelihood']:.3f}, "
      f"fitted {fitted['log_marginal_likelihood']:.3f}")
assert fitted["log_marginal_likelihood"] > fixed["log_marginal_likelihood"]
PY

# --predict and --out: the model file alone reproduces the predictions.
head -21 "$tmp/layers.csv" >"$tmp/few.csv"
"$WATTPROF" gp --data "$tmp/layers.csv" --target latency_ms --features C,F,K --kernel matern32+white \
  --restarts 1 --predict "$tmp/few.csv" --out "$tmp/model.json" --json >"$tmp/pred.json"
"$PYTHON" - "$tmp/model.json" "$tmp/pred.json" "$tmp/few.csv" <<'PY'
import csv, json, sys
import numpy as np
m, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = list(csv.DictReader(open(sys.argv[3])))
assert m["format"] == "wattprof-gp/1" and m["target"] == "latency_ms"
preds = p["predictions"]
assert len(preds) == len(rows) == 20 and preds[0]["line"] == 2
par = {q["name"]: q["value"] for q in m["params"]}
shift, scale = np.array(m["scaler"]["shift"]), np.array(m["scaler"]["scale"])
X = (np.array(m["x"]).T - shift) / scale
Xs = (np.array([[float(r[f]) for f in m["features"]] for r in rows]) - shift) / scale
r = np.sqrt(((Xs[:, None, :] - X[None, :, :]) ** 2).sum(-1)) / par["matern32.length_scale"]
k = par["matern32.variance"] * (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
mean = k @ np.array(m["alpha"])
got = np.array([q["mean"] for q in preds])
assert np.allclose(got, mean, rtol=1e-9, atol=1e-12), (got, mean)
assert all(q["std"] > 0 for q in preds)
print("predictions recomputed from the model file agree")
PY

# Bad input: one line on stderr naming the fault, non-zero exit.
expect_error() { # $1 = exit status wanted ("nonzero" or a number), $2 = text, rest = arguments
  local want=$1 text=$2 rc=0; shift 2
  "$WATTPROF" gp "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$want" = nonzero ]; then [ "$rc" != 0 ] || fail "gp $* exited 0"
  else [ "$rc" = "$want" ] || fail "gp $* exited $rc, want $want"; fi
  [ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "gp $*: not one line on stderr"; }
  grep -qF -- "$text" "$tmp/err" || { cat "$tmp/err"; fail "gp $*: stderr lacks '$text'"; }
  echo "ok: $(cat "$tmp/err")"
}
base=(--data "$tmp/layers.csv" --target latency_ms --features C,F,K --restarts 0)
expect_error nonzero "--mean: expression:1:5: unknown feature 'foo'" "${base[@]}" --mean "2*C+foo"
expect_error nonzero "--kernel: kernel:1:1: unknown kernel 'matern31'" "${base[@]}" --kernel matern31+white
expect_error nonzero "--kernel: kernel:1:10: unknown kernel ''" "${base[@]}" --kernel 'matern32+'
printf 'a,y\n1,2\n2,3\n' >"$tmp/two.csv"
expect_error nonzero "$tmp/two.csv: need at least 3 rows to fit a GP, got 2" \
  --data "$tmp/two.csv" --target y --features a
printf 'a,b,y\n1,2,3\n2,x,4\n3,4,5\n' >"$tmp/bad.csv"
expect_error nonzero "$tmp/bad.csv:3:2: non-numeric value 'x' in column 'b'" \
  --data "$tmp/bad.csv" --target y --features a,b
expect_error nonzero "$tmp/bad.csv:1: no column named 'z'" --data "$tmp/bad.csv" --target y --features a,z
expect_error 2 "--fit-mean needs --mean EXPR" "${base[@]}" --fit-mean
expect_error 2 "--loocv: 'often' is not closed, refit or none" "${base[@]}" --loocv often
# Duplicated rows and no noise term: K is singular, jitter is added and said.
printf 'a,b,y\n1,2,3\n2,1,4\n1,2,3\n3,3,5\n0,1,1\n' >"$tmp/dup.csv"
expect_error 3 "$tmp/dup.csv: K is singular (duplicated rows?): added jitter" \
  --data "$tmp/dup.csv" --target y --features a,b --kernel matern32
grep -q "log marginal likelihood" "$tmp/out" || fail "no results printed with jitter"
"$WATTPROF" gp --data "$tmp/dup.csv" --target y --features a,b --kernel matern32 --allow-jitter \
  >/dev/null 2>"$tmp/err" || fail "--allow-jitter still failed"
grep -q "added jitter" "$tmp/err" || fail "--allow-jitter hid the jitter"
echo "all gp checks passed"

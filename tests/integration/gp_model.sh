#!/usr/bin/env bash
# `wattprof gp --model M --predict FILE`: a model written by `--out` predicts
# again without refitting, and its means and standard deviations equal the
# fitted model's to the last bit (both printed by --json to 17 digits), for
# a fitted analytic mean (with a negative constant), a constant mean, ARD,
# a product kernel and a model that needed jitter. Every bad model file or
# option is named on one line with a non-zero exit.
set -euo pipefail
: "${WATTPROF:?}" "${SRCDIR:?}" "${PYTHON:=/usr/bin/python3}"
tmp=$(mktemp -d /tmp/wattprof-gp-model-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$PYTHON" - "$tmp" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
for name, n in (("train", 60), ("test", 25)):
    X = rng.uniform(0, 3, (n, 3))
    y = 2 * X[:, 0] - 1.5 + np.sin(2 * X[:, 1]) + 0.3 * X[:, 2] ** 2 + 0.05 * rng.standard_normal(n)
    with open(f"{sys.argv[1]}/{name}.csv", "w") as f:
        f.write("a,b,c,y\n")
        for row, t in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{t!r}\n")
PY
# Duplicated rows without a noise term: fitted with jitter.
{ cat "$tmp/train.csv"; sed -n 2,6p "$tmp/train.csv"; } >"$tmp/dup.csv"

check_round_trip() { # $1 = label, $2 = training file, rest = fitting options
  local label=$1 data=$2 rc=0; shift 2
  "$WATTPROF" gp --data "$data" --target y --features a,b,c --seed 1 --loocv none \
    --predict "$tmp/test.csv" --out "$tmp/$label.json" --json "$@" >"$tmp/$label.fit" \
    2>"$tmp/$label.err" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "$label: fitting exited $rc"
  "$WATTPROF" gp --model "$tmp/$label.json" --predict "$tmp/test.csv" --json >"$tmp/$label.load" \
    || fail "$label: --model exited $?"
  "$PYTHON" - "$label" "$tmp/$label.fit" "$tmp/$label.load" <<'PY'
import json, sys
label, fit, load = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
a, b = fit["predictions"], load["predictions"]
assert len(a) == len(b) == 25, (len(a), len(b))
assert a == b, [(x, y) for x, y in zip(a, b) if x != y][:3]
assert all(p["std"] > 0 for p in b)
print(f"ok: {label}: 25 predictions from the saved model equal the fitted model's bit for bit "
      f"(jitter {fit['jitter']:g})")
PY
}
check_round_trip fitted_mean "$tmp/train.csv" --kernel matern32+white --mean "2*a - 1.5" --fit-mean \
  --restarts 1
check_round_trip const_mean "$tmp/train.csv" --kernel 'const*rbf+white' --mean const --restarts 1
check_round_trip ard "$tmp/train.csv" --kernel matern52+white --ard --restarts 0
check_round_trip raw_inputs "$tmp/train.csv" --kernel rbf+linear+white --no-standardize --restarts 0
check_round_trip jitter "$tmp/dup.csv" --kernel rbf --no-optimize --allow-jitter
grep -q '"jitter":0.0,' "$tmp/jitter.fit" && fail "the duplicated rows needed no jitter"
# Text output: the same predictions as the fit printed.
"$WATTPROF" gp --model "$tmp/ard.json" --predict "$tmp/test.csv" >"$tmp/ard.txt"
"$WATTPROF" gp --data "$tmp/train.csv" --target y --features a,b,c --kernel matern52+white --ard \
  --restarts 0 --seed 1 --loocv none --predict "$tmp/test.csv" | sed -n '/^predictions for/,$p' \
  | diff - <(sed -n '/^predictions for/,$p' "$tmp/ard.txt") || fail "text predictions differ"
echo "ok: text predictions equal"

# This target crosses zero: MAPE is left out, and why said; MAE, RMSE and R2
# stay. A --predict file with the target column gets its test error.
"$PYTHON" - "$tmp/ard.fit" "$tmp/ard.load" "$tmp/test.csv" <<'PY'
import csv, json, math, sys
fit, load = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
y = [float(r["y"]) for r in csv.DictReader(open(sys.argv[3]))]
assert min(y) < 0 < max(y), (min(y), max(y))
for doc in (fit, load):
    t = doc["test"]
    mu = [p["mean"] for p in doc["predictions"]]
    mae = sum(abs(a - b) for a, b in zip(y, mu)) / len(y)
    assert t["rows"] == 25 and abs(t["mae"] - mae) < 1e-9 * mae, (t, mae)
    assert t["mape"] is None and 0.5 < t["r2"] <= 1, t
    assert "MAPE left out: the target crosses zero" in doc["mape_note"], doc
print(f"ok: test error on 25 rows, MAE {mae:.4f}, R2 {t['r2']:.4f}, no MAPE")
PY
grep -Eq "^test error \(25 rows\): +MAE [0-9.e-]+  RMSE [0-9.e-]+  R2 [0-9.]+  MAPE -$" "$tmp/ard.txt" ||
  fail "no test error line: $(head -3 "$tmp/ard.txt")"
grep -q "^MAPE left out: the target crosses zero" "$tmp/ard.txt" || fail "MAPE's absence not explained"
"$WATTPROF" gp --data "$tmp/train.csv" --target y --features a,b,c --restarts 0 --seed 1 >"$tmp/loo.txt"
grep -Eq "^LOOCV \(closed form\): +MAE .*  R2 [0-9.]+  MAPE -$" "$tmp/loo.txt" ||
  fail "LOOCV line still has a MAPE: $(cat "$tmp/loo.txt")"
# A target that stays positive keeps its MAPE.
awk -F, 'BEGIN { OFS = "," } NR > 1 { $4 += 10 } 1' "$tmp/train.csv" >"$tmp/pos.csv"
"$WATTPROF" gp --data "$tmp/pos.csv" --target y --features a,b,c --restarts 0 --seed 1 --json \
  | "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); assert d["loocv"]["mape"] > 0 and "mape_note" not in d, d'
echo "ok: MAPE only where the target keeps one sign"

# Bad input: one line on stderr naming the fault, non-zero exit.
expect_error() { # $1 = text, rest = arguments
  local text=$1 rc=0; shift
  "$WATTPROF" gp "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" != 0 ] || fail "gp $* exited 0"
  [ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "gp $*: not one line on stderr"; }
  grep -qF -- "$text" "$tmp/err" || { cat "$tmp/err"; fail "gp $*: stderr lacks '$text'"; }
  echo "ok: $(cat "$tmp/err")"
}
# A copy of the ARD model with one change made by Python (jq may be absent),
# which --model must refuse with `text` after the file's name.
refused() { # $1 = name, $2 = Python statement on the document d, $3 = text
  "$PYTHON" -c "import json, sys
d = json.load(open(sys.argv[1]))
$2
json.dump(d, open(sys.argv[2], 'w'))" "$tmp/ard.json" "$tmp/$1.json"
  expect_error "$tmp/$1.json: $3" --model "$tmp/$1.json" --predict "$tmp/test.csv"
}
m=$tmp/ard.json
expect_error "--model: $tmp/none.json: No such file or directory" --model "$tmp/none.json" \
  --predict "$tmp/test.csv"
echo '{"format": "wattprof-gp/1",' >"$tmp/trunc.json"
expect_error "--model: $tmp/trunc.json: not a JSON object" --model "$tmp/trunc.json" \
  --predict "$tmp/test.csv"
refused format 'd["format"] = "wattprof-model/1"' 'format is "wattprof-model/1", not "wattprof-gp/1"'
refused noalpha 'del d["alpha"]' '"alpha" is missing or not an array'
refused shortalpha 'd["alpha"].pop()' 'alpha must be an array of 60 numbers'
refused textx 'd["x"][1][4] = "7"' 'x[1][4] is not a number'
refused fewparams 'd["params"] = d["params"][:2]' '"params" has 2 entries, the kernel needs 5'
refused kernel 'd["kernel"] = "matern31+white"' "kernel:1:1: unknown kernel 'matern31'"
refused mean 'd["mean"] = "2*a + zz"' "expression:1:7: unknown feature 'zz'"
refused scale 'd["scaler"]["scale"][2] = 0' 'scaler.scale[2] is not positive'
cut -d, -f1,2 "$tmp/test.csv" >"$tmp/two_cols.csv"
expect_error "--predict: $tmp/two_cols.csv:1: no column named 'c'" --model "$m" \
  --predict "$tmp/two_cols.csv"
expect_error "--model takes --predict FILE, and no --data or --out" --model "$m"
expect_error "--model takes --predict FILE, and no --data or --out" --model "$m" \
  --predict "$tmp/test.csv" --data "$tmp/train.csv"
# OpenBLAS and L-BFGS-B are opened at run time: a library that is not one,
# or lacks the routines, is named rather than crashed on.
mkdir "$tmp/libs"
echo "not a library" >"$tmp/libs/libopenblas.so.0"
rc=0
LD_LIBRARY_PATH=$tmp/libs "$WATTPROF" gp --data "$tmp/train.csv" --target y --features a,b,c \
  --restarts 0 >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" != 0 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "broken OpenBLAS: rc $rc"; }
grep -qF "wattprof gp: cannot load OpenBLAS (libopenblas.so.0, Debian package libopenblas0):" \
  "$tmp/err" || { cat "$tmp/err"; fail "broken OpenBLAS not named"; }
echo "ok: $(cat "$tmp/err")"
rm "$tmp/libs/libopenblas.so.0"
cp "$(gcc -print-file-name=libm.so.6)" "$tmp/libs/liblbfgsb.so.0" # a real library, no setulb_
rc=0
LD_LIBRARY_PATH=$tmp/libs "$WATTPROF" gp --model "$m" --predict "$tmp/test.csv" \
  >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" != 0 ] && [ "$(wc -l <"$tmp/err")" = 1 ] || { cat "$tmp/err"; fail "fake L-BFGS-B: rc $rc"; }
grep -qF "liblbfgsb.so.0 lacks setulb_" "$tmp/err" || { cat "$tmp/err"; fail "fake L-BFGS-B not named"; }
echo "ok: $(cat "$tmp/err")"
echo "all gp --model checks passed"

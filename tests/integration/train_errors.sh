#!/usr/bin/env bash
# Bad inputs to `wattprof train` and `wattprof select`: each gets exactly one
# line on stderr naming what is wrong and where, and a non-zero exit (not a
# crash). A constant feature is the one case that trains anyway: it is kept,
# reported on one line, and scales to 0 instead of dividing by zero.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# expect_fail PATTERN COMMAND ARGS...: exit 1..127, one stderr line matching
# the extended regex PATTERN.
expect_fail() {
    local pattern=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" = 0 ] || [ "$rc" -ge 128 ] || [ "$lines" != 1 ] || ! grep -Eq -- "$pattern" "$tmp/err"; then
        echo "FAIL: $* -> rc $rc, $lines stderr lines, want /$pattern/:"
        cat "$tmp/err"
        failed=1
    else
        echo "ok: $(cat "$tmp/err")"
    fi
}

printf 'a,b,y\n' >"$tmp/empty.csv"
printf 'a,b,y\n1,2,3\n2,x,4\n3,5,6\n4,1,9\n' >"$tmp/bad.csv"
printf 'a,b,y\n1,2,3\n2,3,0\n3,5,6\n' >"$tmp/zero.csv"
printf 'a,b,c,y\n1,2,3,4\n2,3,1,5\n' >"$tmp/wide.csv"
printf 'a,k,y,dt,f\n1,5,3,1,0\n2,6,4,0,1\n3,7,5,1,0.5\n4,8,6,1,1\n' >"$tmp/misc.csv"
{
    echo "a,b,c,y"
    for i in $(seq 1 40); do echo "$i,7,$((i * i % 13)),$((10 + 2 * i + i * i % 13))"; done
} >"$tmp/const.csv"
T="$WATTPROF train"
S="$WATTPROF select"

expect_fail "empty.csv: no data rows" $T "$tmp/empty.csv" --target y --features a,b
expect_fail "bad.csv:3:2: non-numeric value 'x' in column 'b'" $T "$tmp/bad.csv" --target y --features a,b
expect_fail "zero.csv:3:3: target 'y' is 0; MAPE divides by the target" $T "$tmp/zero.csv" --target y --features a,b --cv 2
expect_fail "OLS needs more rows than features: 1 rows, 3 features.*--engine ridge" $T "$tmp/wide.csv" --target y --features a,b,c --engine ols --cv 2
expect_fail "wide.csv:1: no column named 'nope'" $T "$tmp/wide.csv" --target y --features a,nope
expect_fail "wide.csv:1: no column named 'watts'" $T "$tmp/wide.csv" --target watts --features a
expect_fail "misc.csv:3:4: interval 'dt' is 0; --per needs a positive interval" $T "$tmp/misc.csv" --target y --features a --per dt
expect_fail "--engine 'svm': expected ols, ridge, lasso or forest" $T "$tmp/wide.csv" --target y --features a --engine svm
expect_fail "--alpha 'much': expected a number >= 0 or auto" $T "$tmp/wide.csv" --target y --features a --alpha much
expect_fail "--classes 'k': expected COLUMN:THRESHOLD" $T "$tmp/misc.csv" --target y --features a --classes k
expect_fail "--classes k:100: all 4 rows are in the low-miss class" $T "$tmp/misc.csv" --target y --features a --classes k:100
expect_fail "--cv 9: the number of folds must be between 2 and the number of rows \(4\)" $T "$tmp/misc.csv" --target y --features a --cv 9
expect_fail "--folds f: row 3 has fold id 0.5, expected an integer" $T "$tmp/misc.csv" --target y --features a --folds f
expect_fail "--holdout-last 100: expected a percentage" $T "$tmp/misc.csv" --target y --features a --holdout-last 100
expect_fail "--cv, --folds and --holdout-last exclude each other" $T "$tmp/misc.csv" --target y --features a --cv 2 --holdout-last 20
expect_fail "--target COLUMN is required" $T "$tmp/misc.csv" --features a
expect_fail "unknown option or missing value '--bogus'" $T "$tmp/misc.csv" --target y --features a --bogus
expect_fail "nonexistent.csv: cannot read: No such file or directory" $T "$tmp/nonexistent.csv" --target y --features a
expect_fail "--out: the class column 'k' must be one of --features" $T "$tmp/misc.csv" --target y --features a --classes k:6 --cv 2 --domains package --out "$tmp/m.json"
expect_fail "--out: which RAPL domains does target 'y' measure\? Give --domains" $T "$tmp/misc.csv" --target y --features a --cv 2 --out "$tmp/m.json"
expect_fail "validation round [0-9] of 2: class (high|low)-miss has no training rows" $T "$tmp/misc.csv" --target y --features a --classes k:8 --cv 2
expect_fail "empty.csv: no data rows" $S "$tmp/empty.csv" --target y --features a,b
expect_fail "wide.csv:1: no column named 'nope'" $S "$tmp/wide.csv" --target y --features nope
expect_fail "-k 0: keep at least one feature" $S "$tmp/wide.csv" --target y --features a -k 0
# The dataset and forest options are one parser for both commands: the same
# input gets the same line from each.
for cmd in train select; do
    C="$WATTPROF $cmd"
    expect_fail "^wattprof $cmd: --trees 'x'" $C "$tmp/wide.csv" --target y --features a --trees x
    expect_fail "^wattprof $cmd: --seed '-1'" $C "$tmp/wide.csv" --target y --features a --seed -1
    expect_fail "^wattprof $cmd: --threads ''" $C "$tmp/wide.csv" --target y --features a --threads ''
    expect_fail "^wattprof $cmd: expected one dataset file \(FILE.csv or --data\), got 2\$" \
        $C "$tmp/wide.csv" --data "$tmp/wide.csv" --target y --features a
    expect_fail "^wattprof $cmd: expected one dataset file \(FILE.csv or --data\), got 0\$" \
        $C --target y --features a
    expect_fail "^wattprof $cmd: .*/wide.csv:1: no column named 'nope'" \
        $C --data "$tmp/wide.csv" --target y --features a --per nope --drop-invalid
done

# With --drop-invalid the bad row is skipped and training goes on.
if ! $T "$tmp/bad.csv" --target y --features a,b --cv 3 --drop-invalid --json >"$tmp/out" 2>"$tmp/err" ||
    ! grep -q '"dropped":1' <(tr -d ' \n' <"$tmp/out"); then
    echo "FAIL: --drop-invalid did not skip the bad row"; cat "$tmp/err"; failed=1
fi

# A constant feature: one line naming it, training succeeds, its weight is 0.
for engine in ols ridge lasso forest; do
    if ! $T "$tmp/const.csv" --target y --features a,b,c --engine $engine --cv 4 --domains psys \
        --out "$tmp/const-$engine.json" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL: $engine with a constant feature:"; cat "$tmp/err"; failed=1; continue
    fi
    if [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -q "feature 'b' is constant; kept" "$tmp/err"; then
        echo "FAIL: constant feature not reported on one line:"; cat "$tmp/err"; failed=1
    fi
    grep -Eq 'all +40 +[0-9.]+ ' "$tmp/out" || { echo "FAIL: no finite error line:"; cat "$tmp/out"; failed=1; }
    grep -q nan "$tmp/out" && { echo "FAIL: NaN in the report of $engine"; failed=1; }
done
"$PYTHON" - "$tmp/const-ridge.json" <<'PY' || failed=1
import json, sys
m = json.load(open(sys.argv[1]))
coef = m["classes"]["models"][0]["coef"]
assert coef[1] == 0 and m["scaler"]["min"][1] == m["scaler"]["max"][1] == 7, m
print("ok: constant feature kept in the model with weight 0")
PY
exit $failed

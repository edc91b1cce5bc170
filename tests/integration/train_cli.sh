#!/usr/bin/env bash
# wattprof train's options on data whose answer is known: --per turns counts
# into rates (an exact linear law in rates is fitted exactly), the default
# classes come from a cache-misses column, --holdout-last tests on the
# newest rows only, --alpha auto reports its choice, a seed fixes the folds,
# and the forest's result does not depend on --threads.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# power = 20 + 3e-9 * cycles/s + 1e-7 * cache-misses/s, over intervals of
# varying length; counts are per interval, the target is average power.
"$PYTHON" - "$tmp/counts.csv" <<'PY'
import random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    f.write("dt,cycles,cache-misses,watts\n")
    for i in range(120):
        dt = random.choice([0.5, 1.0, 2.0, 3.0])
        cyc = random.uniform(1e8, 3e9) * dt
        miss = random.choice([random.uniform(1e6, 1.5e7), random.uniform(2.5e7, 8e7)]) * dt
        w = 20 + 3e-9 * cyc / dt + 1e-7 * miss / dt
        f.write(f"{dt},{cyc:.1f},{miss:.1f},{w!r}\n")
PY
W="$WATTPROF train $tmp/counts.csv --target watts --features cycles,cache-misses"
j() { "$PYTHON" -c "import json,sys; d=json.load(open('$1')); print($2)"; }
untimed() { # a --json report without its timings, which vary from run to run
    "$PYTHON" -c "import json,sys; d=json.load(open('$1')); d.pop('timings_s')
for r in d['results']: r.pop('validation_s')
print(json.dumps(d))"
}

$W --per dt --engine ols --json >"$tmp/per.json"
[ "$(j "$tmp/per.json" "d['class_column']")" = cache-misses ] || fail "default classes not taken from cache-misses"
[ "$(j "$tmp/per.json" "sorted(d['results'][0]['classes'])")" = "['all', 'high-miss', 'low-miss']" ] ||
    fail "both classes and the total are not reported"
[ "$(j "$tmp/per.json" "d['results'][0]['classes']['all']['mape'] < 1e-9")" = True ] ||
    fail "rates from --per should fit exactly: $(cat "$tmp/per.json")"
$W --engine ols --classes none --json >"$tmp/counts.json"
[ "$(j "$tmp/counts.json" "d['results'][0]['classes']['all']['mape'] > 1e-3")" = True ] ||
    fail "without --per the counts cannot fit a law in rates"
[ "$(j "$tmp/counts.json" "d['class_column']")" = None ] || fail "--classes none still split"

$W --per dt --holdout-last 25 --json >"$tmp/hold.json"
[ "$(j "$tmp/hold.json" "d['results'][0]['classes']['all']['rows']")" = 30 ] ||
    fail "--holdout-last 25 of 120 rows should test on 30"
[ "$(j "$tmp/hold.json" "d['folds']")" = 1 ] || fail "--holdout-last is one round"

$W --per dt --alpha auto --domains package --out "$tmp/auto.json" >"$tmp/auto.txt"
grep -q "ridge alpha chosen by inner CV on all rows, class low-miss: 1e-06" "$tmp/auto.txt" ||
    fail "ridge auto on exact data should pick the smallest alpha: $(cat "$tmp/auto.txt")"
$W --per dt --alpha auto --classes none --json | "$PYTHON" -c '
import json, sys
a = json.load(sys.stdin)["results"][0]["alpha"]["all"]
assert a == 1e-06, a'
"$PYTHON" - "$tmp/auto.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["engine"] == "ridge" and m["target"] == ["package"], m
assert m["classes"]["event"] == "cache-misses" and m["classes"]["threshold"] == 2e7, m
assert m["training"]["rows"] == 120 and 0 <= m["training"]["cv_mape"] < 0.01, m
hi = m["classes"]["models"][0]
print("ok: ridge auto model", hi)
PY

$W --per dt --engine forest --trees 30 --threads 1 --seed 5 --json >"$tmp/f1.json"
$W --per dt --engine forest --trees 30 --threads 3 --seed 5 --json >"$tmp/f3.json"
$W --per dt --engine forest --trees 30 --threads 1 --seed 6 --json >"$tmp/f6.json"
same() { cmp -s <(untimed "$1") <(untimed "$2"); }
same "$tmp/f1.json" "$tmp/f3.json" || fail "forest differs between 1 and 3 threads"
! same "$tmp/f1.json" "$tmp/f6.json" || fail "forest does not depend on the seed"
$W --per dt --cv 4 --seed 1 --json >"$tmp/s1.json"
$W --per dt --cv 4 --seed 1 --json >"$tmp/s1b.json"
same "$tmp/s1.json" "$tmp/s1b.json" || fail "same seed, different folds"

# --json says where the time went: loading, validation, the model file.
"$PYTHON" - "$tmp/s1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["timings_s"]
assert set(t) == {"load", "validation", "model", "total"}, t
assert all(v >= 0 for v in t.values()) and t["total"] >= t["load"] + t["validation"], t
assert d["results"][0]["validation_s"] > 0, d["results"][0]
PY

# Lasso --alpha auto chooses a penalty from the grid by inner CV (it used to
# fit with the -1 that asks for it). On exact data: the smallest, and a fit.
$W --per dt --engine lasso --alpha auto --classes none --json >"$tmp/lauto.json"
"$PYTHON" - "$tmp/lauto.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["alpha"]["all"] == 1e-06, r["alpha"]
assert r["fold_alpha"]["all"] == [1e-06] * 5, r["fold_alpha"]
assert r["classes"]["all"]["mape"] < 1e-3, r["classes"]
PY
# On noise, a large penalty: the mean, not coefficients of +-1e5.
"$PYTHON" - "$tmp/noise.csv" <<'PY'
import random, sys
random.seed(8)
with open(sys.argv[1], "w") as f:
    f.write("a,b,y\n")
    for i in range(80):
        f.write(f"{random.random()},{random.random()},{100 + random.gauss(0, 1)}\n")
PY
$WATTPROF train "$tmp/noise.csv" --target y --features a,b --engine lasso --alpha auto \
    --domains package --out "$tmp/noise-model.json" >"$tmp/noise.txt"
"$PYTHON" - "$tmp/noise-model.json" "$tmp/noise.txt" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
c = m["classes"]["models"][0]
assert all(abs(w) < 5 for w in c["coef"]) and abs(c["intercept"] - 100) < 1, (c, open(sys.argv[2]).read())
assert "MAPE" in open(sys.argv[2]).read()
PY
# Ridge auto shows the penalty each validation round chose, which the CV
# errors come from, beside the model's.
grep -Eq "^ridge alpha chosen by inner CV on all rows, class low-miss: 1e-06 \(the model's\); in each validation round:( [0-9.e+-]+){5} \(the errors above\)$" \
    "$tmp/auto.txt" || fail "per-round alphas not printed: $(cat "$tmp/auto.txt")"

# --drop-invalid also skips a target MAPE cannot divide by.
printf 'a,y\n1,3\n2,0\n3,7\n4,9\n5,11\n6,13\n' >"$tmp/zero.csv"
$WATTPROF train "$tmp/zero.csv" --target y --features a --cv 2 --drop-invalid --json >"$tmp/zero.json" ||
    fail "--drop-invalid stopped on a zero target"
[ "$(j "$tmp/zero.json" "(d['dataset']['rows'], d['dataset']['dropped'])")" = "(5, 1)" ] ||
    fail "zero target not dropped: $(cat "$tmp/zero.json")"

# The default class column under Kepler's spelling, named in the report.
sed '1s/cache-misses/curr_cache_misses/' "$tmp/counts.csv" >"$tmp/kepler-names.csv"
$WATTPROF train "$tmp/kepler-names.csv" --target watts --features cycles,curr_cache_misses \
    --per dt >"$tmp/kn.txt" 2>"$tmp/kn.err"
grep -q "^classes: curr_cache_misses >= 2e+07 is high-miss" "$tmp/kn.txt" ||
    fail "curr_cache_misses not used for the classes: $(cat "$tmp/kn.txt")"
grep -q "classes from column 'curr_cache_misses'" "$tmp/kn.err" || fail "the column used is not said"
# A default split that puts every row in one class is one class, said.
awk -F, 'NR == 1 || $3 < 2e7' "$tmp/counts.csv" >"$tmp/low.csv"
$WATTPROF train "$tmp/low.csv" --target watts --features cycles --per dt >"$tmp/low.txt" 2>"$tmp/low.err" ||
    fail "a one-class default split failed: $(cat "$tmp/low.err")"
grep -q "rows are in the low-miss class of cache-misses >= 2e+07: one class" "$tmp/low.err" ||
    fail "one-class fallback not said: $(cat "$tmp/low.err")"

# --out labels the model with the domains the target column names, and says so.
cp "$tmp/counts.csv" "$tmp/dram.csv"
sed -i '1s/watts/dram_watts/' "$tmp/dram.csv"
$WATTPROF train "$tmp/dram.csv" --target dram_watts --features cycles,cache-misses --per dt \
    --out "$tmp/dram.json" >/dev/null 2>"$tmp/dram.err"
[ "$(j "$tmp/dram.json" "d['target']")" = "['dram']" ] || fail "dram_watts not labelled dram"
grep -q "target 'dram_watts' taken to measure RAPL domain dram" "$tmp/dram.err" || fail "inference not said"
echo "ok"

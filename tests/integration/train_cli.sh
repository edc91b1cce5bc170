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

$W --per dt --alpha auto --out "$tmp/auto.json" >"$tmp/auto.txt"
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
cmp -s "$tmp/f1.json" "$tmp/f3.json" || fail "forest differs between 1 and 3 threads"
! cmp -s "$tmp/f1.json" "$tmp/f6.json" || fail "forest does not depend on the seed"
$W --per dt --cv 4 --seed 1 --json >"$tmp/s1.json"
$W --per dt --cv 4 --seed 1 --json >"$tmp/s1b.json"
cmp -s "$tmp/s1.json" "$tmp/s1b.json" || fail "same seed, different folds"
echo "ok"

#!/usr/bin/env bash
# wattprof rank end to end: the published data in JSON and CSV, a numpy peer
# on random datasets, --measure on real processes (a fake variant program
# with known distributions, and sleeps for wall time), determinism under a
# seed, plots, and every bad input.
set -euo pipefail

: "${WATTPROF:?}" "${BUILDDIR:?}" "${SRCDIR:?}" "${TEST_DATA:?}" "${PYTHON:=/usr/bin/python3}"
FAKE="$BUILDDIR/tests/rank_fake"
T=$(mktemp -d /tmp/wattprof-rank.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
jq_py() { # $1 = JSON file, $2 = python expression over `d`; prints the value
    "$PYTHON" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---- Published data: JSON, then the same data as CSV with FLOP counts -------
PUB="$TEST_DATA/ranking-single-step.json"
[ -f "$PUB" ] || fail "$PUB missing (tests/data is part of the repository)"
"$WATTPROF" rank --data "$PUB" --h0 given --json >"$T/pub.json"
got=$(jq_py "$T/pub.json" '" ".join("%s=%g/%d" % (v["name"], v["mean_rank"], v["rank"]) for v in d["variants"])')
[ "$got" = "alg4=1/1 alg1=1.25/1 alg3=1.25/1 alg2=1.375/1" ] || fail "published mean ranks: $got"

"$PYTHON" - "$PUB" >"$T/pub.csv" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
flops = {"alg1": 100, "alg2": 100, "alg3": 120, "alg4": 150}
print("variant,value,flops")
for i in range(20):  # interleaved rows: long form needs no grouping
    for v in d:
        print(f"{v},{d[v][i]!r},{flops[v]}")
PY
"$WATTPROF" rank --data "$T/pub.csv" --h0 given >"$T/pub.txt"
grep -q '^alg4 *1 *1.000 *20 ' "$T/pub.txt" || fail "CSV table: $(cat "$T/pub.txt")"
grep -q '^alg2 *1 *1.375 *20 .* 100 *0.000$' "$T/pub.txt" || fail "CSV table: $(cat "$T/pub.txt")"
grep -q '^verdict: anomaly: alg4 (RF 0.5) has mean rank 1, better than every minimum-FLOP variant (best: alg1, 1.25); and the minimum-FLOP variants do not share one rank (alg1 1.25, alg2 1.38)$' \
    "$T/pub.txt" || fail "verdict: $(tail -1 "$T/pub.txt")"
# FLOPs that do pick the best: alg4 alone at the minimum.
"$WATTPROF" rank --data "$PUB" --h0 given --flops 9,9,9,5 | tail -1 >"$T/v.txt"
grep -qx 'verdict: no anomaly: the minimum-FLOP variant (alg4) has the best mean rank 1' \
    "$T/v.txt" || fail "verdict: $(cat "$T/v.txt")"

# ---- The numpy peer on random datasets ----------------------------------------
"$PYTHON" "$SRCDIR/tests/integration/rank_peer.py" gen "$T" 40 11
"$PYTHON" "$SRCDIR/tests/integration/rank_peer.py" check "$T" 40 "$WATTPROF"

# ---- Plots ---------------------------------------------------------------------
"$WATTPROF" rank --data "$T/pub.csv" --plot "$T/p.png" >/dev/null
"$WATTPROF" rank --data "$T/pub.csv" --plot "$T/p.svg" >/dev/null
[ "$(head -c 8 "$T/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "no PNG"
grep -q '<svg' "$T/p.svg" || fail "no SVG"

# ---- --measure with known distributions (--metric output) --------------------
measure() { # $1 = seed, $2 = state dir; the rest go to wattprof rank
    local seed=$1 dir=$2; shift 2
    mkdir -p "$dir"
    "$WATTPROF" rank --measure --metric output --seed "$seed" --reps 4 --max 40 --json \
        --names A,B,C "$@" -- \
        "$FAKE $dir A normal 10 0.2 1" ::: "$FAKE $dir B normal 10 0.2 2" ::: \
        "$FAKE $dir C normal 11 0.2 3"
}
measure 5 "$T/m1" >"$T/m1.json"
measure 5 "$T/m2" >"$T/m2.json"
measure 6 "$T/m3" >"$T/m3.json"
cmp -s "$T/m1.json" "$T/m2.json" || fail "same seed, different results"
cmp -s "$T/m1/log" "$T/m2/log" || fail "same seed, different measurement order"
cmp -s "$T/m1/log" "$T/m3/log" && fail "different seeds gave the same shuffled order"
# C (mean 11) is behind A and B (mean 10, sd 0.2) in every range.
got=$(jq_py "$T/m1.json" '" ".join(v["name"] for v in d["variants"])')
[ "${got##* }" = C ] || fail "C should rank last: $got"
jq_py "$T/m1.json" 'all(v["ranks"][0] == (2 if v["name"] == "C" else 1) for v in d["variants"])' |
    grep -qx True || fail "ranks at (95,5): $(cat "$T/m1.json")"
# N: the ranked measurements, a whole number of rounds, recorded per variant;
# warm-up and single runs come on top (1 + 1 per variant).
n=$(jq_py "$T/m1.json" 'd["variants"][0]["n"]')
rounds=$(jq_py "$T/m1.json" 'd["measure"]["rounds"]')
[ "$n" = $((rounds * 4)) ] || fail "N $n after $rounds rounds of 4"
[ "$(grep -c '^A ' "$T/m1/log")" = $((n + 2)) ] || fail "A ran $(grep -c '^A ' "$T/m1/log") times"
jq_py "$T/m1.json" 'd["measure"]["converged"]' | grep -qx True || fail "did not converge"

# ---- --measure on wall time, with a shortlist and FLOP counts -----------------
"$WATTPROF" rank --measure --reps 3 --max 12 --threshold 1.5 --flops 10,10,20 --json \
    -- sleep 0.01 ::: sleep 0.03 ::: sleep 0.2 >"$T/time.json"
got=$(jq_py "$T/time.json" '" ".join("%s:%s:%s" % (v["name"], v["rank"], v["ranked"]) for v in d["variants"])')
[ "$got" = "sleep 0.01:1:True sleep 0.03:2:True sleep 0.2:None:False" ] || fail "time ranks: $got"
jq_py "$T/time.json" 'd["variants"][0]["median"] >= 0.01 and d["variants"][1]["median"] >= 0.03' |
    grep -qx True || fail "wall times below the sleeps: $(cat "$T/time.json")"
# A minimum-FLOP variant is ranked however slow its single run was.
"$WATTPROF" rank --measure --reps 3 --max 6 --threshold 0.5 --flops 20,10 --json \
    -- sleep 0.01 ::: sleep 0.05 >"$T/time2.json"
jq_py "$T/time2.json" 'all(v["ranked"] for v in d["variants"]) and d["anomaly"]["anomaly"]' |
    grep -qx True || fail "min-FLOP shortlist: $(cat "$T/time2.json")"

# ---- Bad input: one line on stderr, exit 1 or 2, no crash ---------------------
bad() { # $1 = expected message (grep -F), rest = arguments of wattprof rank
    local want=$1 rc=0; shift
    "$WATTPROF" rank "$@" >"$T/out" 2>"$T/err" || rc=$?
    [ "$rc" = 1 ] || [ "$rc" = 2 ] || fail "exit $rc for: $* ($(cat "$T/err"))"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "not one line for: $*: $(cat "$T/err")"
    grep -qF -- "$want" "$T/err" || fail "for: $*: want '$want', got '$(cat "$T/err")'"
}
printf 'variant,value\na,1\na,2\nb,1\na,3\nb,2\nb,3\nb,4\n' >"$T/few.csv"
bad "$T/few.csv:2:1: variant 'a' has 3 measurements; at least 4 are needed" --data "$T/few.csv"
printf '{"a": [1, 2, 3, 4],\n "b": [1, 2, 3]}\n' >"$T/few.json"
bad "$T/few.json:2:2: variant 'b' has 3 measurements; at least 4 are needed" --data "$T/few.json"
printf 'variant,value\na,1\na,fast\n' >"$T/nan.csv"
bad "$T/nan.csv:3:2: non-numeric value 'fast'" --data "$T/nan.csv"
printf 'variant,value\na,1\na,-2\n' >"$T/neg.csv"
bad "$T/neg.csv:3:2: negative value -2" --data "$T/neg.csv"
printf 'variant,value,flops\na,1,10\na,2,x\n' >"$T/nanf.csv"
bad "$T/nanf.csv:3:3: non-numeric FLOP count 'x'" --data "$T/nanf.csv"
printf '{"a": [1, 2, "3", 4]}' >"$T/nan.json"
bad "$T/nan.json:1:2: variant 'a' item 3: non-numeric value \"3\"" --data "$T/nan.json"
printf '{"a": [1, 2, 3, -4]}' >"$T/neg.json"
bad "$T/neg.json:1:2: variant 'a' item 4: negative value -4" --data "$T/neg.json"
printf '{"a": [1, 2, 3, 4],\n  "b": [1, 2, 3, 4],\n  "a": [5, 6, 7, 8]}' >"$T/dup.json"
bad "$T/dup.json:3:3: duplicate variant 'a' (first on line 1)" --data "$T/dup.json"
printf '{"a": [1, 2, 3, 4],\n  "b": [1, 2 3]}' >"$T/broken.json"
bad "$T/broken.json:2:14: invalid JSON: array value separator" --data "$T/broken.json"
printf 'name,time\na,1\n' >"$T/cols.csv"
bad "$T/cols.csv:1:1: the header must name the columns variant,value[,flops]" --data "$T/cols.csv"
bad "$T/missing.csv: No such file or directory" --data "$T/missing.csv"
bad "quantile ranges 90:10 and 90:20 are not strictly nested" --data "$PUB" --quantiles 90:10,90:20
bad "quantile ranges 90:10 and 95:20 are not strictly nested" --data "$PUB" --quantiles 95:20,90:10
bad "quantile range 1 (100:0) must satisfy 0 < lower < upper < 100" --data "$PUB" --quantiles 100:0
bad "quantile range 2 (0:-5) must satisfy 0 < lower < upper < 100" --data "$PUB" --quantiles 95:5,0:-5
bad "--h0 flops: no FLOP counts" --data "$PUB" --h0 flops
bad "--flops '1,2': expected 4 comma-separated counts" --data "$PUB" --flops 1,2
bad "--plot '$T/p.gif': unknown picture format '.gif'; the formats known are PNG (.png) and SVG (.svg)" --data "$PUB" --plot "$T/p.gif"
bad "--metric 'joules': expected time, energy or output" --measure --metric joules -- true
bad "duplicate variant name 'true' (give distinct --names)" --measure -- true ::: true
bad "give exactly one of --data FILE and --measure" --data "$PUB" --measure -- true
bad "command 'sh -c \"exit 3\"' failed with exit status 3" --measure --reps 2 -- true ::: 'sh -c "exit 3"'
bad "command 'kill -TERM \$\$' was killed by signal 15" --measure -- true ::: 'kill -TERM $$'
bad "command 'echo soon' printed 'soon' where a non-negative number was expected" \
    --measure --metric output -- 'echo 1' ::: 'echo soon'
# A command that fails in a later round stops the run there, naming it.
mkdir -p "$T/late"
cat >"$T/late.sh" <<EOF
#!/bin/sh
n=\$(cat "$T/late/n" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$T/late/n"
[ "\$n" -lt 5 ] || exit 4
echo 1
EOF
chmod +x "$T/late.sh"
bad "command '$T/late.sh' failed with exit status 4" --measure --metric output --reps 2 -- \
    'echo 1' ::: "$T/late.sh"
echo "all rank checks passed"

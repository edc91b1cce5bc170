#!/usr/bin/env bash
# tests/bench/run end to end: every benchmark it names has its script, bad
# names are refused, and one real quick benchmark (sqlite: lib/store against
# a plain SQLite loop, about 20 s) goes through it into a results file and
# RESULTS.md with its figures, machine and load; --set changes a
# benchmark's own environment and marks the run reduced (rank, a second).
# Also the bad inputs of the benchmark helpers it relies on.
set -uo pipefail

: "${BUILDDIR:?}" "${SRCDIR:?}" "${PYTHON:=/usr/bin/python3}"
. "$SRCDIR/tests/helpers/lib.sh"
RUN="$SRCDIR/tests/bench/run"
T=$(mktemp -d /tmp/wattprof-bench-run.XXXXXX)
trap 'rm -rf "$T"' EXIT

# ---- The registry -----------------------------------------------------------
"$RUN" --list >"$T/list"
check "run --list names 17 benchmarks" [ "$(wc -l <"$T/list")" = 17 ]
while IFS=$'\t' read -r name script; do
  check "$name: $script is an executable script" [ -x "$SRCDIR/$script" ]
done <"$T/list"

# ---- Bad input ------------------------------------------------------------
expect_fail "unknown benchmark" 2 "unknown benchmark 'nope'" "$RUN" --no-build nope
expect_fail "unknown benchmark in --full" 2 "unknown benchmark 'bogus'" \
  "$RUN" --no-build --full bogus sqlite
expect_fail "--set without a value" 2 "--set wants NAME=VALUE, not 'REPS'" \
  "$RUN" --no-build --set REPS rank
expect_fail "bench_sqlite: bad mode" 2 "usage:" "$BUILDDIR/tests/bench_sqlite" fast 200 10 "$T/db"
expect_fail "bench_sqlite: zero processes" 2 "usage:" "$BUILDDIR/tests/bench_sqlite" real 0 10 "$T/db"
expect_fail "bench_sqlite: database in a missing folder" 1 "$T/none/db" \
  "$BUILDDIR/tests/bench_sqlite" real 10 1 "$T/none/db"
expect_fail "bench_churn: bad rate" 2 "usage:" "$BUILDDIR/tests/bench_churn" x 1 1
expect_fail "store-io: runs too short to sample" 1 "SECONDS must be at least 30" \
  "$SRCDIR/tests/bench/store-io" "$BUILDDIR" 5
echo '[1]' >"$T/list.json"
expect_fail "bench_query_load: a reply that is not an object" 1 "$T/list.json: cannot use as a reply" \
  "$BUILDDIR/tests/bench_query_load" serve "$T/sock" "$T/list.json" "$T/list.json"
expect_fail "bench_query_load: no such reply file" 1 "$T/missing.json" \
  "$BUILDDIR/tests/bench_query_load" serve "$T/sock" "$T/missing.json" "$T/list.json"
expect_fail "bench_query_load: nobody on the socket" 1 "$T/nobody" \
  "$BUILDDIR/tests/bench_query_load" load "$T/nobody" 1 1

# ---- A real benchmark through run -------------------------------------------
if "$RUN" --no-build --build "$BUILDDIR" --quick --results "$T" sqlite >"$T/out" 2>"$T/err"; then
  check "sqlite ran through run" true
else
  check "sqlite ran through run" false
  cat "$T/err"
fi
R="$T/results/sqlite.json"
check "its results file is kept" [ -f "$R" ]
check "three figures, each with a median and spread" \
  [ "$(json_get "$R" 'sum(1 for f in d["figures"] if "(" in f["ours"])')" = 3 ]
check "the store wrote rows faster than 1,000/s at full speed" \
  [ "$(json_get "$R" 'float(d["figures"][0]["ours"].split()[0]) > 1000')" = True ]
check "the peer did too" \
  [ "$(json_get "$R" 'float(d["figures"][0]["peer"].split()[0]) > 1000')" = True ]
# The real-rate projection and the compressed replay measure the same rows
# two ways; on a loaded machine they agree within a factor of two.
check "day-1 growth: projection and compressed run agree within 2x" \
  [ "$(json_get "$R" '0.5 < float(d["figures"][1]["ours"].split()[0]) / float(d["figures"][1]["peer"].split()[0]) < 2')" = True ]
check "the machine and load are recorded" \
  [ "$(json_get "$R" 'd["machine"]["cpus"] > 0 and len(d["load_before"]) == 3 and d["mode"] == "quick"')" = True ]
check "RESULTS.md has the headline row" grep -q '^| sqlite | SQLite rows/s at full speed' "$T/RESULTS.md"
check "RESULTS.md has the section with its machine" grep -q '^## SQLite rows/s and growth per day (`sqlite`)' "$T/RESULTS.md"
check "RESULTS.md names the kernel" grep -qF "kernel $(uname -r)" "$T/RESULTS.md"

# ---- --set: the benchmark's own environment, changed and shown ---------------
if "$RUN" --no-build --build "$BUILDDIR" --quick --set REPS=1 --results "$T/set" rank \
  >"$T/set.out" 2>"$T/set.err"; then
  check "rank ran with --set" true
else
  check "rank ran with --set" false
  cat "$T/set.err"
fi
R="$T/set/results/rank.json"
check "a run with --set is marked reduced" [ "$(json_get "$R" 'd["mode"]')" = reduced ]
check "its command shows the value it ran with" \
  [ "$(json_get "$R" 'd["command"].startswith("REPS=1 ")')" = True ]
check "the benchmark saw it" grep -q 'medians of 1 runs' "$T/set.out"
check "RESULTS.md says so" grep -q '^Reduced run, ' "$T/set/RESULTS.md"
finish

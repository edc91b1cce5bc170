#!/usr/bin/env bash
# What every wattprof command shares, checked without a daemon: `wattprof
# help [COMMAND]`, errors that begin "wattprof COMMAND:" on one line, output
# formats that contradict each other refused, --plot naming the picture
# formats it knows, --data (or the file alone as a word) wherever a trainer
# reads a data file, select -k N showing N rows, and the man pages saying so.
set -u
. "$SRCDIR/tests/helpers/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
W=$WATTPROF

# ---- help ----------------------------------------------------------------------
"$W" help >"$tmp/help.txt"
check "wattprof help lists the commands" grep -qE '^  train +fit linear' "$tmp/help.txt"
check "wattprof help equals --help" cmp -s "$tmp/help.txt" <("$W" --help)
for c in ps train gp run; do
  check "wattprof help $c is $c --help" cmp -s <("$W" help "$c") <("$W" "$c" --help)
done
expect_fail "help of no command" 2 "wattprof help: no command 'nope' (see wattprof help)" "$W" help nope

# ---- every error begins "wattprof COMMAND:" -------------------------------------
for c in status top ps jobs show history export models reload train select symreg gp rank run calibrate; do
  args=(--no-such-option)
  [ "$c" = run ] && args=(--no-such-option -- true)
  expect_fail "$c names itself in an unknown option's error" 2 \
    "wattprof $c: unknown option or missing value" "$W" "$c" "${args[@]}"
done
expect_fail "train's own errors too" 1 "wattprof train: --target COLUMN is required" \
  "$W" train "$TEST_DATA/kepler-broadwell-coremark.csv" --features cpu_time
expect_fail "history's" 2 "wattprof history: give exactly one of --pid" "$W" history --since 1h
expect_fail "jobs: an empty --job" 2 "wattprof jobs: --job '': expected a job id of 1 to 63 characters" \
  "$W" jobs --job '' --socket "$tmp/none"
expect_fail "jobs: a bad --since" 2 "wattprof jobs: --since" "$W" jobs --since soon --socket "$tmp/none"
expect_fail "jobs: an argument" 2 "wattprof jobs: unexpected argument '5151'" "$W" jobs 5151
expect_fail "history: an empty --job" 2 "wattprof history: --job: expected a job id" \
  "$W" history --job '' --since 1h

# ---- contradictions ------------------------------------------------------------
for c in status ps top history models jobs; do
  expect_fail "$c --json --csv" 2 "wattprof $c: --json and --csv contradict each other" \
    "$W" "$c" --json --csv --socket "$tmp/none"
done
expect_fail "history --plot F --json" 2 "wattprof history: --plot and --json contradict each other" \
  "$W" history --host --since 1h --plot "$tmp/h.png" --json --socket "$tmp/none"
expect_fail "history --plot --csv" 2 "--plot and --csv contradict each other" \
  "$W" history --host --since 1h --plot --csv --socket "$tmp/none"
expect_fail "run -x with --json" 2 "wattprof run: -x and --json contradict each other" \
  "$W" run -x , --json -- true

# ---- --plot with a format it does not know -------------------------------------
expect_fail "history --plot x.bmp" 2 \
  "--plot 'x.bmp': unknown picture format '.bmp'; the formats known are PNG (.png) and SVG (.svg)" \
  "$W" history --host --since 1h --plot x.bmp --socket "$tmp/none"
expect_fail "history --plot=x.bmp" 2 "unknown picture format '.bmp'" \
  "$W" history --host --since 1h --plot=x.bmp --socket "$tmp/none"
expect_fail "rank --plot x.bmp, before measuring anything" 2 \
  "wattprof rank: --plot 'x.bmp': unknown picture format '.bmp'" \
  "$W" rank --data "$TEST_DATA/ranking-single-step.json" --plot x.bmp

# ---- --data, or the file alone ------------------------------------------------
k=$TEST_DATA/kepler-broadwell-coremark.csv
feat=cache_miss,cpu_cycles,cpu_instr,cpu_time,bytes_read,bytes_writes
t=(--target energy_in_pkg_joule --features cache_miss,cpu_cycles --classes none --cv 3)
"$W" train "$k" "${t[@]}" --json >"$tmp/pos.json" && "$W" train --data "$k" "${t[@]}" --json >"$tmp/data.json"
check "train --data FILE is train FILE: the same dataset and errors" "$PYTHON" -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    for r in d["results"]:
        r.pop("validation_s")
sys.exit(not (a["dataset"] == b["dataset"] and a["results"] == b["results"]))' "$tmp/pos.json" "$tmp/data.json"
expect_fail "train with a file twice" 2 "expected one dataset file (FILE.csv or --data), got 2" \
  "$W" train "$k" --data "$k" "${t[@]}"
check "select --data FILE is select FILE" cmp -s \
  <("$W" select "$k" --target energy_in_pkg_joule --features "$feat" --trees 10 -k 3 2>/dev/null) \
  <("$W" select --data "$k" --target energy_in_pkg_joule --features "$feat" --trees 10 -k 3 2>/dev/null)
"$PYTHON" - "$tmp/gp.csv" <<'PY'
import math, sys
with open(sys.argv[1], "w") as f:
    f.write("a,y\n")
    for i in range(20):
        f.write(f"{i / 4},{2 + math.sin(i / 4)}\n")
PY
check "gp FILE is gp --data FILE" cmp -s \
  <("$W" gp "$tmp/gp.csv" --target y --features a --restarts 0 --json) \
  <("$W" gp --data "$tmp/gp.csv" --target y --features a --restarts 0 --json)
check "rank FILE is rank --data FILE" cmp -s \
  <("$W" rank "$TEST_DATA/ranking-single-step.json" --json) \
  <("$W" rank --data "$TEST_DATA/ranking-single-step.json" --json)

# ---- select -k N shows N rows ------------------------------------------------------
"$W" select "$k" --target energy_in_pkg_joule --features "$feat" --trees 10 -k 4 >"$tmp/k4.txt" 2>/dev/null
check "select -k 4 of 6 features: a header, 4 rows and the top line" \
  test "$(wc -l <"$tmp/k4.txt") $(tail -1 "$tmp/k4.txt" | tr ',' '\n' | wc -l)" = "6 4"
"$W" select "$k" --target energy_in_pkg_joule --features "$feat" --trees 10 -k 4 --json >"$tmp/k4.json" 2>/dev/null
check "select -k 4 --json: every feature's data, 4 in top" \
  test "$(json_get "$tmp/k4.json" 'len(d["features"])' 'len(d["top"])')" = "6 4"

# ---- the man pages -------------------------------------------------------------------
if command -v man >/dev/null; then
  page() { MANWIDTH=1000 man -l --warnings "$SRCDIR/man/$1" 2>"$tmp/man.err" | col -b | tr -s ' \t\n' ' '; }
  page wattprof.1 >"$tmp/w.txt"
  check "wattprof(1) renders without warnings" test ! -s "$tmp/man.err"
  check "wattprof(1) has EXAMPLES, run -r among them" grep -q "wattprof run -r 5" "$tmp/w.txt"
  check "wattprof(1) says run's exit status is the command's" \
    grep -q "The exit status of wattprof run is CMD's own" "$tmp/w.txt"
  check "wattprof(1) defines ps's POWER and CPU%" \
    grep -q "POWER and CPU% are both averages over the whole window" "$tmp/w.txt"
  check "wattprof(1) has help and --data" grep -q "wattprof help \[COMMAND\]" "$tmp/w.txt"
  check "wattprofd(8) FILES names [exporter]" \
    grep -q "\[exporter\] (listen" <(page wattprofd.8 | grep -o 'FILES .*')
  check "wattprofd.conf(5): comm is PCRE2, not POSIX ERE" \
    test "$(page wattprofd.conf.5 | grep -o 'comm Perl-compatible regular expression (PCRE2' | wc -l)" = 1
else
  skip_note "man (man-db) is not installed: the man page checks need it"
fi
finish

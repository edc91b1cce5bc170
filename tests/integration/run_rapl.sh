#!/usr/bin/env bash
# wattprof run on a node with a power meter whose truth is known: a fake
# powercap tree (tests/helpers/fake-powercap) with energy-writer advancing
# package at 20 W and dram at 5 W. The energy wattprof reports for the run's
# interval must be within 2 % of what the writer wrote, and the run's
# attribution must add up.
set -u
. "$SRCDIR/tests/helpers/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fake=$SRCDIR/tests/helpers/fake-powercap
writer=$BUILDDIR/tests/energy-writer
truth_of=$SRCDIR/tests/helpers/energy-truth

# shellcheck disable=SC2016 # expanded by the inner shell
"$fake" -- bash -c '
  "$1" --truth "$2/truth" --log "$2/log" intel-rapl:0=20 intel-rapl:0:2=5 & w=$!
  for _ in $(seq 300); do [ -s "$2/truth" ] && break; sleep 0.01; done
  "$3" run --json --output "$2/run.json" -- "$4" 1; rc=$?
  kill $w; wait $w; exit $rc' _ "$writer" "$tmp" "$WATTPROF" "$BURN"
rc=$?
if [ $rc = 77 ]; then exit 77; fi
check "wattprof run in the fake tree exits 0" test $rc = 0

read -r present s e pkg dram host_j idle att unatt < <(json_get "$tmp/run.json" \
  'd["rapl"]["present"]' 'd["start_mono_ns"]' 'd["end_mono_ns"]' \
  'next(z["energy_j"] for z in d["rapl"]["zones"] if z["name"] == "package-0")' \
  'next(z["energy_j"] for z in d["rapl"]["zones"] if z["name"] == "dram")' \
  'd["host_j"]' 'd["idle_j"]' 'd["energy_j"]' 'd["unattributed_j"]')
check "RAPL found through libpowercap" test "$present" = True
written=$("$truth_of" "$tmp/log" "$s" "$e")
pkg_truth=$(awk -v t="$written" 'BEGIN { print t * 20 / 25 }')
dram_truth=$(awk -v t="$written" 'BEGIN { print t * 5 / 25 }')
check "package $pkg J within 2 % of the $pkg_truth J written" within "$pkg" "$pkg_truth" 0.02
check "dram $dram J within 2 % of the $dram_truth J written" within "$dram" "$dram_truth" 0.02
check "model target (package) $host_j J is the package energy" within "$host_j" "$pkg" 1e-9
sum=$(awk -v a="$idle" -v b="$att" -v c="$unatt" 'BEGIN { printf "%.9f", a + b + c }')
check "idle + attributed + unattributed = host ($sum vs $host_j)" within "$sum" "$host_j" 1e-6

# A zone that cannot be read for a while (energy_uj renamed away) is a gap,
# not a lost run: the report comes, says how many reads failed and why, and
# the command's exit status (3) is passed through.  No writer runs: the
# counters stay put, so only the failed reads are in question.
# shellcheck disable=SC2016 # expanded by the inner shell
"$fake" -- bash -c '
  z=$FAKE_POWERCAP/intel-rapl/intel-rapl:0
  "$1" run --json --interval 20 --output "$2/gap.json" -- \
    sh -c "mv $z/energy_uj $z/gone; sleep 0.3; mv $z/gone $z/energy_uj; exit 3"
  ' _ "$WATTPROF" "$tmp" 2>"$tmp/gap.err"
rc=$?
check "a run with failed RAPL reads passes the command's exit status 3 through (got $rc)" test $rc = 3
check "... and prints no failure ($(cat "$tmp/gap.err"))" test ! -s "$tmp/gap.err"
check "... its report counts the failed reads and names the error" \
  test "$(json_get "$tmp/gap.json" 'd["rapl"]["read_errors"] >= 3' 'd["rapl"]["first_read_error"] != None' 'd["exit_status"]')" = "True True 3"
finish

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
finish

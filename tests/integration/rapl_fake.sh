#!/usr/bin/env bash
# Fake RAPL: lib/sample's rapl_* read a fake powercap tree through
# libpowercap, inside a private mount namespace (tests/helpers/fake-powercap):
# every zone of every package with the kernel's hex ids, the states without
# RAPL or without permission, exact deltas across a staged wrap, and, with
# tests/helpers/energy-writer driving energy_uj at a known power (constant,
# across many wraps, and following real CPU load), the measured energy within
# 2 % of the truth; and rapl_read allocates nothing.  powercap-info
# (powercap-utils) must read the same tree.
set -euo pipefail

fake=$SRCDIR/tests/helpers/fake-powercap
probe=$BUILDDIR/tests/rapl-probe
writer=$BUILDDIR/tests/energy-writer
truth_of=$SRCDIR/tests/helpers/energy-truth
pc=/sys/class/powercap
work=$(mktemp -d /tmp/wattprof-rapl.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

if ! out=$("$fake" -- true); then
  [ "$(echo "$out" | head -c 5)" = SKIP: ] && { echo "$out"; exit 77; }
  fail "fake-powercap does not run: $out"
fi
command -v powercap-info >/dev/null ||
  { echo "SKIP: powercap-info not found (Debian package powercap-utils)"; exit 77; }

# key GOT FILE KEY: the value of "KEY VALUE" in FILE
key() {
  awk -v k="$2" '$1 == k { print $2; f = 1 } END { exit !f }' "$1" ||
    { echo "FAIL: $2 not in $1: $(cat "$1")" >&2; exit 1; }
}

# within NAME GOT WANT REL: |GOT - WANT| <= REL * |WANT|
within() {
  awk -v g="$2" -v w="$3" -v r="$4" \
    'BEGIN { e = g - w; if (e < 0) e = -e; a = w < 0 ? -w : w; exit !(e <= r * a) }' ||
    fail "$1: measured $2, truth $3, not within $4"
  ok "$1: measured $2, truth $3 ($(awk -v g="$2" -v w="$3" 'BEGIN { printf "%+.3f %%", 100 * (g - w) / w }'))"
}

# ---- Zones: every package, its sub-zones, psys; ids in hex ----------------
"$fake" --packages 2 --psys -- "$probe" list >"$work/list"
cat >"$work/want" <<'EOF'
state 9 zones: package-0, core, uncore, dram, package-1, core, uncore, dram, psys
n 9
zone intel-rapl:0 package-0 package 0 1 262143328850
zone intel-rapl:0:0 core core 0 2 262143328850
zone intel-rapl:0:1 uncore uncore 0 2 262143328850
zone intel-rapl:0:2 dram dram 0 2 262143328850
zone intel-rapl:1 package-1 package 1 1 262143328850
zone intel-rapl:1:0 core core 1 2 262143328850
zone intel-rapl:1:1 uncore uncore 1 2 262143328850
zone intel-rapl:1:2 dram dram 1 2 262143328850
zone intel-rapl:2 psys psys 2 1 262143328850
EOF
diff -u "$work/want" "$work/list" || fail "zones of a two-package tree with psys"
ok "two packages with core, uncore, dram, and psys: 9 zones"

# powercap-info sees the same zones with the same names and energies.
# shellcheck disable=SC2016 # expanded by the inner shell
"$fake" --packages 2 --psys --energy 12345 -- bash -c '
  for z in 0 0:0 0:1 0:2 1 1:0 1:1 1:2 2; do
    echo "$(powercap-info intel-rapl -z $z -x) $(powercap-info intel-rapl -z $z -j)"
  done; powercap-info intel-rapl -n' >"$work/info"
awk '$1 == "zone" { print $3, 12345 } END { print 3 }' "$work/list" | diff -u - "$work/info" ||
  fail "powercap-info disagrees with rapl_open"
ok "powercap-info reads the fake tree: same names, energies and zone count"

# More than ten zones: the kernel and libpowercap spell indexes in hex.
"$fake" --packages 11 --subzones dram -- "$probe" list >"$work/list"
if ! { grep -qx 'zone intel-rapl:a package-10 package 10 1 262143328850' "$work/list" &&
  grep -qx 'zone intel-rapl:a:0 dram dram 10 2 262143328850' "$work/list" &&
  [ "$(key "$work/list" n)" = 22 ]; }; then fail "11 packages: $(cat "$work/list")"; fi
ok "11 packages: zone intel-rapl:a found, 22 zones"

# Multi-die parts name zones package-P-die-D: still the package domain.
"$fake" --dies 2 --subzones "" -- "$probe" list >"$work/list"
grep -qx 'zone intel-rapl:1 package-0-die-1 package 1 1 262143328850' "$work/list" ||
  fail "two dies: $(cat "$work/list")"
ok "package-0-die-1 is in domain package"

# ---- Without RAPL, or without permission: a state, not an error ------------
"$fake" --empty -- "$probe" list >"$work/list" 2>/dev/null || fail "rapl_open failed without RAPL"
if ! { [ "$(key "$work/list" n)" = 0 ] &&
  grep -q '^state no RAPL: /sys/class/powercap/intel-rapl does not exist' "$work/list"; }; then
  fail "without RAPL: $(cat "$work/list")"
fi
ok "no intel-rapl: n = 0, $(head -1 "$work/list")"

"$fake" --packages 0 -- "$probe" list >"$work/list" 2>/dev/null || fail "rapl_open failed without zones"
if ! { [ "$(key "$work/list" n)" = 0 ] &&
  grep -qx 'state no RAPL: /sys/class/powercap/intel-rapl has no zones' "$work/list"; }; then
  fail "intel-rapl without zones: $(cat "$work/list")"
fi
ok "intel-rapl without zones: n = 0, $(head -1 "$work/list")"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  "$fake" -- "${nobody[@]}" "$probe" list >"$work/list" 2>/dev/null || fail "rapl_open failed on EACCES"
  if ! { [ "$(key "$work/list" n)" = 0 ] &&
    grep -qx 'state no RAPL: /sys/class/powercap/intel-rapl:0/energy_uj: Permission denied (root-only since Linux 5.10)' "$work/list"; }; then
    fail "energy_uj root-only: $(cat "$work/list")"
  fi
  ok "energy_uj root-only, read as uid 65534: n = 0, $(head -1 "$work/list")"
  "$fake" --mode 0444 -- "${nobody[@]}" "$probe" list >"$work/list"
  [ "$(key "$work/list" n)" = 4 ] || fail "world-readable energy_uj: $(cat "$work/list")"
  ok "energy_uj world-readable, read as uid 65534: 4 zones"
else
  echo "note: not root, the energy_uj permission case is not run"
fi

# ---- Staged deltas, exact to the microjoule -------------------------------
# package-0 wraps 900 -> 50 (range 1000): 150 uJ; core reaches exactly the
# range (which is 0 again): 100; uncore goes above the range, i.e. it was
# reset: what it counted since (20); dram does not move.
"$fake" --max-range 1000 --energy 900 -- "$probe" delta sh -c "
  echo 50 >$pc/intel-rapl:0/energy_uj
  echo 1000 >$pc/intel-rapl:0:0/energy_uj" >"$work/delta"
printf 'intel-rapl:0 150\nintel-rapl:0:0 100\nintel-rapl:0:1 0\nintel-rapl:0:2 0\n' |
  diff -u - "$work/delta" || fail "deltas across a staged wrap"
"$fake" --max-range 1000 --energy 5000 -- "$probe" delta sh -c "
  echo 20 >$pc/intel-rapl:0:1/energy_uj" >"$work/delta"
[ "$(key "$work/delta" intel-rapl:0:1)" = 20 ] || fail "counter reset: $(cat "$work/delta")"
ok "staged wrap 900 -> 50 of 1000 reads 150 uJ; reset reads 20 uJ"

# A zone that cannot be read is reported; the others are still read.
rc=0
"$fake" -- "$probe" delta sh -c "
  echo 700 >$pc/intel-rapl:0/energy_uj; echo 30 >$pc/intel-rapl:0:2/energy_uj
  rm $pc/intel-rapl:0:1/energy_uj" >"$work/delta" 2>"$work/err" || rc=$?
printf 'intel-rapl:0 700\nintel-rapl:0:0 0\nintel-rapl:0:1 0\nintel-rapl:0:2 30\n' |
  diff -u - "$work/delta" || fail "reads around a zone that vanished"
if ! { [ "$rc" = 1 ] && grep -qx 'rapl-probe: rapl_read: No such file or directory' "$work/err"; }; then
  fail "a vanished zone: exit $rc, $(cat "$work/err")"
fi
ok "a vanished energy_uj: rapl_read returns -ENOENT, the other zones are read"

# ---- rapl_read allocates nothing (sample.h's promise for the sampling path) --
rc=0
"$fake" --packages 2 --psys -- "$BUILDDIR/tests/rapl-noalloc" 1000 >"$work/noalloc" || rc=$?
if [ "$rc" = 77 ]; then
  echo "note: $(cat "$work/noalloc")"
elif [ "$rc" = 0 ]; then
  ok "rapl_read: $(cat "$work/noalloc")"
else
  fail "rapl_read allocates: $(cat "$work/noalloc")"
fi

# ---- A writer at a known power ---------------------------------------------
# measure TRUTH FAKE_OPTS... -- WRITER_ARGS... -- PROBE_ARGS...: starts the
# writer in the fake tree, waits until it runs, measures, stops the writer.
measure() {
  local truth=$1; shift
  local fopts=() wargs=()
  while [ "$1" != -- ]; do fopts+=("$1"); shift; done; shift
  while [ "$1" != -- ]; do wargs+=("$1"); shift; done; shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  "$fake" "${fopts[@]}" -- bash -c '
    truth=$1 writer=$2 probe=$3 n=$4; shift 4
    "$writer" --truth "$truth" --log "$truth.log" "${@:1:n}" & w=$!
    for _ in $(seq 200); do [ -s "$truth" ] && break; sleep 0.01; done
    [ -s "$truth" ] || { echo "energy-writer did not start" >&2; exit 1; }
    shift "$n"
    "$probe" measure "$@"; rc=$?
    for z in /sys/class/powercap/intel-rapl:*; do echo "final ${z##*/} $(cat $z/energy_uj)"; done
    kill $w; wait $w; exit $rc' _ "$truth" "$writer" "$probe" "${#wargs[@]}" "${wargs[@]}" "$@"
}

# Constant power. The truth is what the writer wrote over the probe's
# interval, from its log (all zones together, split by their fixed powers):
# a writer starved of CPU on a loaded machine writes late, and that is not
# the reader's error.
truth_between() { # M_FILE LOG WATTS TOTAL_WATTS: joules written in the probe's interval x WATTS/TOTAL
  local s e
  s=$(key "$1" start_ns) e=$(key "$1" end_ns)
  awk -v t="$("$truth_of" "$2" "$s" "$e")" -v a="$3" -v b="$4" 'BEGIN { print t * a / b }'
}
measure "$work/t1" -- intel-rapl:0=20 intel-rapl:0:0=12 intel-rapl:0:2=5 -- 3 >"$work/m1"
el=$(key "$work/m1" elapsed_s)
within "package at 20 W for ${el} s" "$(key "$work/m1" intel-rapl:0)" "$(truth_between "$work/m1" "$work/t1.log" 20 37)" 0.02
within "core at 12 W" "$(key "$work/m1" intel-rapl:0:0)" "$(truth_between "$work/m1" "$work/t1.log" 12 37)" 0.02
within "dram at 5 W" "$(key "$work/m1" intel-rapl:0:2)" "$(truth_between "$work/m1" "$work/t1.log" 5 37)" 0.02
within "package+dram (core not counted twice)" "$(key "$work/m1" sum)" "$(truth_between "$work/m1" "$work/t1.log" 25 37)" 0.02
[ "$(key "$work/m1" intel-rapl:0:1)" = 0.000000 ] || fail "uncore moved without a writer"

# Across wraps: a 30 J counter at 30 W wraps once a second; read at 50 Hz, a
# reader would have to stall a whole second to miss one (1 J and 10 J counters
# lost wraps on a loaded machine: the test's limit, not the reader's).
measure "$work/t2" --max-range 30000000 -- intel-rapl:0=30 -- 3 >"$work/m2"
el=$(key "$work/m2" elapsed_s)
within "package at 30 W through ~3 wraps of a 30 J counter" "$(key "$work/m2" intel-rapl:0)" \
  "$(truth_between "$work/m2" "$work/t2.log" 1 1)" 0.02
awk '$1 == "final" && $2 == "intel-rapl:0" { exit !($3 < 30000000) }' "$work/m2" ||
  fail "the writer left energy_uj above max_energy_range_uj"

# Following real CPU load: 10 W + 15 W per busy CPU while two processes spin
# for 2 s (one on a single-CPU machine).  The truth over the probe's interval
# comes from the writer's log.  The spinners start once the writer runs (its
# truth file is written), so their CPU time falls inside what it saw; on a
# loaded machine they get less than 2 CPU-seconds each, so the writer's busy
# time is held to what they really got (bash's `times` for its children).
measure "$work/t3" -- intel-rapl:0=10+15*load -- 3 --domains package >"$work/m3" &
m=$!
for _ in $(seq 500); do [ -s "$work/t3" ] && break; sleep 0.01; done
spinners=$(($(nproc) >= 2 ? 2 : 1))
for i in $(seq $spinners); do
  bash -c 'timeout 2 sh -c "while :; do :; done"; times' | tail -n 1 >"$work/spun$i" &
done
wait $m || fail "measuring under load"
wait
s=$(key "$work/m3" start_ns) e=$(key "$work/m3" end_ns)
truth=$("$truth_of" "$work/t3.log" "$s" "$e") || fail "the writer log does not cover the probe's interval"
within "package at 10 W + 15 W per busy CPU" "$(key "$work/m3" sum)" "$truth" 0.02
busy=$(key "$work/t3" busy_cpu_s) el=$(key "$work/t3" elapsed_s) tj=$(key "$work/t3" total_j)
# "0m1.990s 0m0.004s": user and system CPU time of each spinner
spun=$(awk '{ for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += 60 * t[1] + t[2] } } END { print s }' "$work"/spun*)
# 0.9: /proc/stat and `times` both count in 10 ms ticks, a few of them lost
# at the window's edges.
awk -v b="$busy" -v s="$spun" 'BEGIN { exit !(b >= 0.9 * s) }' ||
  fail "$spinners spinning processes got $spun CPU-seconds, the writer saw only $busy busy"
awk -v b="$busy" -v n="$(nproc)" -v t="$el" 'BEGIN { exit !(b <= 1.02 * n * t) }' ||
  fail "the writer saw $busy busy CPU-seconds in $el s on $(nproc) CPUs: more than there are"
ok "the writer saw $busy busy CPU-seconds in $el s, the spinners got $spun"
within "writer truth = 10 W x ${el} s + 15 W x ${busy} CPU-s" "$tj" \
  "$(awk -v t="$el" -v b="$busy" 'BEGIN { print 10 * t + 15 * b }')" 0.001
ok "load mode: $(awk -v j="$tj" -v t="$el" 'BEGIN { printf "%.1f W mean", j / t }')"

# Following a software event: 10 W + 1 mJ per page fault, system-wide,
# while a burner takes 50000 faults in its half CPU-second. The truth is
# exactly 10 W x elapsed + 1 mJ x the faults the writer counted, and those
# include the burner's own (its rate x its CPU time).
# shellcheck disable=SC2016 # expanded by the inner shell
"$fake" -- bash -c '
  "$1" --truth "$2" --duration 2 --event page-faults intel-rapl:0=10+0.001*event & w=$!
  for _ in $(seq 200); do [ -s "$2" ] && break; sleep 0.01; done
  "$3" --faults 100000 0.5; wait $w' _ "$writer" "$work/t4" "$BUILDDIR/tests/burn" ||
  fail "the writer with a page-faults term"
ev=$(key "$work/t4" events) el=$(key "$work/t4" elapsed_s) tj=$(key "$work/t4" total_j)
awk -v e="$ev" 'BEGIN { exit !(e >= 45000) }' ||
  fail "the writer counted $ev page faults system-wide; the burner alone took 50000"
within "writer truth = 10 W x ${el} s + 1 mJ x ${ev} page faults" "$tj" \
  "$(awk -v t="$el" -v e="$ev" 'BEGIN { print 10 * t + 0.001 * e }')" 0.001

# ---- Bad input to the helpers: one line naming it, non-zero exit -----------
expect_error() { # NAME STATUS PATTERN CMD...: CMD fails with STATUS and a line matching PATTERN
  local name=$1 want=$2 pat=$3 rc=0; shift 3
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit $rc, want $want ($(cat "$work/err"))"
  if ! { [ "$(wc -l <"$work/err")" = 1 ] && grep -q -- "$pat" "$work/err"; }; then
    fail "$name: stderr is not one line matching '$pat': $(cat "$work/err")"
  fi
  ok "$name: $(cat "$work/err")"
}
expect_error "writer, bad power" 2 "bad power (W, IDLE+K\*load, IDLE+K\*load+E\*event): '10+x'" \
  "$fake" -- "$writer" intel-rapl:0=10+x
expect_error "writer, a term twice" 2 "bad power .*'10+1\*load+1\*load'" \
  "$fake" -- "$writer" intel-rapl:0=10+1*load+1*load
expect_error "writer, unknown event" 2 "unknown --event 'bogus'" \
  "$fake" -- "$writer" --event bogus intel-rapl:0=10+1*event
expect_error "writer, --event without a term" 2 "--event without a zone's '\*event' term" \
  "$fake" -- "$writer" --event page-faults intel-rapl:0=10
expect_error "writer, zone not in the tree" 1 "/sys/class/powercap/intel-rapl:7/energy_uj: No such file" \
  "$fake" -- "$writer" --duration 1 intel-rapl:0=1 intel-rapl:7=1
expect_error "probe, unknown command" 2 "expected list, delta or measure: 'lsit'" "$probe" lsit
expect_error "probe, bad seconds" 2 "bad SECONDS: '-1'" "$probe" measure -1
expect_error "probe without RAPL" 1 "rapl-probe: no RAPL: " "$fake" --empty -- "$probe" measure 1
expect_error "fake-powercap, bad option" 2 "unknown option '--bogus'" "$fake" --bogus -- true
expect_error "fake-powercap, bad --packages" 2 "--packages needs a non-negative integer, got 'x'" \
  "$fake" --packages x -- true
expect_error "energy-truth, interval outside the log" 1 "does not cover 1..2 ns" \
  "$truth_of" "$work/t3.log" 1 2
expect_error "energy-truth, bad arguments" 2 "usage: energy-truth LOG START_NS END_NS" \
  "$truth_of" "$work/t3.log" 5 x
echo "all RAPL checks passed"

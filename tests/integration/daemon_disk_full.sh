#!/usr/bin/env bash
# A full disk under the database: the daemon keeps sampling, holds its rows
# in memory, and queries say so (StorageUnavailable: `wattprof ps` and
# `history` print the reason and exit 1) instead of answering from a stale
# database with empty tables; when space returns the rows are written and
# queries answer again; at SIGTERM nothing is said lost.  The database lives
# on a 4 MiB tmpfs mounted in a private mount namespace (unshare -m), filled
# with dd while the daemon runs.
set -u
. "$SRCDIR/tests/helpers/lib.sh"
WATTPROFD=$BUILDDIR/daemon/wattprofd
[ "$(id -u)" = 0 ] || { echo "needs root to mount a tmpfs in a private mount namespace"; exit 77; }
unshare -m true 2>/dev/null || { echo "unshare -m is not allowed here"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir "$T/fs" "$T/rec"
printf '[track]\ncomm = ^wattprof-none$\n' >"$T/d.conf"

# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private bash -c '
  . "$SRCDIR/tests/helpers/lib.sh"
  T=$1
  mount -t tmpfs -o size=4m tmpfs "$T/fs" || { echo "cannot mount a tmpfs"; exit 77; }
  mount -t tmpfs -o size=256k tmpfs "$T/rec" || { echo "cannot mount a tmpfs"; exit 77; }
  "$2" --config "$T/d.conf" --state-dir "$T/fs/state" --socket "$T/sock" --rate 20 \
    --record "$T/rec/r.trace" \
    >"$T/daemon.log" 2>&1 &
  dpid=$!
  W() { "$WATTPROF" "$@" --socket "$T/sock"; }
  Wq() { W "$@" >/dev/null; }
  for _ in $(seq 100); do W status >/dev/null 2>&1 && break; sleep 0.1; done
  check "the daemon answers" Wq ps --window 1m
  # The recording'"'"'s disk fills: GetStatus says so when it happens, not at exit.
  dd if=/dev/zero of="$T/rec/fill" bs=4k 2>/dev/null
  rec=
  for _ in $(seq 60); do
    rec=$(W status --json | "$PYTHON" -c "import json,sys; print(*[w for w in json.load(sys.stdin)[\"warnings\"] if w.startswith(\"--record\")])")
    [ -n "$rec" ] && break
    sleep 0.1
  done
  check "a full disk under --record is in GetStatus within seconds: $rec" \
    test "$rec" = "--record $T/rec/r.trace: writing failed (No space left on device); the recording stops there"
  dd if=/dev/zero of="$T/fs/fill" bs=64k 2>/dev/null
  t_full=$(date +%s)
  check "the tmpfs is full" test "$(df --output=avail "$T/fs" | tail -1)" -lt 64
  err=
  for _ in $(seq 150); do
    err=$(W status --json 2>/dev/null | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)[\"database\"][\"error\"] or \"\")")
    [ -n "$err" ] && break
    sleep 0.1
  done
  check "status names the database error: $err" test -n "$err"
  expect_fail "ps while the disk is full: the reason, exit 1" 1 \
    "the daemon'"'"'s database is unavailable: " W ps --window 1m
  expect_fail "history while the disk is full: the reason, exit 1" 1 \
    "rows wait in memory" W history --host --since 1m
  check "sampling goes on meanwhile" Wq status
  sleep 2 # whole seconds measured while nothing could be written
  t_free=$(date +%s)
  rm -f "$T/fs/fill"
  ok=
  for _ in $(seq 150); do W ps --window 1m >/dev/null 2>&1 && { ok=1; break; }; sleep 0.1; done
  check "once space returns, ps answers again" test -n "$ok"
  check "... and status has no database error" \
    test "$(W status --json | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)[\"database\"][\"error\"])")" = None
  n=$(W history --host --since "@$t_full" --until "@$t_free" --step 1s --csv | tail -n +2 | wc -l)
  check "... and the $((t_free - t_full)) s of the full disk were stored afterwards ($n rows)" \
    test "$n" -ge $((t_free - t_full - 1))
  kill -TERM "$dpid"; wait "$dpid"
  check "SIGTERM exits 0" test $? = 0
  check "nothing is said lost at the end" bash -c "! grep -q \"could not be stored\" \"$T/daemon.log\""
  finish
' _ "$T" "$WATTPROFD"

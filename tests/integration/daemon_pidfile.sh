#!/usr/bin/env bash
# wattprofd --pid-file, the way the README's first command uses it: the file
# holds the daemon's pid once it serves queries, and SIGTERM to that pid
# stops it cleanly (exit 0), removing the pid file and the socket it made.
# Bad paths stop the daemon at once with one line.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"
tmp=$(mktemp -d)
wattprofd=$BUILDDIR/daemon/wattprofd
dpid=
trap '[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/state/io.wattprof.sock pidf=$tmp/state/wattprofd.pid

"$wattprofd" --state-dir "$tmp/state" --socket "$sock" --pid-file "$pidf" 2>"$tmp/log" &
dpid=$!
for _ in $(seq 300); do # up to 30 s: a loaded machine, or a sanitizer build
  [ -s "$pidf" ] && break
  kill -0 "$dpid" 2>/dev/null || break
  sleep 0.1
done
check "pid file written once serving" test -s "$pidf"
check "pid file holds the daemon's pid" test "$(cat "$pidf" 2>/dev/null)" = "$dpid"
check "no temporary file left beside it" test ! -e "$pidf.tmp"
check "socket answers while the pid file exists" \
  env WATTPROF_SOCKET="$sock" "$WATTPROF" status >/dev/null
kill -TERM "$(cat "$pidf")"
wait "$dpid"
rc=$?
dpid=
check "SIGTERM by the pid file: exit 0 (got $rc)" test "$rc" = 0
check "pid file removed at exit" test ! -e "$pidf"
check "socket file removed at exit" test ! -e "$sock"
check "database kept" test -s "$tmp/state/wattprof.db"

expect_fail "--pid-file ''" 1 "--pid-file '': expected a path" \
  "$wattprofd" --state-dir "$tmp/state" --socket "$sock" --pid-file ''
expect_fail "--pid-file in a missing folder" 1 \
  "--pid-file $tmp/nowhere/w.pid: cannot write it: No such file or directory" \
  "$wattprofd" --state-dir "$tmp/state" --socket "$sock" --pid-file "$tmp/nowhere/w.pid"
check "the refused start left no socket behind" test ! -e "$sock"
finish

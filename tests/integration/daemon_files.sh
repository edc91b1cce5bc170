#!/usr/bin/env bash
# The files that hold every user's command lines are private whatever the
# umask: wattprofd run by hand with umask 000 creates its state folder 0750
# (0751 when the socket is in it: others reach the socket, list nothing),
# the database and its -wal and -shm 0640, and a --record file 0640 (an old
# one it overwrites loses the permissions of others).  Checked with stat and
# as another user (uid 65534 through setpriv), who can read none of them yet
# still queries the daemon.  Everything lives in a mktemp -d folder opened
# 0755, since the checkout may sit where uid 65534 cannot enter.
set -u
. "$SRCDIR/tests/helpers/lib.sh"
WATTPROFD=$BUILDDIR/daemon/wattprofd
[ "$(id -u)" = 0 ] || { echo "needs root to run wattprofd with files another uid then tries"; exit 77; }
command -v setpriv >/dev/null || { echo "setpriv (util-linux) is not installed"; exit 77; }
T=$(mktemp -d)
chmod 755 "$T"
cleanup() {
  [ -n "${dpid:-}" ] && kill "$dpid" 2>/dev/null && wait "$dpid"
  rm -rf "$T"
}
trap cleanup EXIT
# The client runs as uid 65534 from a copy it can reach.
cp "$WATTPROF" "$T/wattprof" && chmod 755 "$T/wattprof"
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# As uid 65534, CMD must fail for want of permission.
denied() { local e; e=$(nobody "$@" 2>&1 >/dev/null) && return 1; echo "$e" | grep -q "Permission denied"; }
nobody_reads() { nobody cat "$1" >/dev/null; }
nobody_status() { nobody "$T/wattprof" status --socket "$1" >/dev/null; }
mode() { stat -c %a "$1"; }

start() { # $1 = state dir, $2 = socket, then more flags
  local state=$1 sock=$2; shift 2
  (umask 000; exec "$WATTPROFD" --state-dir "$state" --socket "$sock" "$@") >"$T/daemon.log" 2>&1 &
  dpid=$!
  for _ in $(seq 100); do "$T/wattprof" status --socket "$sock" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "wattprofd did not answer: $(tail -1 "$T/daemon.log")"
  return 1
}
stop() { kill "$dpid"; wait "$dpid"; dpid=; }

# An old recording others could read: overwritten, it loses that.
printf 'old\n' >"$T/rec.trace"
chmod 644 "$T/rec.trace"
start "$T/state" "$T/sock" --record "$T/rec.trace" || exit 1
sleep 1.5 # a commit or two: the -wal and -shm exist
check "uid 65534 runs commands here (it reads the client)" nobody_reads "$T/wattprof"
check "state folder 0750 under umask 000 (got $(mode "$T/state"))" test "$(mode "$T/state")" = 750
for f in wattprof.db wattprof.db-wal wattprof.db-shm wattprof.db-settled; do
  check "$f 0640 under umask 000 (got $(mode "$T/state/$f"))" test "$(mode "$T/state/$f")" = 640
done
check "an overwritten --record file is 0640 (got $(mode "$T/rec.trace"))" test "$(mode "$T/rec.trace")" = 640
check "uid 65534 cannot list the state folder" denied ls "$T/state"
check "uid 65534 cannot read the database" denied cat "$T/state/wattprof.db"
check "uid 65534 cannot read the recording" denied cat "$T/rec.trace"
check "uid 65534 still queries the daemon" nobody_status "$T/sock"
stop
rm -f "$T/rec.trace"
start "$T/state" "$T/sock" --record "$T/rec.trace" || exit 1
check "a new --record file 0640 under umask 000 (got $(mode "$T/rec.trace"))" test "$(mode "$T/rec.trace")" = 640
stop

# The socket in the state folder: others pass through to it, list nothing.
start "$T/both" "$T/both/io.wattprof.sock" || exit 1
check "state folder with the socket in it 0751 (got $(mode "$T/both"))" test "$(mode "$T/both")" = 751
check "uid 65534 cannot list it" denied ls "$T/both"
check "uid 65534 cannot read the database in it" denied cat "$T/both/wattprof.db"
check "uid 65534 queries the daemon through it" nobody_status "$T/both/io.wattprof.sock"
stop
finish

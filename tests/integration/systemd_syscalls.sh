#!/usr/bin/env bash
# The seccomp filter of wattprofd.service, checked against what the
# daemon really calls: wattprofd runs as in the service (uid 65534 holding the
# unit's ambient capabilities, no_new_privs) under strace, over a fake RAPL
# tree, tracking a busy process, answering a root and an unprivileged client,
# reloading on SIGHUP and stopping on SIGTERM. Every system call it made must
# pass the unit's SystemCallFilter= lines, as systemd-analyze expands them.
# systemd itself is not PID 1 here, so this is how the filter is tested.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"

fake=$SRCDIR/tests/helpers/fake-powercap
unit=$SRCDIR/systemd/wattprofd.service.in
nobody=65534

if [ "${1:-}" != --inside ]; then
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run the daemon as another user with capabilities"; exit 77; }
  for t in strace setpriv systemd-analyze; do
    command -v $t >/dev/null || { echo "SKIP: $t not found (Debian packages strace, util-linux, systemd)"; exit 77; }
  done
  exec "$fake" -- "$0" --inside
fi

work=$(mktemp -d /tmp/wattprof-syscalls.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
: >"$work/empty.conf"
mkdir "$work/state" && chown $nobody "$work/state"
# uid 65534 runs copies of the daemon and of the client's module: the build
# tree may lie where that uid cannot go (a clone under /root).
why=$(copy_for_uid $nobody "$work/bin" "$BUILDDIR/daemon/wattprofd" "$SRCDIR/tests/varlink_peer.py") ||
  { echo "SKIP: $why"; exit 77; }

"$BUILDDIR/tests/energy-writer" --hz 100 intel-rapl:0=30 &
pids+=($!)
"$BURN" 30 &
pids+=($!)

caps=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr 'A-Z' 'a-z' | sed 's/cap_/+/g; s/ /,/g')
strace -f -qq -o "$work/trace" setpriv --reuid=$nobody --regid=$nobody --clear-groups \
  --no-new-privs --inh-caps="-all,$caps" --ambient-caps="$caps" --bounding-set="-all,$caps" \
  "$work/bin/wattprofd" --config "$work/empty.conf" --state-dir "$work/state" \
  --socket "$work/state/sock" >"$work/log" 2>&1 &
tracer=$!
pids+=("$tracer")

client='import os, sys, time
sys.path.insert(0, sys.argv[2])
import varlink_peer
varlink_peer.wait_for_socket(sys.argv[1], timeout=30)
with varlink_peer.Connection(sys.argv[1]) as c:
    c.call("org.varlink.service.GetInfo")
    c.call("io.wattprof.Monitor.GetStatus")
    c.call("io.wattprof.Monitor.ListProcesses", {"window_s": 60})
print("ok")'
check "a root client is answered" test "$("$PYTHON" -c "$client" "$work/state/sock" "$work/bin")" = ok
sleep 2.5  # a few seconds of sampling, rescans and database commits
check "an unprivileged client is answered (the daemon looks up its groups)" \
  test "$(setpriv --reuid=$nobody --regid=$nobody --clear-groups "$PYTHON" -c "$client" "$work/state/sock" "$work/bin")" = ok
daemon=$(ps -o pid= --ppid "$tracer" | tr -d ' ')
check "the daemon runs as uid $nobody" test "$(stat -c %u "/proc/$daemon")" = $nobody
kill -HUP "$daemon"
sleep 1
kill -TERM "$daemon"
wait "$tracer"
check "it stopped cleanly" grep -q "received Terminated, stopping" "$work/log"

# The system calls of the daemon's process (setpriv's own come before its exec).
awk -v d="$daemon" '$1 == d && /execve\(.*wattprofd/ { seen = 1 } seen || $1 != d' "$work/trace" |
  sed -nE 's/^[0-9]+ +([a-z0-9_]+)\(.*/\1/p; s/^[0-9]+ +<\.\.\. ([a-z0-9_]+) resumed>.*/\1/p' |
  sort -u >"$work/used"
"$PYTHON" - "$unit" "$work/used" <<'PY' || failures=$((failures + 1))
import subprocess, sys

def expand(names, seen):
    out = set()
    for name in names:
        if not name.startswith("@"):
            out.add(name)
        elif name not in seen:
            seen.add(name)
            lines = subprocess.run(["systemd-analyze", "syscall-filter", name], check=True,
                                   capture_output=True, text=True).stdout.splitlines()[1:]
            out |= expand([w.strip() for w in lines if w.strip() and not w.strip().startswith("#")], seen)
    return out

# As systemd reads them, in order: the first line is an allow list; a later
# ~ line takes calls out of it, a later plain line puts them back.
allowed = set()
for line in open(sys.argv[1]):
    if line.startswith("SystemCallFilter="):
        v = line.split("=", 1)[1].split()
        if v[0].startswith("~"):
            allowed -= expand([v[0][1:]] + v[1:], set())
        else:
            allowed |= expand(v, set())
used = [u.strip() for u in open(sys.argv[2]) if u.strip()]
blocked = [u for u in used if u not in allowed]
print(("FAIL - " if blocked or len(used) < 20 else "ok - ") +
      f"{len(used)} distinct system calls" +
      (f"; blocked by the unit's filter: {blocked}" if blocked else ", all allowed by the unit's filter"))
sys.exit(1 if blocked or len(used) < 20 else 0)
PY
check "perf_event_open was among them (the filter's one addition)" grep -qx perf_event_open "$work/used"
finish

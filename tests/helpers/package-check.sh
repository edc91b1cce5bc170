#!/bin/sh
# Runs inside the booted container (tests/integration/package_nspawn.sh), under
# systemd as PID 1, from the oneshot unit wattprof-check.service (which
# powers the container off when it ends); writes one "ok - ..." or
# "FAIL - ..." line per check to /root/results, and "done" at the end.
# POSIX sh: the tree is a minimal Debian.
out=/root/results
sock=/run/wattprof/io.wattprof.sock
: >"$out"
ok() { echo "ok - $*" >>"$out"; }
bad() { echo "FAIL - $*" >>"$out"; }
check() { desc=$1; shift; if "$@" >/tmp/check.out 2>&1; then ok "$desc"; else bad "$desc: $(tail -3 /tmp/check.out | tr '\n' ' ')"; fi; }
active_within() { # UNIT SECONDS
  i=0
  while [ "$i" -lt "$(($2 * 10))" ]; do
    [ "$(systemctl is-active "$1")" = active ] && return 0
    sleep 0.1; i=$((i + 1))
  done
  return 1
}
prop() { systemctl show -p "$2" --value "$1"; }

check "systemd is PID 1" test "$(cat /proc/1/comm)" = systemd
check "wattprofd.service reaches active through Type=notify" active_within wattprofd.service 30
check "wattprof status answers root on $sock" wattprof status --socket "$sock"
useradd -m checker 2>/dev/null
check "wattprof status answers another user" runuser -u checker -- wattprof status --socket "$sock"
# A process of that user that works for a few seconds (found by a rescan:
# a container has no proc connector).
runuser -u checker -- timeout 6 sh -c 'while :; do :; done' &
sleep 3.5
uid=$(id -u checker)
runuser -u checker -- wattprof ps --json --socket "$sock" >/tmp/ps.json 2>&1
uids=$(grep -o '"uid": *[0-9]*' /tmp/ps.json | grep -o '[0-9]*$' | sort -u | tr '\n' ' ')
check "that user's ps lists that user's processes only (uids: ${uids:-none})" \
  sh -c 'test "$1" = "$2" || { cat /tmp/ps.json; false; }' _ "$uids" "$uid "

# Socket activation: with the service stopped, the first query starts it.
systemctl stop wattprofd.service
check "stopped, the service is inactive and its socket listening" sh -c \
  "[ \$(systemctl is-active wattprofd.service) != active ] && [ \$(systemctl is-active wattprofd.socket) = active ]"
check "a query on the socket starts the daemon" wattprof status --socket "$sock"
check "... which is then active" active_within wattprofd.service 10

# Reload: the model is loaded again.
check "systemctl reload wattprofd" systemctl reload wattprofd.service
sleep 1
check "... and the daemon says it reloaded" sh -c "journalctl -u wattprofd.service --no-pager -o cat | grep -q 'reloaded model '"

# The watchdog: a daemon that stops (SIGSTOP) is killed and restarted.
before=$(prop wattprofd.service NRestarts)
pid=$(prop wattprofd.service MainPID)
[ "${pid:-0}" -gt 0 ] && kill -STOP "$pid"
i=0
while [ "$i" -lt 40 ] && [ "$(prop wattprofd.service NRestarts)" = "$before" ]; do sleep 1; i=$((i + 1)); done
check "a stopped daemon is restarted by the watchdog (NRestarts $before -> $(prop wattprofd.service NRestarts) after ${i}s)" \
  test "$(prop wattprofd.service NRestarts)" -gt "$before"
check "... and serves again" active_within wattprofd.service 20

# Retraining: listed, and runs once without error on a node without RAPL.
check "wattprof-train.timer is listed" sh -c "systemctl list-timers --all --no-pager | grep -q wattprof-train.timer"
systemctl start wattprof-train.service
check "wattprof-train.service runs once without error" test "$(prop wattprof-train.service Result)" = success
check "... and says why it did nothing" sh -c "journalctl -u wattprof-train.service --no-pager | grep -qi rapl"

exposure=$(systemd-analyze security wattprofd.service --no-pager 2>/dev/null |
  sed -n 's/.*Overall exposure level for wattprofd.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security wattprofd.service: ${exposure:-?} <= 2.0" \
  awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'
journalctl -u wattprofd.service --no-pager -o short-monotonic >/root/journal 2>&1
echo done >>"$out"

#!/usr/bin/env bash
# [exporter] values wattprofd must refuse, each with one line naming
# FILE:LINE (or, for a port in use, the key and the address) and exit 1;
# and the endpoint answering on the port the kernel picked for port 0.
# The daemon replays a recording of one tick, so it never samples this
# machine and prints nothing else on stderr.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"
tmp=$(mktemp -d)
cleanup() {
  [ -n "${hold:-}" ] && kill "$hold" 2>/dev/null
  [ -n "${dpid:-}" ] && kill "$dpid" 2>/dev/null && wait "$dpid"
  rm -rf "$tmp"
}
trap cleanup EXIT
wattprofd=$BUILDDIR/daemon/wattprofd
printf '%s\n' '{"format":"wattprof-trace/1","events":["perf::TASK-CLOCK"],"zones":[],"rate_hz":50,"boot_id":"00000000-0000-0000-0000-000000000000"}' \
  >"$tmp/one.trace"
# A process whose name is not UTF-8 (byte 0xff; the kernel takes any bytes).
printf '{"proc":{"pid":7,"ppid":1,"start":9,"uid":0,"comm":"bad\377name","cmdline":"x","cgroup":"/t"}}\n' \
  >>"$tmp/one.trace"
printf '%s\n' '{"tick":{"t":1000000000000,"dt":20000000,"energy_j":[],"procs":[{"pid":7,"start":9,"d":[10000000],"r":[1]}]}}' \
  >>"$tmp/one.trace"
cat >"$tmp/model.json" <<'JSON'
{"format": "wattprof-model/1", "name": "one-event", "engine": "ridge", "target": ["package"],
 "events": ["perf::TASK-CLOCK"], "scaler": {"min": [0], "max": [1e9]},
 "classes": {"models": [{"name": "all", "intercept": 10.0, "coef": [40.0]}]},
 "idle_power_w": 20.0}
JSON

run_with() { # the [exporter] section's lines
  printf '[exporter]\n' >"$tmp/c.conf"
  printf '%s\n' "$@" >>"$tmp/c.conf"
  timeout 20 "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --replay "$tmp/one.trace" --model "$tmp/model.json"
}

for v in nonsense 127.0.0.1:99999 127.0.0.1: 127.0.0.1:12a 1.2.3:80 localhost:9934 \
  '[::1:9934' ':' 127.0.0.1:-1 '999.0.0.1:80'; do
  expect_fail "listen = $v" 1 "c.conf:2: bad value '$v' for 'listen' in [exporter]" \
    run_with "listen = $v"
done
for v in -1 x 1.5 100001; do
  expect_fail "top_pids = $v" 1 "c.conf:3: bad value '$v' for 'top_pids'" \
    run_with "listen = 0" "top_pids = $v"
done
for v in x -5s nan; do
  expect_fail "grace = $v" 1 "c.conf:2: bad value '$v' for 'grace'" run_with "grace = $v"
done
for v in 'A=B' 'SLURM_JOB_ID,,PBS_JOBID' 'SLURM JOB' ','; do
  expect_fail "job_env = $v" 1 "c.conf:2: bad value '$v' for 'job_env'" run_with "job_env = $v"
done
expect_fail "an unknown key" 1 "c.conf:2: unknown key 'port' in section [exporter]" \
  run_with "port = 9934"

# A port someone else listens on: the daemon stops before it samples.
"$PYTHON" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)' >"$tmp/port" &
hold=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
expect_fail "listen on a port in use" 1 \
  "[exporter] listen = 127.0.0.1:$port: cannot listen there: Address already in use" \
  run_with "listen = 127.0.0.1:$port"

# Port 0: the daemon says which port it got, and serves /metrics there.
printf '[exporter]\nlisten = 127.0.0.1:0\n' >"$tmp/ok.conf"
"$wattprofd" --config "$tmp/ok.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
  --replay "$tmp/one.trace" --model "$tmp/model.json" >"$tmp/log" 2>&1 &
dpid=$!
for _ in $(seq 100); do grep -q 'serving http' "$tmp/log" && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$tmp/log")
check "the daemon names the address it serves ($url)" test -n "$url"
code() { "$PYTHON" -c '
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)' "$1" 2>/dev/null; }
# The replay publishes its one tick when it ends.
for _ in $(seq 50); do [ "$(code "$url")" = 200 ] && break; sleep 0.1; done
check "GET /metrics answers 200" test "$(code "$url")" = 200
check "another path answers 404" test "$(code "${url%/metrics}/other")" = 404
# A command name that is not UTF-8 (the kernel takes any bytes) becomes U+FFFD:
# Prometheus would reject the whole scrape otherwise.
"$PYTHON" -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' \
  "$url" >"$tmp/metrics"
check "the bad byte is exported as U+FFFD" grep -q 'command="bad'$'\xef\xbf\xbd''name"' "$tmp/metrics"
if command -v promtool >/dev/null; then
  check "promtool check metrics accepts it" promtool check metrics <"$tmp/metrics"
else
  skip_note "promtool (Debian package prometheus) is not installed"
fi
finish

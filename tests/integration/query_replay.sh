#!/usr/bin/env bash
# The query commands on deterministic data: wattprofd replays a recording
# of two processes under a constant 100 W package meter with a calibrated
# one-event model, so every number the commands print is known in advance.
#
# Model: idle 20 W, p = 10 W + 40 W x (task-clock in cores). alpha runs half
# a core, beta a quarter, for 150 ticks of 20 ms (3 s): host 300 J, idle
# 60 J, active 240 J split 2:1 by dynamic power (20 W : 10 W), so alpha gets
# 160 J and beta 80 J. CPU: 1.5 s and 0.75 s in a 60 s window. Power is
# energy over the seconds a process lived, which 3 s of data span 3 or 4 of
# depending on where in a wall-clock second the replay started.
set -u
. "$SRCDIR/tests/helpers/lib.sh"

WATTPROFD=$BUILDDIR/daemon/wattprofd
[ -x "$WATTPROFD" ] || { echo "wattprofd is not built"; exit 77; }
tmp=$(mktemp -d)
sock=$tmp/sock
cleanup() {
  [ -n "${dpid:-}" ] && kill "$dpid" 2>/dev/null && wait "$dpid"
  rm -rf "$tmp"
}
trap cleanup EXIT
W() {
  "$WATTPROF" "$@" --socket "$sock"
  local r=$?
  [ "$r" = 0 ] || { echo "FAIL - wattprof $* exited $r"; failures=$((failures + 1)); }
  return "$r"
}

"$PYTHON" - "$tmp" "$(id -u)" <<'PY'
import json, sys, time
tmp, uid = sys.argv[1], int(sys.argv[2])
model = {"format": "wattprof-model/1", "name": "query-test", "engine": "ridge",
         "target": ["package"], "events": ["perf::TASK-CLOCK"],
         "scaler": {"min": [0], "max": [1e9]},
         "classes": {"models": [{"name": "all", "intercept": 10.0, "coef": [40.0]}]},
         "idle_power_w": 20.0,
         "training": {"rows": 100, "cv_mape": 0.025, "created": "2026-11-30T04:00:00Z"}}
json.dump(model, open(f"{tmp}/model.json", "w"))
dt = 20_000_000
with open(f"{tmp}/run.trace", "w") as f:
    def put(o):
        f.write(json.dumps(o) + "\n")
    put({"format": "wattprof-trace/1", "events": ["perf::TASK-CLOCK"],
         "zones": [{"id": "intel-rapl:0", "name": "package-0"}], "rate_hz": 50,
         "boot_id": "00000000-0000-0000-0000-00000000abcd",
         # The 3 s of data end 5 s ago: a replay at --speed max of a trace
         # without an offset would stamp them from now on, partly in the
         # future, outside a query's default --until of now.
         "realtime_offset_ns": time.time_ns() - 5 * 10**9 - (10**12 + 150 * dt)})
    for pid, start, comm in [(4001, 700, "alpha"), (4002, 701, "beta")]:
        put({"proc": {"pid": pid, "ppid": 1, "start": start, "uid": uid, "comm": comm,
                      "cmdline": comm + " --work", "cgroup": "/test"}})
    for k in range(150):
        put({"tick": {"t": 10**12 + (k + 1) * dt, "dt": dt, "energy_j": [100.0 * dt / 1e9],
                      "procs": [{"pid": 4001, "start": 700, "d": [0.5 * dt], "r": [1.0]},
                                {"pid": 4002, "start": 701, "d": [0.25 * dt], "r": [1.0]}]}})
PY

"$WATTPROFD" --state-dir "$tmp" --socket "$sock" --replay "$tmp/run.trace" --speed max \
  --model "$tmp/model.json" >"$tmp/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do grep -q "finished after" "$tmp/daemon.log" && break; sleep 0.1; done
check "the replay finished" grep -q "finished after 150 ticks" "$tmp/daemon.log"
# The replay's rows run 3 s from its start on the wall clock: let now pass them.
sleep 3.5

W ps --window 1m --json >"$tmp/ps.json"
check "ps --json: alpha 160 J, beta 80 J, energy order" \
  test "$(json_get "$tmp/ps.json" '[p["comm"] for p in d["processes"]]' \
    'round(d["processes"][0]["energy_j"], 6)' 'round(d["processes"][1]["energy_j"], 6)' \
    'round(d["processes"][0]["total_j"], 6)' 'd["processes"][0]["cmdline"]')" = "['alpha', 'beta'] 160.0 80.0 160.0 alpha --work"
# POWER and CPU% alike are over the whole 60 s window, not the 3 s the
# processes lived: 160 J / 60 s and 1.5 CPU-s / 60 s.
check "ps --json: power and CPU over the window" \
  test "$(json_get "$tmp/ps.json" 'round(d["processes"][0]["power_w"], 3)' \
    'round(d["processes"][1]["power_w"], 3)' 'round(d["processes"][0]["cpu"], 6)')" = "2.667 1.333 0.025"
W ps --window 1m >"$tmp/ps.txt"
me=$(id -un)
w=$((${#me} > 4 ? ${#me} : 4))
{
  printf ' PID  %-*s  COMMAND   POWER  ENERGY   TOTAL  CPU%%\n' "$w" USER
  printf '4001  %-*s  alpha    2.67 W   160 J   160 J   2.5\n' "$w" "$me"
  printf '4002  %-*s  beta     1.33 W  80.0 J  80.0 J   1.3\n' "$w" "$me"
} >"$tmp/ps.want"
check "ps table, exactly" diff -u "$tmp/ps.want" "$tmp/ps.txt"
W ps --window 1m --csv | cut -d, -f1-4,6-8 >"$tmp/ps.csv"
check "ps csv, exactly" diff -u - "$tmp/ps.csv" <<TABLE
pid,user,comm,class,energy_j,total_j,cpu
4001,$me,alpha,all,160,160,0.025
4002,$me,beta,all,80,80,0.0125
TABLE

W show 4001 --json >"$tmp/show.json"
check "show --json: alpha's totals, class and the model" \
  test "$(json_get "$tmp/show.json" 'round(d["process"]["total_j"], 6)' 'round(sum(s["energy_j"] for s in d["series"]), 6)' \
    'd["classes"][0]["class"]' 'd["model"]["name"]' 'd["model"]["calibrated"]')" = "160.0 160.0 all query-test True"
W show 4001 >"$tmp/show.txt"
check "show text: energy line" grep -qx 'energy     160 J attributed, [0-9.]* [kmJ]* standalone estimate' "$tmp/show.txt"
check "show text: model line" grep -qx 'model      query-test (ridge, sha256 [0-9a-f]\{12\})' "$tmp/show.txt"

W history --host --since 1m --json >"$tmp/host.json"
check "host history sums to the meter's 300 J" \
  test "$(json_get "$tmp/host.json" 'round(sum(s["energy_j"] for s in d["samples"]), 6)')" = "300.0"
W history --pid 4002 --since 1m --step 1m --csv >"$tmp/beta.csv"
beta_j=$("$PYTHON" -c 'import csv,sys; print(round(sum(float(r["energy_j"]) for r in csv.DictReader(open(sys.argv[1]))), 6))' "$tmp/beta.csv")
check "beta's history in 1-minute buckets: 80 J in all (got $beta_j)" test "$beta_j" = "80.0"
[ "$beta_j" = "80.0" ] || { echo "the buckets:"; cat "$tmp/beta.csv"; date +%s.%N; }
W history --pid 4001 --since 1m --plot "$tmp/alpha.png"
check "alpha's chart decodes and is not blank" "$PYTHON" "$SRCDIR/tests/integration/png_check.py" "$tmp/alpha.png" 900 500

W export --since 1m --format csv >"$tmp/export.csv"
check "export: every second of both, 160 J + 80 J" \
  test "$("$PYTHON" -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by[r["comm"]] = by.get(r["comm"], 0) + float(r["energy_j"])
print(sorted((k, round(v, 6)) for k, v in by.items()), len({r["t"] for r in rows}) in (3, 4))' "$tmp/export.csv")" = "[('alpha', 160.0), ('beta', 80.0)] True"

W status --json >"$tmp/status.json"
check "status: every watt attributed, so no 'unattributed 0 W' in the text" \
  test "$(json_get "$tmp/status.json" 'd["host"]["unattributed_w"]') $(W status | grep -c unattributed)" = "0.0 0"

check "status: the calibrated model and its creation time" \
  test "$(json_get "$tmp/status.json" 'd["model"]["name"]' 'd["model"]["calibrated"]' 'd["model"]["created"]')" = "query-test True 2026-11-30T04:00:00Z"
check "status text: trained, with its CV error" grep -q 'query-test, ridge, sha256 [0-9a-f]*, trained 2026-11-30T04:00:00Z, CV MAPE 2.5 %' <(W status)
W models --csv >"$tmp/models.csv"
check "models: query-test in use" grep -q '^true,query-test,ridge,[0-9a-f]\{64\},2026-11-30T04:00:00Z,0.025,' "$tmp/models.csv"

kill "$dpid"; wait "$dpid"; dpid=
finish

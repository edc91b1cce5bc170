#!/usr/bin/env bash
# The query commands against a real wattprofd: status, ps, show, history
# (table, JSON, CSV, terminal chart, PNG and SVG), export, models, reload and
# top (one snapshot without a terminal; the live screen under tmux, more of
# it in top_live.py), their errors, and colour only on a terminal without
# NO_COLOR.
#
# The daemon runs as whoever runs the test (unprivileged it watches only the
# caller's processes); the workload is tests/helpers/burn.
set -u
. "$SRCDIR/tests/helpers/lib.sh"

WATTPROFD=$BUILDDIR/daemon/wattprofd
[ -x "$WATTPROFD" ] || { echo "wattprofd is not built"; exit 77; }
tmp=$(mktemp -d)
chmod 755 "$tmp"
sock=$tmp/sock
session=wattprof-query-$$
# A tmux server of this test's own: on the shared default socket another
# test's kill-session could end the server under this one ("server exited
# unexpectedly"), and so could this test's own probe below.
tmx() { tmux -S "$tmp/tmux.sock" "$@"; }
cleanup() {
  tmx kill-server 2>/dev/null
  [ -n "${dpid:-}" ] && kill "$dpid" 2>/dev/null && wait "$dpid"
  rm -rf "$tmp"
}
trap cleanup EXIT
# W: a command that must succeed (a non-zero exit, a leak under ASan
# included, is a failure); Wf: one whose failure is checked by expect_fail.
Wf() { "$WATTPROF" "$@" --socket "$sock"; }
W() {
  "$WATTPROF" "$@" --socket "$sock"
  local r=$?
  [ "$r" = 0 ] || { echo "FAIL - wattprof $* exited $r"; failures=$((failures + 1)); }
  return "$r"
}

"$WATTPROFD" --state-dir "$tmp" --socket "$sock" >"$tmp/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do Wf status >/dev/null 2>&1 && break; sleep 0.1; done
if ! kill -0 "$dpid" 2>/dev/null; then
  # Its own tests cover why; here it means these checks cannot run.
  echo "wattprofd could not start here: $(tail -1 "$tmp/daemon.log")"
  dpid=
  exit 77
fi
check "the daemon answers status" W status --json >/dev/null

# A workload that outlives a /proc rescan (5 s), so it is found either way.
"$BURN" 6 &
bpid=$!
wait "$bpid"
sleep 1.5
me=$(id -un)

# ---- status -------------------------------------------------------------------
W status >"$tmp/status.txt"
check "status names version, sampling, model and database" \
  grep -q -e '^wattprofd ' "$tmp/status.txt" -e '^Sampling' "$tmp/status.txt"
check "status text has every section" \
  "$PYTHON" -c 'import sys; t = open(sys.argv[1]).read(); sys.exit(any(s not in t for s in ["Sampling", "Host", "Power", "Events", "Model", "Drift", "Processes", "Database"]))' "$tmp/status.txt"
W status --json >"$tmp/status.json"
check "status --json: rate, achieved rate, model, database" \
  test "$(json_get "$tmp/status.json" 'd["rate_hz"]' 'd["achieved_hz"] > 40' 'd["model"]["name"] != ""' 'd["database"]["path"].startswith(sys.argv[1] if False else "/")')" = "50.0 True True True"
u=$(json_get "$tmp/status.json" 'abs(d["host"]["unattributed_w"] or 0) >= 5e-6')
check "status names the unattributed power only when it shows as more than 0.00 mW ($u)" \
  test "$(grep -c ', unattributed ' "$tmp/status.txt")" = "$([ "$u" = True ] && echo 1 || echo 0)"
W status --csv >"$tmp/status.csv"
check "status --csv: field,value lines" grep -qx 'rate_hz,50.0' "$tmp/status.csv"
check "status --csv header" test "$(head -1 "$tmp/status.csv")" = "field,value"

# ---- ps -------------------------------------------------------------------------
W ps --window 1m --json >"$tmp/ps.json"
check "ps --json lists burn with energy and CPU" \
  test "$(json_get "$tmp/ps.json" "[p['comm'] for p in d['processes'] if p['pid'] == $bpid] == ['burn']" \
    "[p['energy_j'] > 0 and p['cpu'] > 0 for p in d['processes'] if p['pid'] == $bpid] == [True]")" = "True True"
W ps --window 1m --comm '^burn$' --csv >"$tmp/ps.csv"
check "ps --csv header" test "$(head -1 "$tmp/ps.csv")" = "pid,user,comm,class,power_w,energy_j,total_j,cpu"
# As root the daemon sees every process, other tests' burns included.
check "ps --comm filters to burn" test "$(tail -n +2 "$tmp/ps.csv" | cut -d, -f3 | sort -u)" = burn
check "ps --comm keeps our burn" grep -q "^$bpid,[^,]*,burn," "$tmp/ps.csv"
W ps --window 1m --comm '^burn$' | grep -E "^ *(PID|$bpid) " >"$tmp/ps.txt"
check "ps table: header and burn's row, columns aligned" \
  "$PYTHON" -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
h, row = lines[0], lines[1]
# The daemon runs the one-class built-in model: no CLASS column (CSV keeps it).
assert h.split() == ["PID", "USER", "COMMAND", "POWER", "ENERGY", "TOTAL", "CPU%"], h
assert row.split()[0] == sys.argv[2] and "burn" in row, row
assert len(h) == len(row), (h, row)  # right-aligned last column ends together
assert row.split()[6] in ("mJ", "J", "kJ"), row' "$tmp/ps.txt" "$bpid"
check "ps -n 1 gives one process" test "$(W ps --window 1m -n 1 --csv | wc -l)" = 2
check "ps --sort cpu puts the busiest first" \
  test "$(W ps --window 1m --sort cpu --json | "$PYTHON" -c 'import json,sys; c=[p["cpu"] for p in json.load(sys.stdin)["processes"]]; print(c == sorted(c, reverse=True))')" = True
check "ps --user $me keeps burn" grep -q burn <(W ps --window 1m --user "$me")
# POWER and CPU% share one definition: the window's total over its length.
# burn ran about 6 s of a 1m window: its power is a tenth of a 10 s window's
# share, not its power while it ran.
for w in 10s 1m; do
  W ps --window $w --comm '^burn$' --json >"$tmp/ps-$w.json"
  check "ps --window $w: power_w is energy_j / window_s for every process" \
    "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not d["processes"] or any(abs(p["power_w"] * d["window_s"] - p["energy_j"]) > 1e-9 * max(1, p["energy_j"]) for p in d["processes"]))' "$tmp/ps-$w.json"
done
check "ps --help states the definition" grep -q "POWER and CPU% are both averages over the whole window" <(W ps --help)

# ---- show ---------------------------------------------------------------------------
W show "$bpid" --json >"$tmp/show.json"
check "show --json: the process, its total, series and model" \
  test "$(json_get "$tmp/show.json" "d['process']['pid'] == $bpid" "d['process']['total_j'] > 0" \
    "len(d['series']) >= 1" "d['model']['in_use']" "d['classes'][0]['class'] != ''")" = "True True True True True"
total=$(json_get "$tmp/show.json" "d['process']['total_j']")
W show "$bpid" >"$tmp/show.txt"
check "show says what attributed and standalone mean" \
  grep -q "attributed: its share of the measured energy.*standalone: the model's estimate of it alone" "$tmp/show.txt"
check "show text: pid, command, energy, power, model" \
  "$PYTHON" -c 'import sys; t = open(sys.argv[1]).read(); sys.exit(not (t.startswith(sys.argv[2] + " burn") and all(s in t for s in ["energy", "power", "model", "classes"])))' "$tmp/show.txt" "$bpid"
check "show --csv: the series" test "$(W show "$bpid" --csv | head -1)" = "t,time,energy_j,power_w,cpu"
# A running process: its recent power and CPU, not 0. Asked once it has two
# stored seconds (the daemon finds a new process within a /proc rescan).
"$BURN" 10 &
rpid=$!
for _ in $(seq 40); do
  sleep 0.25
  Wf show "$rpid" --json >"$tmp/show-running.json" 2>/dev/null &&
    [ "$(json_get "$tmp/show-running.json" "len(d['series']) >= 2")" = True ] && break
done
kill "$rpid"; wait "$rpid" 2>/dev/null
check "show --json of a running process: power_w and cpu, the means of its recent series" \
  "$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
p, s = d["process"], d["series"]
mean = lambda k: sum(x[k] for x in s) / len(s)
sys.exit(not (p["power_w"] > 0 and p["cpu"] > 0 and p["recent_s"] == len(s) >= 2 and
              abs(p["power_w"] - mean("power_w")) < 1e-9 and abs(p["cpu"] - mean("cpu")) < 1e-9))' \
  "$tmp/show-running.json"

# ---- history -------------------------------------------------------------------------
W history --pid "$bpid" --since 10m --step 1s --json >"$tmp/hist.json"
hsum=$(json_get "$tmp/hist.json" 'sum(s["energy_j"] for s in d["samples"])')
check "history of burn sums to show's total ($hsum J vs $total J)" within "$hsum" "$total" 0.001
check "history --csv header" test "$(W history --pid "$bpid" --since 10m --csv | head -1)" = "t,power_w,energy_j,cpu,covered_s"
check "history table has times in ISO 8601" \
  grep -qE '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z +[0-9.]+ (mW|W)' <(W history --pid "$bpid" --since 10m)
since_iso=$(date -u -d '-10 min' +%Y-%m-%dT%H:%M:%SZ)
check "history accepts ISO 8601 --since and --step 1m" \
  test "$(W history --pid "$bpid" --since "$since_iso" --step 1m --json | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(d["step_s"], len(d["samples"]) >= 1)')" = "60.0 True"
if [ "$(id -u)" = 0 ]; then # a command's history spans users: privileged only
  check "history --comm burn" \
    test "$(W history --comm burn --since 10m --json | "$PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)["samples"]) >= 1)')" = True
fi
# The host has no CPU column: '-' in the table, empty in CSV, null in JSON.
check "history --host --json: cpu is null" \
  test "$(W history --host --since 5m --json | "$PYTHON" -c 'import json,sys; s = json.load(sys.stdin)["samples"]; print(bool(s) and all(x["cpu"] is None for x in s))')" = True
check "history --host --json without RAPL: measured_j is null, not the modeled energy" \
  test "$(W history --host --since 5m --json | "$PYTHON" -c 'import json,sys; s = json.load(sys.stdin)["samples"]; print(bool(s) and all(x["measured_j"] is None for x in s))')" = True
check "history --host --csv: cpu is empty" \
  test "$(W history --host --since 5m --csv | tail -n +2 | cut -d, -f4 | sort -u)" = ""
check "history --host table: CPU% is -" \
  test "$(W history --host --since 5m | tail -n +2 | awk '{print $6}' | sort -u)" = "-"
W history --host --since 5m --plot >"$tmp/chart.txt"
check "history --plot draws a terminal chart with axis and labels" \
  "$PYTHON" -c 'import sys; t = open(sys.argv[1]).read(); sys.exit(not ("power of host" in t and "W " in t and "T" in t.splitlines()[-1]))' "$tmp/chart.txt"
W history --host --since 5m --plot "$tmp/host.png"
check "history --plot FILE.png: decodes, 900x500, plot not blank" "$PYTHON" "$SRCDIR/tests/integration/png_check.py" "$tmp/host.png" 900 500
W history --pid "$bpid" --since 5m --plot "$tmp/burn.svg"
check "history --plot FILE.svg is an SVG of 900x500 points" \
  "$PYTHON" -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); sys.exit(not (r.tag.endswith("svg") and r.get("width") == "900pt" and r.get("height") == "500pt"))' "$tmp/burn.svg"

# ---- export --------------------------------------------------------------------------
W export --since 10m --format csv --out "$tmp/export.csv"
check "export csv header" test "$(head -1 "$tmp/export.csv")" = "t,time,pid,comm,user,uid,class,energy_j,cpu_s"
esum=$("$PYTHON" -c 'import csv,sys; print(sum(float(r["energy_j"]) for r in csv.DictReader(open(sys.argv[1])) if r["pid"] == sys.argv[2]))' "$tmp/export.csv" "$bpid")
check "export csv rows of burn sum to its total ($esum J)" within "$esum" "$total" 0.001
check "export from the epoch (a window longer than the daemon takes)" \
  grep -q "^[0-9]*,[^,]*,$bpid,burn," <(W export --since @0 --format csv)
W export --since 10m --until now --format json >"$tmp/export.json"
check "export json: per-second rows in time order, burn's included" \
  test "$(json_get "$tmp/export.json" '[r["t"] for r in d["rows"]] == sorted(r["t"] for r in d["rows"])' "any(r['pid'] == $bpid for r in d['rows'])")" = "True True"

# ---- models and reload ------------------------------------------------------------------
W models --json >"$tmp/models.json"
check "models --json: the one in use first" test "$(json_get "$tmp/models.json" 'd["models"][0]["in_use"]')" = True
check "models table" grep -q '^\*' <(W models)
check "models --csv header" test "$(W models --csv | head -1)" = "in_use,name,engine,sha256,created,cv_mape,loaded"
now=$(date +%s)
check "models --json: the model in use says when it was loaded" \
  test "$(json_get "$tmp/models.json" "$now - 3600 < d['models'][0]['loaded'] <= $now + 1")" = True
check "models: LOADED is a time on every row, the one in use included" \
  test "$(W models | awk 'NR > 1 && $NF !~ /^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]+Z$/' | wc -l)" = 0
check "models --csv: loaded is Unix seconds on the row in use" \
  grep -qE '^true,.*,[0-9]{10}$' <(W models --csv)
W reload "$SRCDIR/models/cputime.json" --json >"$tmp/reload.json"
check "reload FILE loads it" test "$(json_get "$tmp/reload.json" 'd["model"]["in_use"]')" = True
check "reload --csv" grep -qx 'cputime-generic,ridge,[0-9a-f]\{64\},false' <(W reload "$SRCDIR/models/cputime.json" --csv)
check "reload text" grep -qx 'loaded cputime-generic (ridge, sha256 [0-9a-f]\{12\}), uncalibrated' <(W reload)

# ---- top ---------------------------------------------------------------------------------
"$BURN" 30 &
bpid2=$!
sleep 1.5
W top --json >"$tmp/top.json"
check "top without a terminal: one snapshot with host and processes" \
  test "$(json_get "$tmp/top.json" '"modeled_w" in d["host"]' 'isinstance(d["processes"], list)')" = "True True"
check "top snapshot table" grep -q '^host: measured' <(W top </dev/null)
have_tmux=
# The probe session lives until cleanup, so the server never exits between
# it and the session under test.
if command -v tmux >/dev/null && tmx new-session -d -s "probe-$session" 'sleep 600' 2>/dev/null &&
  sleep 0.3 && tmx has-session -t "probe-$session" 2>/dev/null; then
  have_tmux=1
fi
if [ -n "$have_tmux" ]; then
  tmx new-session -d -s "$session" -x 130 -y 30 "$WATTPROF top --socket $sock"
  pane() { tmx capture-pane -p -t "$session"; }
  waitfor() { for _ in $(seq 50); do pane | grep -q -- "$1" && return 0; sleep 0.2; done; pane >&2; return 1; }
  check "top draws its header and host line" waitfor 'wattprof top  host: measured'
  check "top shows the running burn" waitfor "^ *$bpid2 .* burn "
  tmx send-keys -t "$session" C
  check "key C sorts by CPU" waitfor 'sort: CPU'
  # Anchored: other tests' processes (wpburn) may run beside this one.
  tmx send-keys -t "$session" / '^bu.n$' Enter
  check "key / filters by regex" waitfor 'filter: \^bu\.n\$'
  check "the filter leaves only burn" \
    test "$(pane | sed -n '5,28p' | grep -v '^ *$' | grep -vc ' burn ')" = 0
  tmx send-keys -t "$session" / '(' Enter
  check "a bad filter regex is named and the old filter kept" waitfor "bad regex '(': missing closing parenthesis"
  check "the old filter stays" waitfor 'filter: \^bu\.n\$'
  tmx send-keys -t "$session" / Enter
  check "an empty filter clears it" waitfor 'filter: none'
  tmx send-keys -t "$session" q
  gone() { for _ in $(seq 50); do tmx has-session -t "$session" 2>/dev/null || return 0; sleep 0.2; done; return 1; }
  check "key q quits" gone
else
  skip_note "tmux is missing or cannot start a server here: top's live screen not checked"
fi
kill "$bpid2" 2>/dev/null; wait "$bpid2" 2>/dev/null

# ---- colour ---------------------------------------------------------------------------------
# TERM set here: under TERM=dumb (or none) the client rightly prints no colour.
TERM=xterm script -qec "$WATTPROF status --socket $sock" /dev/null >"$tmp/tty.txt"
check "on a terminal, status is coloured" grep -q $'\033\\[' "$tmp/tty.txt"
NO_COLOR=1 TERM=xterm script -qec "$WATTPROF status --socket $sock" /dev/null >"$tmp/tty-nc.txt"
check "NO_COLOR=1 turns colour off" test "$(grep -c $'\033\\[' "$tmp/tty-nc.txt")" = 0
check "not a terminal: no colour" test "$(W status | grep -c $'\033')" = 0

# ---- errors: one line, non-zero ----------------------------------------------------------------
expect_fail "daemon not running" 1 "the daemon is not running: nothing listens on $tmp/none" \
  "$WATTPROF" status --socket "$tmp/none"
expect_fail "WATTPROF_SOCKET is honoured" 1 "nothing listens on $tmp/env-none" \
  env WATTPROF_SOCKET="$tmp/env-none" "$WATTPROF" ps
expect_fail "unknown pid" 1 "no process with pid 999999" Wf show 999999
expect_fail "not a pid" 2 "'12x' is not a process id" Wf show 12x
expect_fail "bad --since" 2 "--since 'yesterday': not a time" Wf history --host --since yesterday
expect_fail "bad --until" 2 "--until '2026-13-01': not a time" Wf history --host --since 1h --until 2026-13-01
expect_fail "until before since" 1 "bad time range" Wf history --host --since 1h --until 2h
expect_fail "history without a subject" 2 "exactly one of --pid" Wf history --since 1h
expect_fail "history without --since" 2 "--since is required" Wf history --host
expect_fail "bad --window" 2 "--window '0s'" Wf ps --window 0s
expect_fail "bad --sort" 2 "--sort 'size'" Wf ps --sort size
expect_fail "bad regex" 1 "bad --comm regex '(': missing closing parenthesis at offset 1" Wf ps --comm '('
# Patterns that cost glibc's regcomp gigabytes or minutes are the daemon's
# to refuse quickly: any client may send one.
expect_fail "regex too large to compile" 1 "regular expression is too large" \
  Wf ps --comm '(((a{1000}){1000}){1000})'
expect_fail "stacked repeats" 1 "quantifier does not follow a repeatable item" \
  Wf history --comm 'b*{0,50}{3,}' --since 10m
check "the daemon answers after them" W status
expect_fail "unknown user" 2 "--user 'no-such-user-x'" Wf ps --user no-such-user-x
expect_fail "unknown option" 2 "unknown option or missing value '--bogus'" Wf status --bogus
expect_fail "unwritable export file" 1 "cannot write $tmp/no/dir/x.csv" \
  Wf export --since 1h --format csv --out "$tmp/no/dir/x.csv"
expect_fail "unwritable picture" 1 "cannot write $tmp/no/dir/x.png" \
  Wf history --host --since 1h --plot "$tmp/no/dir/x.png"
expect_fail "export without --format" 2 "--format is required" Wf export --since 1h
expect_fail "reload a file that is not a model" 1 "could not load $SRCDIR/meson.build" \
  Wf reload "$SRCDIR/meson.build"
expect_fail "reload a missing file" 1 "cannot read model $tmp/none.json" Wf reload "$tmp/none.json"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  asnobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$WATTPROF" "$@" --socket "$sock"; }
  expect_fail "permission denied: reload as nobody" 1 "permission denied: as uid 65534" \
    asnobody reload
  expect_fail "permission denied: another user's history" 1 "permission denied" \
    asnobody history --user root --since 1h
  check "nobody sees no one else's processes (only its own wattprof calls, if any)" \
    test "$(asnobody ps --window 1h --json | "$PYTHON" -c 'import json,sys; print({p["uid"] for p in json.load(sys.stdin)["processes"]} <= {65534})')" = True
  expect_fail "nobody cannot show root's burn" 1 "no process with pid $bpid" asnobody show "$bpid"
else
  skip_note "not root: the permission checks need a second user"
fi

# top when the daemon stops under it: tests/integration/top_live.py.
kill "$dpid"; wait "$dpid"; dpid=
check "the daemon stopped cleanly" true
finish

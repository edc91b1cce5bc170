#!/usr/bin/env bash
# wattprof run end to end, with real software events: a command tree's CPU
# time is counted once (children included, not twice), the command's exit
# status becomes ours, and every bad input gives one line naming its cause.
set -u
. "$SRCDIR/tests/helpers/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# What a run counts besides the burn: the burner's start-up after its exec
# (in task-clock; under ASan on a loaded host up to 90 ms), and the exec
# itself (in rusage only: the counters start at its end; 10-15 ms there).
# So a run of a 0.3 s burn is the yardstick for the runs below, and a
# task-clock agrees with rusage within 3 % or 20 ms.
"$WATTPROF" run --json --output "$tmp/one.json" -- "$BURN" 0.3
read -r one < <(json_get "$tmp/one.json" \
  'next(e["count"] for e in d["events"] if e["name"] == "perf::TASK-CLOCK") / 1e9')
agrees() { # A B: within 3 % of each other, or 20 ms
  "$PYTHON" -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > max(0.03 * b, 0.02))' "$@"
}

# --- A parent that burns 0.5 s and then waits on a child that burns 0.5 s:
# task-clock must read 1.0 s (inherit counts the child once), not 1.5 s:
# 0.7 s more than the 0.3 s burn's run, not 1.2 s.
"$WATTPROF" run --json --output "$tmp/tree.json" -- "$BURN" --tree 0.5
check "tree exits 0" test $? = 0
read -r taskclock cpu klass src < <(json_get "$tmp/tree.json" \
  'next(e["count"] for e in d["events"] if e["name"] == "perf::TASK-CLOCK") / 1e9' \
  'd["cpu_s"]' 'd["class"]' 'd["energy_source"]')
check "child counted once: task-clock $taskclock s is 0.7 s (+- 0.15) more than a 0.3 s burn's $one s" \
  "$PYTHON" -c 'import sys; t, o = map(float, sys.argv[1:]); sys.exit(abs(t - o - 0.7) > 0.15)' \
  "$taskclock" "$one"
check "task-clock $taskclock s agrees with rusage CPU $cpu s" agrees "$taskclock" "$cpu"
check "single-class default model" test "$klass" = all

# --- Children exiting while the counters are read: a read of the inherited
# group can fail with ECHILD for a moment as a child's events are detached.
# Read every 1 ms, a shell starting 20 commands met it in about one run in
# five before counters_read_group retried it, and the run ended with
# "measuring 'sh' failed: No child processes" and no report.
churn_fail=0
for i in $(seq 30); do
  rm -f "$tmp/churn.json"
  "$WATTPROF" run --interval 1 --json --output "$tmp/churn.json" -- \
    sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do /bin/true; done' \
    2>"$tmp/churn.err" || { churn_fail=$((churn_fail + 1)); cat "$tmp/churn.err" >&2; continue; }
  [ -s "$tmp/churn.json" ] || churn_fail=$((churn_fail + 1))
done
check "30 runs of a shell starting 20 commands, read every 1 ms: $churn_fail failed" \
  test "$churn_fail" = 0

# --- Exit status passes through; the report goes to stderr, stdout is the command's.
out=$("$WATTPROF" run -- sh -c 'echo hello; exit 3' 2>"$tmp/err")
check "exit status 3 passes through" test $? = 3
check "command stdout untouched" test "$out" = hello
check "human report on stderr" grep -q "standalone model energy" "$tmp/err"
check "the report says what attributed and standalone mean, near the top" \
  sh -c "head -5 '$tmp/err' | grep -q \"attributed: its share of the measured energy.*standalone: the model's estimate\""
check "the title is the whole command line, quoted as a shell would" \
  grep -qxF " Energy of sh -c 'echo hello; exit 3':" "$tmp/err"
check "task-clock as perf prints it: msec and CPUs utilized" \
  grep -Eq "^ +[0-9]+\.[0-9]{2} msec perf::TASK-CLOCK +[0-9.]+ %  # +[0-9]+\.[0-9]{3} CPUs utilized$" "$tmp/err"
check "no RAPL said at most once" test "$(grep -o "no RAPL" "$tmp/err" | wc -l)" -le 1
check "no unattributed line without a reason" test "$(grep -c "unattributed" "$tmp/err")" = 0
check "--help says the exit status is the command's" grep -q "exit status: CMD's own" <("$WATTPROF" run --help)

# --- -r N: N runs, means and standard deviations; -x SEP: one figure a line.
"$WATTPROF" run -r 3 --json --output "$tmp/rep.json" -- "$BURN" 0.3
check "-r 3 exits 0" test $? = 0
read -r runs tc cpu sd < <(json_get "$tmp/rep.json" 'd["runs"]' \
  'next(e["count"] for e in d["events"] if e["name"] == "perf::TASK-CLOCK") / 1e9' \
  'd["cpu_s"]' 'd["stddev"]["cpu_s"] >= 0 and d["stddev"]["wall_s"] > 0')
check "-r 3: three runs, a deviation for each figure" test "$runs $sd" = "3 True"
# Means of one run's figures, not sums: about the lone 0.3 s burn's run (its
# start-up varies from run to run), under twice it; three runs' sum would
# be 2.4 times it or more.
check "-r 3: the mean task-clock $tc s is one run's ($one s alone), not three runs'" \
  "$PYTHON" -c 'import sys; t, o = map(float, sys.argv[1:]); sys.exit(not 0.5 * o <= t <= 2 * o)' \
  "$tc" "$one"
check "-r 3: mean task-clock $tc s agrees with mean rusage CPU $cpu s" agrees "$tc" "$cpu"
"$WATTPROF" run -r 2 -- "$BURN" 0.05 2>"$tmp/rep.txt"
check "-r 2 text: runs in the title, +- on the figures" \
  grep -q "Energy of .*burn 0.05 (2 runs):" "$tmp/rep.txt"
check "-r 2 text: +- after the wall time" grep -Eq "wall time  \( \+- +[0-9.]+% \)$" "$tmp/rep.txt"
"$WATTPROF" run -r 3 -- sh -c 'exit 4' 2>"$tmp/rep4.txt"
check "-r stops at a failing run and exits with its status" test $? = 4
check "and says so" grep -q "(1 of 3 runs: run 1 exited 4)" "$tmp/rep4.txt"
"$WATTPROF" run -x ';' -r 2 -- "$BURN" 0.1 2>"$tmp/x.txt"
check "-x: five fields on every line" \
  test "$(awk -F';' 'NF != 5' "$tmp/x.txt" | wc -l) $(wc -l <"$tmp/x.txt")" = "0 $(grep -c . "$tmp/x.txt")"
read -r ms < <(awk -F';' '$3 == "perf::TASK-CLOCK" && $2 == "msec" {print $1}' "$tmp/x.txt")
read -r xcpu < <(awk -F';' '$3 == "cpu-time" && $2 == "s" {print $1 * 1000}' "$tmp/x.txt")
check "-x: task-clock ${ms:-missing} msec, the CPU time ${xcpu:-missing} ms of a 0.1 s burn" \
  agrees "$("$PYTHON" -c "print(${ms:-0} / 1000)")" "$("$PYTHON" -c "print(${xcpu:-1000} / 1000)")"
check "-x: wall time in seconds, with its deviation" grep -Eq '^[0-9.e-]+;s;wall-time;[0-9.]+;$' "$tmp/x.txt"

# --- An unprivileged user under perf_event_paranoid >= 2 may not count kernel
# mode: wattprof run still works, counting user mode and saying so.
# Root runs it as uid 65534, from copies of wattprof and burn in $tmp/bin: the
# build tree may lie where that uid cannot go (a clone under /root).
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
as_user=() wp=$WATTPROF burn=$BURN why=
if [ "$(id -u)" = 0 ] && ! command -v setpriv >/dev/null; then
  why="root without setpriv (util-linux) cannot become another user"
elif [ "$(id -u)" = 0 ]; then
  chmod 1777 "$tmp" # the user writes its report here
  if why=$(copy_for_uid 65534 "$tmp/bin" "$WATTPROF" "$BURN"); then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    wp=$tmp/bin/wattprof burn=$tmp/bin/burn
  fi
fi
if [ "$paranoid" -lt 2 ]; then
  skip_note "unprivileged run: perf_event_paranoid is $paranoid, kernel mode is allowed here"
elif [ -n "$why" ]; then
  skip_note "unprivileged run: $why"
else
  "${as_user[@]}" "$wp" run --json --output "$tmp/user.json" -- "$burn" 0.2
  check "unprivileged wattprof run works (paranoid $paranoid)" test $? = 0
  read -r user_only tc cpu < <(json_get "$tmp/user.json" 'd["user_mode_only"]' \
    'next(e["count"] for e in d["events"] if e["name"] == "perf::TASK-CLOCK") / 1e9' 'd["cpu_s"]')
  check "it says it counted user mode only" test "$user_only" = True
  # Against the kernel's own CPU time of the run (start-up included, which
  # under ASan is a noticeable part of a 0.2 s burn).
  check "and still counted the burn: task-clock $tc s, rusage $cpu s" within "$tc" "$cpu" 0.05
fi

# --- Bad inputs: one line on stderr, non-zero exit.
expect_fail "missing command" 127 "cannot run 'no-such-command-xyz': No such file or directory" \
  "$WATTPROF" run -- no-such-command-xyz

printf '{"format": "wattprof-model/1",\n "name": "x",, }\n' >"$tmp/bad.json"
expect_fail "malformed model" 1 "$tmp/bad.json:2:" "$WATTPROF" run --model "$tmp/bad.json" -- true

expect_fail "unreadable model" 1 "$tmp/none.json: cannot read model: No such file or directory" \
  "$WATTPROF" run --model "$tmp/none.json" -- true

sed 's/"perf::PAGE-FAULTS"/"no-such-event"/' "$SRCDIR/models/cputime.json" >"$tmp/unknown.json"
expect_fail "unknown event" 1 "event 'no-such-event': event not found" \
  "$WATTPROF" run --model "$tmp/unknown.json" -- true

sed 's/"perf::PAGE-FAULTS"/"cycles"/' "$SRCDIR/models/cputime.json" >"$tmp/hw.json"
if "$WATTPROF" run --model "$tmp/hw.json" -- true 2>/dev/null; then
  skip_note "this machine has a hardware PMU: the uncountable-event case needs a VM without one"
else
  expect_fail "uncountable event" 1 "cannot count its events: event 'cycles': No such file or directory" \
    "$WATTPROF" run --model "$tmp/hw.json" -- true
fi

expect_fail "bad interval" 2 "--interval '0': expected milliseconds between 1 and 60000" \
  "$WATTPROF" run --interval 0 -- true
expect_fail "no command" 2 "run: no command given" "$WATTPROF" run
expect_fail "empty --socket" 2 "--socket '': expected a path" "$WATTPROF" run --socket '' -- true
expect_fail "empty --db" 2 "--db '': expected a path" "$WATTPROF" run --db '' -- true
expect_fail "unreadable meter cgroup" 1 \
  "--meter-cgroup $tmp/nocg: cannot read its CPU time (cpu.stat or cpuacct.usage): No such file" \
  "$WATTPROF" run --meter-cgroup "$tmp/nocg" -- true
expect_fail "-r 0" 2 "-r '0': expected a number of runs between 1 and 100000" "$WATTPROF" run -r 0 -- true
expect_fail "-x with --json" 2 "-x and --json contradict each other" "$WATTPROF" run -x , --json -- true
expect_fail "unknown option" 2 "unknown option or missing value '--frobnicate'" \
  "$WATTPROF" run --frobnicate -- true

finish

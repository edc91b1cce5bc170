#!/usr/bin/env bash
# wattprofd's config parser on durations that do not fit and on bad or costly
# [track] comm regexes: each stops the daemon with one line naming FILE:LINE
# and exit 1 (found by tests/fuzz/fuzz_config: 1e100h overflowed the
# conversion to seconds, nan and inf were accepted, and a regex took glibc's
# regcomp past 2 GiB).  The largest allowed duration still loads;
# --record plus --replay then stops the daemon right after the config is read,
# so the test never starts sampling.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wattprofd=$BUILDDIR/daemon/wattprofd

run_with() { # $1 = key of [storage], $2 = its value
  printf '[storage]\n%s = %s\n' "$1" "$2" >"$tmp/c.conf"
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}

for v in 1e100h 1e300d 36700d nan inf -inf 1e309; do
  expect_fail "minute_retention = $v" 1 "c.conf:2: bad value '$v' for 'minute_retention'" \
    run_with minute_retention "$v"
done
expect_fail "second_retention = nanm" 1 "c.conf:2: bad value 'nanm' for 'second_retention'" \
  run_with second_retention nanm
for v in 36600d 90d 1d; do
  expect_fail "minute_retention = $v loads" 1 "--record and --replay cannot be combined" \
    run_with minute_retention "$v"
done
expect_fail "second_retention = 1.5h loads" 1 "--record and --replay cannot be combined" \
  run_with second_retention 1.5h

# [sampler] priority: a SCHED_FIFO priority, 0 (off) to 99.
run_sampler() {
  printf '[sampler]\n%s = %s\n' "$1" "$2" >"$tmp/c.conf"
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}
for v in 100 -1 x 1.5 ""; do
  expect_fail "[sampler] priority = '$v'" 1 "c.conf:2: bad value '$v' for 'priority' in [sampler]" \
    run_sampler priority "$v"
done
expect_fail "[sampler] nice = 1" 1 "c.conf:2: unknown key 'nice' in section [sampler]" \
  run_sampler nice 1
for v in 0 1 99; do
  expect_fail "[sampler] priority = $v loads" 1 "--record and --replay cannot be combined" \
    run_sampler priority "$v"
done

# [sampler] backend and --backend: auto, bpf or perf.
for v in x BPF "" "perf bpf"; do
  expect_fail "[sampler] backend = '$v'" 1 \
    "c.conf:2: bad value for 'backend' in [sampler]: '$v': expected auto, bpf or perf" \
    run_sampler backend "$v"
  expect_fail "--backend '$v'" 1 "--backend '$v': expected auto, bpf or perf" \
    "$wattprofd" --backend "$v" --state-dir "$tmp/state" --socket "$tmp/s.sock"
done
for v in auto bpf perf; do
  expect_fail "[sampler] backend = $v loads" 1 "--record and --replay cannot be combined" \
    run_sampler backend "$v"
done

# [sampler] meter_cgroup: a cgroup folder whose CPU time can be read; one
# that cannot stops the daemon before it samples, naming the key and path.
printf '[sampler]\nmeter_cgroup = %s\n' "$tmp/no-such-cgroup" >"$tmp/c.conf"
expect_fail "[sampler] meter_cgroup = a missing folder" 1 \
  "[sampler] meter_cgroup: $tmp/no-such-cgroup: cannot read its CPU time (cpu.stat or cpuacct.usage): No such file or directory" \
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock"
mkdir "$tmp/cg" && echo garbage >"$tmp/cg/cpuacct.usage"
printf '[sampler]\nmeter_cgroup = %s\n' "$tmp/cg" >"$tmp/c.conf"
expect_fail "[sampler] meter_cgroup = a folder whose cpuacct.usage is no number" 1 \
  "[sampler] meter_cgroup: $tmp/cg: cannot read its CPU time (cpu.stat or cpuacct.usage): Bad message" \
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock"

# [track] comm: a regex, compiled with bounded cost (tests/fuzz/fuzz_config
# found '^(b+++...+)', which took glibc's regcomp past 2 GiB).
run_track() {
  printf '[track]\ncomm = %s\n' "$1" >"$tmp/c.conf"
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}
expect_fail "[track] comm = '^(b++++)'" 1 \
  "c.conf:2: bad value for 'comm' in [track]: regex '^(b++++)': quantifier does not follow a repeatable item at offset 5" \
  run_track '^(b++++)'
expect_fail "[track] comm = '(((a{1000}){1000}){1000})'" 1 \
  "c.conf:2: bad value for 'comm' in [track]: regex '(((a{1000}){1000}){1000})': regular expression is too large" \
  run_track '(((a{1000}){1000}){1000})'
expect_fail "[track] comm = '(' " 1 \
  "c.conf:2: bad value for 'comm' in [track]: regex '(': missing closing parenthesis at offset 1" \
  run_track '('
expect_fail "[track] comm = '^(mpirun|lmp_[a-z]+)\$' loads" 1 "--record and --replay cannot be combined" \
  run_track '^(mpirun|lmp_[a-z]+)$'

# rate_hz and --rate: 1 to 1000 ticks per second.  Below 0.5 the ticks per
# second rounded to 0 and the first tick died of SIGFPE (a ring's modulo).
run_rate_conf() {
  printf '[daemon]\nrate_hz = %s\n' "$1" >"$tmp/c.conf"
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}
run_rate_flag() {
  "$wattprofd" --rate "$1" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}
for v in 0.4 0.49 0.5 0.999 0 -1 1000.001 1e308 nan inf x ""; do
  expect_fail "rate_hz = '$v'" 1 "c.conf:2: bad value for 'rate_hz' in [daemon]: '$v': ticks per second from 1 to 1000" \
    run_rate_conf "$v"
  expect_fail "--rate '$v'" 1 "--rate '$v': expected ticks per second from 1 to 1000" \
    run_rate_flag "$v"
done
# The client limits: a whole number of connections, a timeout from 1 s to a day.
run_daemon_key() { # $1 = key of [daemon], $2 = its value
  printf '[daemon]\n%s = %s\n' "$1" "$2" >"$tmp/c.conf"
  "$wattprofd" --config "$tmp/c.conf" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}
for v in 0 0.5 2d 1e9 x ""; do
  expect_fail "client_timeout = '$v'" 1 "c.conf:2: bad value for 'client_timeout' in [daemon]: '$v': from 1s to 1d" \
    run_daemon_key client_timeout "$v"
done
for v in 0 -1 1.5 100001; do
  expect_fail "max_clients_per_user = '$v'" 1 "c.conf:2: bad value '$v' for 'max_clients_per_user' in [daemon]" \
    run_daemon_key max_clients_per_user "$v"
done
for v in 0 0.5ms 61m 1h1s -1s nan inf 10x ""; do
  expect_fail "query_time_limit = '$v'" 1 "c.conf:2: bad value for 'query_time_limit' in [daemon]: '$v': from 1ms to 1h (ms, s or m)" \
    run_daemon_key query_time_limit "$v"
done
for kv in "client_timeout 1s" "client_timeout 1d" "client_timeout 2m" "max_clients_per_user 1" \
  "query_time_limit 1ms" "query_time_limit 2.5" "query_time_limit 60m"; do
  expect_fail "$kv loads" 1 "--record and --replay cannot be combined" run_daemon_key $kv
done
for v in 1 1000 50; do
  expect_fail "rate_hz = $v loads" 1 "--record and --replay cannot be combined" run_rate_conf "$v"
  expect_fail "--rate $v loads" 1 "--record and --replay cannot be combined" run_rate_flag "$v"
done

# Config files that passed and should not have: a folder read as an empty
# config, a group that does not exist, a key set twice (or continued on an
# indented line), a line too long for the parser (it counted the rest as
# more lines, so errors named the wrong one), retentions that disagree.
run_file() { # $1 = config file
  "$wattprofd" --config "$1" --state-dir "$tmp/state" --socket "$tmp/s.sock" \
    --record "$tmp/rec" --replay "$tmp/rep"
}
mkdir -p "$tmp/folder"
expect_fail "--config FOLDER" 1 "$tmp/folder: cannot read config: not a regular file" run_file "$tmp/folder"
printf '[daemon]\ngroup = no-such-group-x\n' >"$tmp/c.conf"
expect_fail "group = no-such-group-x" 1 "c.conf:2: bad value for 'group' in [daemon]: no group 'no-such-group-x' on this system" \
  run_file "$tmp/c.conf"
printf '[daemon]\ngroup = root\n' >"$tmp/c.conf"
expect_fail "group = root loads" 1 "--record and --replay cannot be combined" run_file "$tmp/c.conf"
printf '[daemon]\nrate_hz = 10\n\n[track]\ncomm = x\n[daemon]\nrate_hz = 20\n' >"$tmp/c.conf"
expect_fail "rate_hz set twice" 1 "c.conf:7: 'rate_hz' in [daemon] is set again (first on line 2)" run_file "$tmp/c.conf"
printf '[daemon]\nrate_hz = 10\n  20\n' >"$tmp/c.conf"
expect_fail "rate_hz continued on an indented line" 1 "c.conf:3: 'rate_hz' in [daemon] is set again (first on line 2)" \
  run_file "$tmp/c.conf"
{ printf '[track]\n# a comment\ncomm = '; head -c 300 /dev/zero | tr '\0' a; printf '\nbogus = 1\n'; } >"$tmp/c.conf"
expect_fail "a 307-character line" 1 "c.conf:3: line longer than 198 characters" run_file "$tmp/c.conf"
{ printf '[track]\ncomm = '; head -c 190 /dev/zero | tr '\0' a; printf '\nbogus = 1\n'; } >"$tmp/c.conf"
expect_fail "a 197-character line is read, the next line named right" 1 "c.conf:3: unknown key 'bogus' in section [track]" \
  run_file "$tmp/c.conf"
printf '[storage]\nminute_retention = 1h\n\nsecond_retention = 2h\n' >"$tmp/c.conf"
expect_fail "minute_retention shorter than second_retention" 1 \
  "c.conf:4: minute_retention (3600s) is shorter than second_retention (7200s)" run_file "$tmp/c.conf"
printf '[storage]\nsecond_retention = 30s\n' >"$tmp/c.conf"
expect_fail "second_retention under a minute" 1 "c.conf:2: second_retention (30s) is under 60s" run_file "$tmp/c.conf"
finish

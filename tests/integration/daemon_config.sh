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
for v in 36600d 90d 1.5h; do
  expect_fail "minute_retention = $v loads" 1 "--record and --replay cannot be combined" \
    run_with minute_retention "$v"
done

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
for kv in "client_timeout 1s" "client_timeout 1d" "client_timeout 2m" "max_clients_per_user 1"; do
  expect_fail "$kv loads" 1 "--record and --replay cannot be combined" run_daemon_key $kv
done
for v in 1 1000 50; do
  expect_fail "rate_hz = $v loads" 1 "--record and --replay cannot be combined" run_rate_conf "$v"
  expect_fail "--rate $v loads" 1 "--record and --replay cannot be combined" run_rate_flag "$v"
done
finish

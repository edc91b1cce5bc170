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
finish

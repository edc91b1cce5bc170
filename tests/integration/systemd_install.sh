#!/usr/bin/env bash
# `meson install --destdir`: every file lands where the units and
# systemd expect it. The units go to a folder systemd searches; the binaries
# and the config file they name are there; systemd-sysusers and
# systemd-tmpfiles, run on the installed tree, find the snippets and create
# the wattprof user and its folders; the man pages render without warnings;
# the installed daemon starts with the installed config file, also with every
# key in it uncommented, and stops at FILE:LINE on a misspelt key.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"

for t in systemd-analyze systemd-sysusers systemd-tmpfiles; do
  command -v $t >/dev/null || { echo "SKIP: $t not found (Debian package systemd)"; exit 77; }
done
work=$(mktemp -d /tmp/wattprof-install.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
root=$work/root

if ! meson install -C "$BUILDDIR" --destdir "$root" --no-rebuild --quiet >"$work/install.log" 2>&1; then
  echo "FAIL - meson install:"; sed 's/^/    /' "$work/install.log"; exit 1
fi
echo "ok - meson install --destdir"

# opt NAME: a build option, made absolute against the prefix.
meson introspect --buildoptions "$BUILDDIR" >"$work/options.json"
opt() {
  "$PYTHON" -c 'import json, os, sys
d = {o["name"]: o["value"] for o in json.load(open(sys.argv[1]))}
v = d[sys.argv[2]]
print(v if sys.argv[2] == "prefix" else os.path.join(d["prefix"], v))' "$work/options.json" "$1"
}
mandir=$(opt mandir) datadir=$(opt datadir)

# ---- Units, in a folder systemd searches ---------------------------------
svc=$(find "$root" -name wattprofd.service)
check "one wattprofd.service installed" test "$(wc -l <<<"$svc")" = 1 -a -n "$svc"
unitdir=${svc%/wattprofd.service}
unitdir=${unitdir#"$root"}
check "the unit folder $unitdir is on systemd's unit path" \
  grep -qx -- "$unitdir" <(systemd-analyze unit-paths)
for u in wattprofd.socket wattprof-train.service wattprof-train.timer wattprof-train.path; do
  check "$u installed beside it" test -f "$root$unitdir/$u"
done

# exec_of UNIT: the words of its ExecStart= (continuation lines joined)
exec_of() { sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$1" | sed -n 's/^ExecStart=//p'; }
read -r -a daemon_cmd <<<"$(exec_of "$root$unitdir/wattprofd.service")"
check "wattprofd.service runs ${daemon_cmd[0]}, which is installed" test -x "$root${daemon_cmd[0]}"
conf=${daemon_cmd[2]:-}
check "wattprofd.service reads --config $conf" test "${daemon_cmd[1]:-}" = --config
check "... which is installed, the commented default" cmp -s "$root$conf" "$SRCDIR/systemd/wattprofd.conf"
read -r -a train_cmd <<<"$(exec_of "$root$unitdir/wattprof-train.service")"
check "wattprof-train.service runs ${train_cmd[0]}, which is installed" test -x "$root${train_cmd[0]}"
check "... as 'wattprof train'" test "${train_cmd[1]:-}" = train

# ---- sysusers.d and tmpfiles.d, as systemd reads them ---------------------
mkdir -p "$root/etc"
systemd-sysusers --root="$root" >"$work/sysusers.log" 2>&1
check "systemd-sysusers finds the snippet and creates user wattprof" \
  grep -q '^wattprof:x:[0-9]*:[0-9]*:.*:/var/lib/wattprof:' "$root/etc/passwd"
check "... and group wattprof" grep -q '^wattprof:x:' "$root/etc/group"
uid=$(awk -F: '$1 == "wattprof" { print $3 }' "$root/etc/passwd")
gid=$(awk -F: '$1 == "wattprof" { print $3 }' "$root/etc/group")
systemd-tmpfiles --create --root="$root" >"$work/tmpfiles.log" 2>&1
check "systemd-tmpfiles runs clean on the installed tree" test ! -s "$work/tmpfiles.log"
for d in /var/lib/wattprof /var/lib/wattprof/models; do
  check "$d is created, mode 0750, owned by wattprof ($uid:$gid)" \
    test "$(stat -c '%a %u %g' "$root$d" 2>/dev/null)" = "750 $uid $gid"
done

# ---- Man pages and the default model ----------------------------------------
for m in man1/wattprof.1 man8/wattprofd.8 man5/wattprofd.conf.5; do
  check "$mandir/$m installed" test -f "$root$mandir/$m"
  if command -v groff >/dev/null; then
    check "$m renders without warnings" test -z "$(groff -man -ww -z "$root$mandir/$m" 2>&1)"
  fi
done
check "the default model is installed" \
  cmp -s "$root$datadir/wattprof/models/cputime.json" "$SRCDIR/models/cputime.json"

# ---- The installed daemon with the installed config --------------------------
# run_daemon NAME CONF [FLAGS]: starts it, waits until it answers GetInfo, stops
# it with SIGTERM; succeeds when it answered and exited 0.
run_daemon() {
  local name=$1 conf=$2 state=$work/$1 pid rc; shift 2
  mkdir -p "$state"
  "$root${daemon_cmd[0]}" --config "$conf" --state-dir "$state" --socket "$state/sock" "$@" \
    >"$state/log" 2>&1 &
  pid=$!
  pids+=("$pid")
  if ! "$PYTHON" - "$state/sock" "$pid" <<'PY'
import os, sys, time
sys.path.insert(0, os.path.join(os.environ["SRCDIR"], "tests"))
import varlink_peer
deadline = time.monotonic() + 15
while time.monotonic() < deadline:
    try:
        with varlink_peer.Connection(sys.argv[1]) as c:
            c.call("org.varlink.service.GetInfo")
        sys.exit(0)
    except OSError:
        if not os.path.exists(f"/proc/{sys.argv[2]}"):
            break
        time.sleep(0.05)
sys.exit(1)
PY
  then
    echo "    $name: wattprofd did not answer:"; sed 's/^/    /' "$state/log"
    return 1
  fi
  kill -TERM "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 0 ] || { echo "    $name: exit $rc"; sed 's/^/    /' "$state/log"; }
  return "$rc"
}
check "the installed daemon starts with the installed config and stops cleanly" \
  run_daemon default "$root$conf"

# Every key the daemon accepts is documented in the file ...
keys=$(grep -o 'strcmp(key, "[a-z_]*")' "$SRCDIR/daemon/config.c" | sed 's/.*"\(.*\)")/\1/' | sort -u)
missing=$(for k in $keys; do grep -qE "^#?$k = |\"$k\"" "$root$conf" || echo "$k"; done)
check "every key of daemon/config.c is in wattprofd.conf ($(echo $keys))" test -z "$missing"
[ -z "$missing" ] || echo "    missing: $missing"
# ... and each documented value is one the daemon accepts.
# (The exporter's example port may be taken by a parallel run: port 0.  The
# group wattprof comes with the package's sysusers.d file, absent here: a
# group that does not exist is refused, so root's stands in for it.)
sed -E -e 's/^#([a-z_]+ = )/\1/' -e 's/^(listen = 127\.0\.0\.1):[0-9]+$/\1:0/' \
  -e "s/^group = wattprof\$/group = $(getent group wattprof >/dev/null && echo wattprof || id -gn 0)/" \
  "$root$conf" >"$work/all-keys.conf"
check "the file with every key uncommented has $(grep -cE '^[a-z_]+ = ' "$work/all-keys.conf") keys" \
  test "$(grep -cE '^[a-z_]+ = ' "$work/all-keys.conf")" -ge 14
check "the installed daemon accepts every key uncommented" \
  run_daemon all-keys "$work/all-keys.conf" --model "$root$datadir/wattprof/models/cputime.json" --db "$work/all-keys/db"
sed 's/^#rate_hz = 50/rate_hs = 50/' "$root$conf" >"$work/typo.conf"
line=$(grep -n '^rate_hs' "$work/typo.conf" | cut -d: -f1)
expect_fail "a misspelt key stops the daemon at FILE:LINE" 1 "$work/typo.conf:$line: unknown key 'rate_hs'" \
  "$root${daemon_cmd[0]}" --config "$work/typo.conf" --state-dir "$work/typo"
finish

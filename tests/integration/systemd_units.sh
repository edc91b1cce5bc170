#!/usr/bin/env bash
# systemd units: `systemd-analyze verify` passes on every unit --
# test copies whose Exec paths point at the built binaries, with the man pages
# they name on MANPATH -- and prints nothing; a unit naming a missing binary
# fails it, and so does a misspelt directive. `systemd-analyze security
# --offline=true` scores wattprofd.service at 4.0 or lower (the score is in
# docs/install.md) with every protection the unit sets in force. The units, the
# daemon's defaults, the sysusers/tmpfiles snippets and the trainer's command
# agree on the paths.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"

command -v systemd-analyze >/dev/null ||
  { echo "SKIP: systemd-analyze not found (Debian package systemd)"; exit 77; }
for b in "$BUILDDIR/daemon/wattprofd" "$BUILDDIR/client/wattprof"; do
  [ -x "$b" ] || { echo "FAIL: $b not built"; exit 1; }
done

work=$(mktemp -d /tmp/wattprof-units.XXXXXX)
trap 'rm -rf "$work"' EXIT
units="$work/units"
mkdir -p "$units" "$work/man/man1" "$work/man/man8"
cp "$SRCDIR/man/wattprof.1" "$work/man/man1/"
cp "$SRCDIR/man/wattprofd.8" "$work/man/man8/"
export MANPATH=$work/man

# The configured units name the installed binaries; the copies name the built
# ones, and nothing else changes.
sed -E "s|^(Exec[A-Za-z]*=)[^ ]*/wattprofd( \|$)|\1$BUILDDIR/daemon/wattprofd\2|" \
  "$BUILDDIR/systemd/wattprofd.service" >"$units/wattprofd.service"
sed -E "s|^(ExecStart=)[^ ]*/wattprof( \|$)|\1$BUILDDIR/client/wattprof\2|" \
  "$BUILDDIR/systemd/wattprof-train.service" >"$units/wattprof-train.service"
cp "$SRCDIR/systemd/wattprofd.socket" "$SRCDIR/systemd/wattprof-train.timer" "$SRCDIR/systemd/wattprof-train.path" "$units/"
check "the test copy of wattprofd.service runs the built daemon" \
  grep -qx "ExecStart=$BUILDDIR/daemon/wattprofd --config .*/wattprof/wattprofd.conf" \
  "$units/wattprofd.service"
check "the test copy of wattprof-train.service runs the built client" \
  grep -q "^ExecStart=$BUILDDIR/client/wattprof train " "$units/wattprof-train.service"

# verify_ok UNIT...: exit status 0 and no output at all (systemd only warns
# about a misspelt directive). verify_fails DESC TEXT UNIT...: a message
# containing TEXT.
verify_ok() {
  local out rc
  out=$(cd "$units" && systemd-analyze verify "$@" 2>&1)
  rc=$?
  if [ "$rc" = 0 ] && [ -z "$out" ]; then
    echo "ok - systemd-analyze verify $*: clean"
  else
    echo "FAIL - systemd-analyze verify $*: exit $rc:"; echo "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}
verify_fails() {
  local desc=$1 text=$2 out rc; shift 2
  out=$(cd "$units" && systemd-analyze verify "$@" 2>&1)
  rc=$?
  if grep -qF -- "$text" <<<"$out"; then
    echo "ok - $desc (exit $rc): $(grep -F -- "$text" <<<"$out" | head -1)"
  else
    echo "FAIL - $desc: exit $rc, want a message with '$text':"; echo "$out" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

verify_ok ./wattprofd.service ./wattprofd.socket ./wattprof-train.service ./wattprof-train.timer ./wattprof-train.path

# The same check must be able to fail: a unit naming a binary that is not there.
sed "s|^ExecStart=[^ ]*|ExecStart=$work/missing/wattprofd|" "$units/wattprofd.service" \
  >"$units/missing.service"
sed -i 's/^Also=.*//' "$units/missing.service"
verify_fails "verify fails on a unit whose binary is missing" \
  "$work/missing/wattprofd" ./missing.service
check "... with a non-zero exit status" \
  bash -c '! (cd "$1" && systemd-analyze verify ./missing.service >/dev/null 2>&1)' - "$units"
# ... and a misspelt directive, which systemd ignores with a warning.
sed 's/^ProtectSystem=strict/ProtectSytem=strict/; s/^Also=.*//' "$units/wattprofd.service" \
  >"$units/typo.service"
verify_fails "verify reports a misspelt directive" "Unknown key 'ProtectSytem'" ./typo.service
# The timer and the socket need the service they start.
mkdir -p "$work/alone" && cp "$units/wattprofd.socket" "$work/alone/"
units=$work/alone verify_fails "verify fails on the socket without its service" \
  "service wattprofd.service not loaded" ./wattprofd.socket
rm -f "$units/missing.service" "$units/typo.service"

# ---- systemd-analyze security ----------------------------------------------
score() {
  (cd "$units" && systemd-analyze security --offline=true "./$1" 2>&1) |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}
s=$(score wattprofd.service)
check "wattprofd.service has an exposure score" test -n "$s"
check "wattprofd.service exposure $s <= 2.0" awk -v s="$s" 'BEGIN { exit !(s <= 2.0) }'
t=$(score wattprof-train.service)
check "wattprof-train.service exposure $t <= 2.0" awk -v s="$t" 'BEGIN { exit !(s != "" && s <= 2.0) }'
echo "# exposure: wattprofd.service $s, wattprof-train.service $t"

# Every protection the unit sets, as systemd itself reads the unit.
(cd "$units" && systemd-analyze security --offline=true --json=short ./wattprofd.service) \
  >"$work/security.json" 2>&1
# bpf(2) is the one system call of @privileged the unit allows (the bpf
# counter backend): without that line, @privileged is filtered whole.
grep -v '^SystemCallFilter=bpf$' "$units/wattprofd.service" | sed 's/^Also=.*//' \
  >"$units/nobpf.service"
(cd "$units" && systemd-analyze security --offline=true --json=short ./nobpf.service) \
  >"$work/security-nobpf.json" 2>&1
rm -f "$units/nobpf.service"
"$PYTHON" - "$work/security.json" "$work/security-nobpf.json" <<'PY' || failures=$((failures + 1))
import json, sys
checks = {c["json_field"]: c for c in json.load(open(sys.argv[1]))}
nobpf = {c["json_field"]: c for c in json.load(open(sys.argv[2]))}
priv = checks.get("SystemCallFilter_privileged", {}).get("description", "")
ok = nobpf.get("SystemCallFilter_privileged", {}).get("set") and "e.g. bpf is" in priv
print(("ok - " if ok else "FAIL - ") + "of @privileged only bpf is allowed: " + priv)
if not ok:
    sys.exit(1)
want = ["ProtectSystem", "ProtectHome", "PrivateTmp", "NoNewPrivileges", "ProtectKernelTunables",
        "ProtectKernelModules", "ProtectControlGroups", "RestrictAddressFamilies_AF_INET_INET6",
        "RestrictAddressFamilies_AF_PACKET", "RestrictAddressFamilies_OTHER", "UserOrDynamicUser",
        "SystemCallFilter_mount", "SystemCallFilter_module",
        "CapabilityBoundingSet_CAP_SYS_ADMIN", "CapabilityBoundingSet_CAP_SYS_PTRACE",
        "CapabilityBoundingSet_CAP_SET_UID_GID_PCAP", "CapabilityBoundingSet_CAP_KILL",
        "CapabilityBoundingSet_CAP_SYS_RAWIO", "MemoryDenyWriteExecute", "RestrictNamespaces_user"]
bad = [f"{w}: {checks[w]['description'] if w in checks else 'not assessed'}"
       for w in want if w not in checks or not checks[w]["set"]]
print(("FAIL - " if bad else "ok - ") + "wattprofd.service: " +
      ("; ".join(bad) if bad else f"all {len(want)} named protections in force"))
sys.exit(1 if bad else 0)
PY

# ---- The pieces agree on paths ------------------------------------------------
svc=$SRCDIR/systemd/wattprofd.service.in
sock=$(sed -n 's/^ListenStream=//p' "$SRCDIR/systemd/wattprofd.socket")
check "the socket unit listens where the daemon's default socket is ($sock)" \
  grep -qF "\"$sock\"" "$SRCDIR/daemon/config.c"
check "the socket lives in the service's RuntimeDirectory" \
  test "$(dirname "$sock")" = "/run/$(sed -n 's/^RuntimeDirectory=//p' "$svc")"
check "the daemon's default state dir is the service's StateDirectory" \
  grep -qF "\"/var/lib/$(sed -n 's/^StateDirectory=//p' "$svc")\"" "$SRCDIR/daemon/config.c"
check "the service runs as the user sysusers.d creates" \
  grep -qE "^u $(sed -n 's/^User=//p' "$svc") " "$SRCDIR/systemd/wattprof.sysusers"
check "ambient capabilities = bounding set" test \
  "$(sed -n 's/^AmbientCapabilities=//p' "$svc")" = "$(sed -n 's/^CapabilityBoundingSet=//p' "$svc")"
train=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$SRCDIR/systemd/wattprof-train.service.in" |
  sed -n 's/^ExecStart=//p')
check "the trainer reads the daemon's database" grep -q -- "--db /var/lib/wattprof/wattprof.db" <<<"$train"
check "the trainer installs into the folder the daemon loads current.json from" \
  grep -q -- "--install-if-better /var/lib/wattprof/models\b" <<<"$train"
check "tmpfiles.d creates that folder for the wattprof user" \
  grep -qE '^d /var/lib/wattprof/models [0-7]+ wattprof wattprof' "$SRCDIR/systemd/wattprof.tmpfiles"
check "the daemon looks for models/current.json" grep -qF '"%s/models/current.json"' \
  "$SRCDIR/daemon/config.c"
finish

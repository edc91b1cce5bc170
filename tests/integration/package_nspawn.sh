#!/usr/bin/env bash
# The Debian package under a real systemd (docs/install.md, "The Debian
# package"): builds it with dpkg-buildpackage, installs it into a Debian 12
# tree made by debootstrap (with systemd, systemd-sysv and dbus), boots the
# tree with systemd-nspawn -b, and checks from inside
# (tests/helpers/package-check.sh, run by a oneshot unit that then powers
# the container off): Type=notify, the socket for root and another user,
# socket activation, reload, the watchdog restarting a stopped daemon, the
# retraining timer and service on a node without RAPL, and
# systemd-analyze security <= 2.0. Then, in the tree: a modified conffile
# survives an upgrade to a higher version, and purge removes the state
# folder and the configuration.
#
# The tree is kept in WATTPROF_NSPAWN_CACHE (default
# /var/cache/wattprof-tests/bookworm-systemd.tar.zst) so that later runs
# skip debootstrap. Skips (77), saying why, without root, debootstrap,
# systemd-nspawn or dpkg-buildpackage, or when the mirror cannot be reached
# for a first tree.
set -uo pipefail
. "$SRCDIR/tests/helpers/lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (debootstrap, systemd-nspawn)"; exit 77; }
for tool in debootstrap systemd-nspawn dpkg-buildpackage zstd; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps --package)"; exit 77; }
done
mirror=${WATTPROF_MIRROR:-http://deb.debian.org/debian}
cache=${WATTPROF_NSPAWN_CACHE:-/var/cache/wattprof-tests/bookworm-systemd.tar.zst}
work=$(mktemp -d /var/tmp/wattprof-nspawn.XXXXXX)
trap 'rm -rf "$work"' EXIT
tree=$work/tree

# ---- the package --------------------------------------------------------------
mkdir -p "$work/src"
# The source tree without its build folders and history (no git needed).
tar -C "$SRCDIR" --exclude='./build*' --exclude=./.git --exclude='./obj-*' --exclude=./debian/.debhelper \
  -cf - . | tar -xf - -C "$work/src"
if ! (cd "$work/src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b \
  >"$work/build.log" 2>&1); then
  echo "FAIL - dpkg-buildpackage -us -uc -b:"; tail -30 "$work/build.log"; exit 1
fi
deb=$(ls "$work"/wattprof_*_amd64.deb "$work"/wattprof_*_"$(dpkg --print-architecture)".deb 2>/dev/null | head -1)
check "dpkg-buildpackage built $(basename "$deb")" test -s "$deb"
if command -v lintian >/dev/null; then
  lint=$(lintian --fail-on error,warning "$work"/wattprof_*.changes 2>&1 | grep -v '^running with root')
  check "lintian: no errors or warnings${lint:+: $lint}" test -z "$lint"
else
  skip_note "lintian is not installed"
fi

# ---- the tree -----------------------------------------------------------------
mkdir -p "$tree"
if [ -s "$cache" ]; then
  tar --zstd -xf "$cache" -C "$tree"
else
  if ! debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$tree" "$mirror" \
    >"$work/debootstrap.log" 2>&1; then
    echo "SKIP: debootstrap from $mirror failed (no network?): $(tail -1 "$work/debootstrap.log")"
    exit 77
  fi
  mkdir -p "$(dirname "$cache")" && tar --zstd -cf "$cache" -C "$tree" . || rm -f "$cache"
fi
cp "$deb" "$tree/root/wattprof.deb"
cp /etc/resolv.conf "$tree/etc/resolv.conf" 2>/dev/null
tree_apt() { # apt inside the tree (not booted: services are enabled, not started)
  chroot "$tree" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$work/apt.log" 2>&1
}
tree_apt update -q && tree_apt install -y -q --no-install-recommends /root/wattprof.deb
check "the package installs into a Debian 12 tree" chroot "$tree" dpkg -s wattprof
check "the service and socket are enabled, the train path is not" chroot "$tree" sh -c \
  'systemctl is-enabled wattprofd.service && systemctl is-enabled wattprofd.socket &&
   systemctl is-enabled wattprof-train.timer && ! systemctl is-enabled wattprof-train.path'
check "the wattprof user exists" chroot "$tree" getent passwd wattprof

# ---- boot it ------------------------------------------------------------------
cp "$SRCDIR/tests/helpers/package-check.sh" "$tree/root/package-check.sh"
cat >"$tree/etc/systemd/system/wattprof-check.service" <<'EOF'
[Unit]
Description=wattprof package checks
After=wattprofd.service multi-user.target
# However the checks end, the container ends: a hung check is a failure
# (no "done" line), never a hung test.
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
TimeoutStartSec=200
ExecStart=/bin/sh /root/package-check.sh
[Install]
WantedBy=multi-user.target
EOF
chroot "$tree" systemctl enable wattprof-check.service >/dev/null 2>&1
# The daemon's unit asks for CAP_PERFMON (counters) and CAP_NET_ADMIN (the
# proc connector), and perf_event_open, which nspawn's own seccomp filter
# refuses, that a container lacks unless given; a private network
# keeps the latter off the host's interfaces.
timeout 280 systemd-nspawn -q -b --register=no --keep-unit --private-network \
  --capability=CAP_PERFMON,CAP_NET_ADMIN --system-call-filter=perf_event_open -D "$tree" >"$work/boot.log" 2>&1
rc=$?
check "the container booted, ran the checks and powered off (exit $rc)" test "$rc" = 0
if [ -f "$tree/root/results" ]; then
  grep -v "^done$" "$tree/root/results"
  failures=$((failures + $(grep -c '^FAIL' "$tree/root/results")))
  check "every check inside ran" grep -qx done "$tree/root/results"
  if grep -q '^FAIL' "$tree/root/results" && [ -s "$tree/root/journal" ]; then
    echo "the daemon's journal in the container:"; tail -25 "$tree/root/journal" | sed 's/^/    /'
  fi
else
  echo "FAIL - no results from inside the container:"; tail -20 "$work/boot.log"
  failures=$((failures + 1))
fi

# ---- upgrade and purge --------------------------------------------------------
echo "# changed by the operator" >>"$tree/etc/wattprof/wattprofd.conf"
mkdir -p "$work/up" && dpkg-deb -R "$deb" "$work/up"
sed -i 's/^Version: .*/&+up1/' "$work/up/DEBIAN/control"
dpkg-deb -b "$work/up" "$tree/root/wattprof-up.deb" >/dev/null
tree_apt install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
  /root/wattprof-up.deb
check "an upgrade to $(chroot "$tree" dpkg-query -W -f='${Version}' wattprof) keeps the operator's configuration" \
  grep -q "changed by the operator" "$tree/etc/wattprof/wattprofd.conf"
chroot "$tree" env DEBIAN_FRONTEND=noninteractive dpkg --purge wattprof >>"$work/apt.log" 2>&1
check "purge removes the package, /var/lib/wattprof and /etc/wattprof" sh -c \
  "! chroot '$tree' dpkg -s wattprof >/dev/null 2>&1 && [ ! -e '$tree/var/lib/wattprof' ] && [ ! -e '$tree/etc/wattprof' ]"
finish

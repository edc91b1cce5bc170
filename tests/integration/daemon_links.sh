#!/usr/bin/env bash
# The daemon links no trainer code: wattprofd's link line (build.ninja)
# names lib/model's and lib/expr's libraries and not lib/learn's
# (libwplearn.a), whichever dependency would bring it in; and no global
# symbol that libwplearn.a defines is defined in the built wattprofd (nm),
# so its objects cannot come in another way either.
set -u
. "$SRCDIR/tests/helpers/lib.sh"
command -v nm >/dev/null || { echo "SKIP: nm not found (Debian package binutils)"; exit 77; }
daemon=$BUILDDIR/daemon/wattprofd
learn=$BUILDDIR/lib/learn/libwplearn.a
expr_lib=$BUILDDIR/lib/expr/libwpexpr.a
for f in "$daemon" "$learn" "$expr_lib"; do
  [ -f "$f" ] || { echo "FAIL: $f not built"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Global symbols defined (code and data), one name a line, sorted.
defined() { nm --defined-only -g "$1" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDRB]/ { print $3 }' | sort -u; }
defined "$learn" >"$tmp/learn"
defined "$daemon" >"$tmp/daemon"
defined "$expr_lib" >"$tmp/expr"

check "libwplearn.a defines the trainers (symreg_run)" \
  grep -qx -e symreg_run "$tmp/learn"
check "libwplearn.a defines expr_fit_consts" grep -qx expr_fit_consts "$tmp/learn"
check "wattprofd defines symbols (nm reads it)" grep -qx main "$tmp/daemon"
comm -12 "$tmp/learn" "$tmp/daemon" >"$tmp/both"
check "wattprofd defines none of libwplearn.a's symbols" test ! -s "$tmp/both"
[ -s "$tmp/both" ] && { echo "# in both:"; head -20 "$tmp/both" | sed 's/^/#   /'; }
comm -12 "$tmp/learn" "$tmp/expr" >"$tmp/shared"
check "libwplearn.a and libwpexpr.a define no symbol twice" test ! -s "$tmp/shared"

# ---- the link line ------------------------------------------------------------
ninja_file=$BUILDDIR/build.ninja
if [ -f "$ninja_file" ]; then
  grep -E '^build daemon/wattprofd: ' "$ninja_file" | tr ' ' '\n' | grep -E '\.a$' >"$tmp/link"
  check "wattprofd's link line names libwpmodel.a" grep -q 'lib/model/libwpmodel\.a$' "$tmp/link"
  check "wattprofd's link line names libwpexpr.a" grep -q 'lib/expr/libwpexpr\.a$' "$tmp/link"
  check "wattprofd's link line has no libwplearn.a" bash -c '! grep -q libwplearn "$1"' _ "$tmp/link"
else
  skip_note "no build.ninja in $BUILDDIR: the link line is not checked"
fi
finish

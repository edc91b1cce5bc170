# Shared by the integration scripts: checks that count and explain themselves.
# check DESC CMD...         passes when CMD succeeds
# within A B REL            succeeds when |A-B| <= REL*|B|
# expect_fail DESC STATUS TEXT CMD...
#                           CMD must exit STATUS and print exactly one line on
#                           stderr containing TEXT
# json_get FILE EXPR...     evaluates Python expressions over d = the JSON file
# skip_note WHY             records a case that cannot run here, and why
# copy_for_uid UID DIR FILE...
#                           copies each FILE (a built program or data) into DIR,
#                           made here and opened to all (755); DIR must lie in
#                           the caller's temporary folder, which its trap
#                           removes.  For running as another uid: a clone under
#                           /root (mode 700) is out of that uid's reach.  Fails
#                           with the reason on stdout when UID still cannot
#                           read or run a copy (a parent it cannot enter, a
#                           noexec mount)
# finish                    exits 1 if anything failed, else 0
failures=0

check() {
  local desc=$1; shift
  if "$@"; then echo "ok - $desc"; else echo "FAIL - $desc"; failures=$((failures + 1)); fi
}

within() {
  "$PYTHON" -c 'import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= r * abs(b) else 1)' "$@"
}

expect_fail() {
  local desc=$1 status=$2 text=$3; shift 3
  local err got lines
  err=$(mktemp)
  "$@" >/dev/null 2>"$err"
  got=$?
  lines=$(wc -l <"$err")
  if [ "$got" = "$status" ] && [ "$lines" = 1 ] && grep -qF -- "$text" "$err"; then
    echo "ok - $desc: $(cat "$err")"
  else
    echo "FAIL - $desc: exit $got (want $status), $lines stderr lines (want 1), want '$text':"
    sed 's/^/    /' "$err"
    failures=$((failures + 1))
  fi
  rm -f "$err"
}

json_get() {
  local file=$1; shift
  "$PYTHON" - "$file" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(str(eval(e)) for e in sys.argv[2:]))
PY
}

skip_note() { echo "skip - $1"; }

copy_for_uid() {
  local uid=$1 dir=$2 f copy; shift 2
  mkdir -p "$dir" && chmod 755 "$dir" || { echo "cannot make $dir"; return 1; }
  for f in "$@"; do
    copy=$dir/$(basename "$f")
    cp "$f" "$copy" && chmod go+r "$copy" || { echo "cannot copy $f to $dir"; return 1; }
    # test(1) runs as UID: access(2) checks the real uid, every parent and noexec.
    if ! setpriv --reuid="$uid" --regid="$uid" --clear-groups test -r "$copy" ||
      { [ -x "$f" ] && ! setpriv --reuid="$uid" --regid="$uid" --clear-groups test -x "$copy"; }; then
      echo "uid $uid cannot reach $copy (see the modes of its parents, and noexec mounts)"
      return 1
    fi
  done
}

finish() {
  if [ "$failures" -gt 0 ]; then echo "$failures check(s) failed"; exit 1; fi
  exit 0
}

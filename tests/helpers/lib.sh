# Shared by the integration scripts: checks that count and explain themselves.
# check DESC CMD...         passes when CMD succeeds
# within A B REL            succeeds when |A-B| <= REL*|B|
# expect_fail DESC STATUS TEXT CMD...
#                           CMD must exit STATUS and print exactly one line on
#                           stderr containing TEXT
# json_get FILE EXPR...     evaluates Python expressions over d = the JSON file
# skip_note WHY             records a case that cannot run here, and why
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

finish() {
  if [ "$failures" -gt 0 ]; then echo "$failures check(s) failed"; exit 1; fi
  exit 0
}

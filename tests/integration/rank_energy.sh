#!/usr/bin/env bash
# wattprof rank --metric energy: each measurement is the "energy_j" of a real
# `wattprof run --json` (RAPL share where present, the model otherwise), so
# a loop ten times longer must rank behind a short one, and rank's median
# must match what `wattprof run` reports for the same command directly.
set -euo pipefail

: "${WATTPROF:?}" "${PYTHON:=/usr/bin/python3}"
commands=$("$WATTPROF" --help 2>&1 || true)
if ! grep -q "^  run " <<<"$commands"; then
    echo "this build has no 'wattprof run' yet, which --metric energy measures with"
    exit 77
fi
T=$(mktemp -d /tmp/wattprof-rank-energy.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
short='i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'
long='i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'

"$WATTPROF" rank --measure --metric energy --warmup 0 --reps 4 --max 8 --json \
    --names short,long -- "$short" ::: "$long" >"$T/rank.json"
"$WATTPROF" run --json --output "$T/run.json" -- /bin/sh -c "$long" >/dev/null
"$PYTHON" - "$T/rank.json" "$T/run.json" <<'PY' || fail "$(cat "$T/rank.json")"
import json, sys
r = json.load(open(sys.argv[1]))
run = json.load(open(sys.argv[2]))
v = {x["name"]: x for x in r["variants"]}
assert [x["name"] for x in r["variants"]] == ["short", "long"], "order"
assert v["short"]["rank"] == 1 and v["long"]["rank"] == 2, "ranks"
assert v["short"]["median"] > 0, "no energy"
assert r["measure"]["source"] == run["energy_source"], "source"
# The same command measured by run directly: same order of magnitude.
ratio = v["long"]["median"] / run["energy_j"]
assert 0.5 < ratio < 2, f"rank median {v['long']['median']} J vs run {run['energy_j']} J"
print(f"energy ({run['energy_source']}): short {v['short']['median']:.4g} J, "
      f"long {v['long']['median']:.4g} J, run alone {run['energy_j']:.4g} J")
PY

# With a power meter: a fake RAPL tree whose package draws 10 W plus 15 W per
# busy CPU, so run attributes measured energy above idle ("rapl") and rank
# says so. (A constant meter would leave nothing above idle to rank by.)
fake=$SRCDIR/tests/helpers/fake-powercap
writer=$BUILDDIR/tests/energy-writer
if [ -x "$fake" ] && [ -x "$writer" ]; then
    rc=0
    # shellcheck disable=SC2016 # expanded by the inner shell
    "$fake" -- bash -c '
      "$1" --truth "$2/truth" --log "$2/log" "intel-rapl:0=10+15*load" & w=$!
      for _ in $(seq 300); do [ -s "$2/truth" ] && break; sleep 0.01; done
      "$3" rank --measure --metric energy --warmup 0 --reps 4 --max 8 --json \
          --names short,long -- "$4" ::: "$5" >"$2/rapl.json"; rc=$?
      kill $w; wait $w; exit $rc' _ "$writer" "$T" "$WATTPROF" "$short" "$long" || rc=$?
    if [ "$rc" = 77 ]; then
        echo "no private mount namespace here: RAPL case skipped"
    else
        [ "$rc" = 0 ] || fail "rank in the fake RAPL tree exited $rc"
        "$PYTHON" - "$T/rapl.json" <<'PY' || fail "$(cat "$T/rapl.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["measure"]["source"] == "rapl", r["measure"]["source"]
assert [(x["name"], x["rank"]) for x in r["variants"]] == [("short", 1), ("long", 2)], "ranks"
print("energy (rapl): " + ", ".join(f"{x['name']} {x['median']:.4g} J" for x in r["variants"]))
PY
    fi
fi
echo "rank --metric energy checks passed"

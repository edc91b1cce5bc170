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
# The same command measured by run directly: same order of magnitude.
ratio = v["long"]["median"] / run["energy_j"]
assert 0.5 < ratio < 2, f"rank median {v['long']['median']} J vs run {run['energy_j']} J"
print(f"energy ({run['energy_source']}): short {v['short']['median']:.4g} J, "
      f"long {v['long']['median']:.4g} J, run alone {run['energy_j']:.4g} J")
PY
echo "rank --metric energy checks passed"

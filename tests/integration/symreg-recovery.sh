#!/usr/bin/env bash
# wattprof symreg recovers a memory model exactly (slow: runs only with TEST_SLOW=1).
#  - the memory-model shape 3*n^3 + 2*n*m + 5 (add, mul, square, cube):
#    test MAPE < 0.1 % in at least 8 of 10 seeds;
set -euo pipefail
: "${WATTPROF:?}" "${PYTHON:=/usr/bin/python3}"
if [ "${TEST_SLOW:-1}" = 0 ]; then
  echo "skipped: statistical recovery runs only with TEST_SLOW=1"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

"$PYTHON" - <<'PY'
import random
def write(path, cols, rows):
    with open(path, "w") as f:
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(repr(v) for v in r) + "\n")
r = random.Random(11)
for name in ("train", "test"):
    rows = []
    for _ in range(30):
        n, m = r.uniform(1, 10), r.uniform(1, 10)
        rows.append((n, m, 3 * n**3 + 2 * n * m + 5))
    write(f"mem-{name}.csv", ("n", "m", "mem"), rows)
PY
cat >mem.ini <<'EOF2'
[data]
train = mem-train.csv
test = mem-test.csv
target = mem
features = n, m
[primitives]
functions = add, mul, square, cube
constants = on
[evolution]
population = 300
generations = 150
stall = 20
[fitness]
metric = mape
EOF2
for s in $(seq 1 10); do
  "$WATTPROF" symreg mem.ini --json --seed "$s" --threads 2 >"mem-$s.json"
done
"$PYTHON" - <<'PY'
import json
mem = [json.load(open(f"mem-{s}.json")) for s in range(1, 11)]
for d in mem:
    print(f"memory  test mape {100 * d['test']['mape']:.3g} %  {d['equation']}")
good_mem = sum(d["test"]["mape"] < 0.001 for d in mem)
print(f"memory model: {good_mem}/10 under 0.1 % test MAPE")
assert good_mem >= 8
PY

#!/usr/bin/env bash
# wattprof symreg end to end: every bad input gets one line naming the file
# (and line) at fault and a non-zero exit; a good run reports the equation,
# counts evaluations from the cache of fitted shapes (none with cache = off),
# is the same at 1 and 2 threads, and its model file evaluates (in Python)
# to the same predictions on the test data.
set -euo pipefail
: "${WATTPROF:?}" "${PYTHON:=/usr/bin/python3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

"$PYTHON" - <<'PY'
import random
for name, seed, rows in (("train", 1, 30), ("test", 2, 20)):
    r = random.Random(seed)
    with open(f"{name}.csv", "w") as f:
        f.write("n,m,mem\n")
        for _ in range(rows):
            n, m = r.uniform(1, 10), r.uniform(1, 10)
            f.write(f"{n!r},{m!r},{3 * n**3 + 2 * n * m + 5!r}\n")
with open("other.csv", "w") as f:
    f.write("n,q,mem\n1,2,3\n")
with open("empty.csv", "w") as f:
    f.write("n,m,mem\n")
with open("zero.csv", "w") as f:
    f.write("n,m,mem\n1,2,3\n4,5,0\n")
PY

# config FILE [SECTION KEY VALUE]... writes a good config, with values
# replaced or added.
config() {
  "$PYTHON" - "$@" <<'PY'
import sys
path, *edit = sys.argv[1:]
sections = {
    "data": {"train": "train.csv", "test": "test.csv", "target": "mem", "features": "n, m"},
    "primitives": {"functions": "add, mul, square, cube", "constants": "on"},
    "evolution": {"population": "100", "generations": "15", "stall": "5", "seed": "3"},
    "fitness": {"metric": "mape"},
    "constants": {"lm": "on", "lm_iterations": "20"},
}
for i in range(0, len(edit), 3):
    sections.setdefault(edit[i], {})[edit[i + 1]] = edit[i + 2]
with open(path, "w") as f:
    f.write("; symreg test configuration\n")
    for s, kv in sections.items():
        f.write(f"\n[{s}]\n")
        for k, v in kv.items():
            f.write(f"{k} = {v}\n")
PY
}

fails=0
# expect_error WANT CONFIG-EDIT...: the run fails (exit 1, not a crash) with
# exactly WANT on stderr.
expect_error() {
  local want=$1; shift
  config c.ini "$@"
  set +e
  "$WATTPROF" symreg c.ini >out.txt 2>err.txt
  local rc=$?
  set -e
  local got; got=$(cat err.txt)
  if [ "$rc" != 1 ] || [ "$got" != "wattprof symreg: $want" ]; then
    echo "FAIL ($*): exit $rc, stderr '$got', want 'wattprof symreg: $want'"
    fails=$((fails + 1))
  else
    echo "ok: $want"
  fi
}

# Line numbers: 1 comment, 2 blank, 3 [data], 4-7 data keys, 8 blank,
# 9 [primitives], 10-11, 12 blank, 13 [evolution], 14-17 (+18 when added),
# then [fitness] and [constants]. Data paths are relative to the config.
expect_error "c.ini:10: unknown primitive 'pow' (add, sub, mul, div, max, min, square, cube, sqrt, log, exp, sin, cos)" \
  primitives functions "add, pow"
expect_error "c.ini:18: crossover must be a number in [0, 1], not '1.5'" evolution crossover 1.5
expect_error "c.ini:18: mutation must be a number in [0, 1], not '-0.1'" evolution mutation -0.1
expect_error "c.ini:18: tournament_parsimony must be a number in [1, 2], not '2.5'" \
  evolution tournament_parsimony 2.5
expect_error "c.ini:18: tournament_parsimony must be a number in [1, 2], not '0.9'" \
  evolution tournament_parsimony 0.9
expect_error "c.ini:4: ./missing.csv: cannot read: No such file or directory" \
  data train missing.csv
expect_error "./other.csv: columns differ from ./train.csv: column 2 is 'm' there, 'q' here" \
  data test other.csv
expect_error "./empty.csv: no data rows" data train empty.csv
expect_error "./empty.csv: no data rows" data test empty.csv
expect_error "./zero.csv:3: target 'mem' is 0; the mape fitness needs non-zero targets" \
  data train zero.csv
expect_error "c.ini:18: unknown key 'colour' in [evolution]" evolution colour red
expect_error "c.ini:18: tie must be bic or exact, not 'noise'" evolution tie noise
expect_error "c.ini:11: constants must be on or off, not 'maybe'" primitives constants maybe
expect_error "c.ini:20: unknown fitness metric 'r2' (mape, mse, rmse)" fitness metric r2
expect_error "c.ini:14: population must be a whole number of at least 2, not '1'" \
  evolution population 1
expect_error "c.ini:27: unknown section [extra]" extra key value
expect_error "c.ini: primitives: at least one two-argument primitive (add, sub, mul, div) is needed" \
  primitives functions "square, cube"
expect_error "c.ini: need init_min_depth <= init_max_depth <= max_depth (1, 3, 2)" \
  evolution max_depth 2
expect_error "./train.csv:1: no column named 'z'" data features "n, z"
expect_error "c.ini:18: selection must be double or pareto, not 'best'" evolution selection best
expect_error "c.ini:18: unknown preset 'fast' (default, pandora)" evolution preset fast
expect_error "c.ini:18: time_limit must be a number in [0, 1e+09], not '-1'" \
  evolution time_limit -1
expect_error "c.ini:18: simplify must be on or off, not 'later'" evolution simplify later
expect_error "c.ini:18: scaling must be on or off, not 'twice'" evolution scaling twice
expect_error "c.ini:18: migration must be on or off, not 'often'" evolution migration often
expect_error "c.ini:25: cache must be on or off, not 'sometimes'" constants cache sometimes
expect_error "c.ini:25: unknown key 'colour' in [constants] (lm, lm_iterations, cache)" \
  constants colour red
expect_error "c.ini:27: unknown selection rule 'aic' (bic, cv, score, accurate)" selection rule aic
expect_error "c.ini:27: unknown key 'when' in [selection] (rule)" selection when now

set +e
"$WATTPROF" symreg nothere.ini 2>err.txt; rc=$?
set -e
grep -qx "wattprof symreg: nothere.ini: cannot read: No such file or directory" err.txt && [ $rc = 1 ] ||
  { echo "FAIL: missing config: exit $rc, $(cat err.txt)"; fails=$((fails + 1)); }
for bad in "--threads 0" "--seed x" "--bogus" "--time-limit 0" "--time-limit x" "--rule aic"; do
  set +e
  # shellcheck disable=SC2086
  "$WATTPROF" symreg c.ini $bad 2>err.txt >/dev/null; rc=$?
  set -e
  [ $rc = 2 ] && [ -s err.txt ] || { echo "FAIL: '$bad' exit $rc"; fails=$((fails + 1)); }
done

# --help names every option and every INI key.
"$WATTPROF" symreg --help >help.txt
for word in --json --seed --threads --front --time-limit --rule --out "[data]" train test \
  target features "[primitives]" functions constants "[evolution]" preset population \
  generations crossover mutation selection tournament_fitness tournament_parsimony tie max_depth \
  max_size init_min_depth init_max_depth simplify scaling migration stall time_limit "[fitness]" \
  metric "[constants]" lm lm_iterations cache "[selection]" rule; do
  grep -qF -- "$word" help.txt || { echo "FAIL: --help does not mention $word"; fails=$((fails + 1)); }
done

# A time limit stops a long run cleanly, with the best so far.
config c.ini evolution generations 1000000 evolution stall 0
"$WATTPROF" symreg c.ini --json --time-limit 0.5 --threads 1 >timed.json
"$PYTHON" - <<'PY' || fails=$((fails + 1))
import json
d = json.load(open("timed.json"))
assert d["stopped"] == "time" and 0.5 <= d["seconds"] < 20, (d["stopped"], d["seconds"])
assert d["equation"] and d["generations"] < 1000000
print("ok: --time-limit")
PY

# The cache of fitted shapes: some evaluations come from it, none with cache = off.
config c.ini
"$WATTPROF" symreg c.ini --json --threads 1 >cached.json
config c.ini constants cache off
"$WATTPROF" symreg c.ini --json --threads 1 >uncached.json
"$PYTHON" - <<'PY' || fails=$((fails + 1))
import json
on, off = json.load(open("cached.json")), json.load(open("uncached.json"))
assert 0 < on["evaluations_cached"] < on["evaluations"], on["evaluations_cached"]
assert off["evaluations_cached"] == 0, off["evaluations_cached"]
print("ok: evaluations_cached")
PY
config c.ini evolution generations 1000000 evolution stall 0

# The progress line goes to stderr only when it is a terminal.
if command -v script >/dev/null; then
  script -qec "'$WATTPROF' symreg c.ini --time-limit 0.3 >/dev/null" /dev/null >tty.txt
  grep -q "generation 1/1000000 .*/0.3 s  best mape" tty.txt ||
    { echo "FAIL: no progress line on a terminal: $(head -c 200 tty.txt)"; fails=$((fails + 1)); }
fi
"$WATTPROF" symreg c.ini --time-limit 0.3 >/dev/null 2>notty.txt
[ ! -s notty.txt ] || { echo "FAIL: progress on a pipe: $(cat notty.txt)"; fails=$((fails + 1)); }

# A good run: same JSON at 1 and 2 threads (but for timing), an equation
# that fits, and a model file that reproduces its predictions.
config c.ini
"$WATTPROF" symreg c.ini --json --threads 1 >one.json
"$WATTPROF" symreg c.ini --json --threads 2 --out model.json >two.json
"$WATTPROF" symreg c.ini --front >text.txt
# --data FILE trains on FILE instead of the config's [data] train.
cp train.csv train-copy.csv
"$WATTPROF" symreg c.ini --json --threads 1 --data train-copy.csv >data.json
cmp -s <(grep -v _second one.json | grep -v seconds) <(grep -v _second data.json | grep -v seconds) ||
  { echo "FAIL: --data with the same rows gives another result"; fails=$((fails + 1)); }
set +e
"$WATTPROF" symreg c.ini --data empty.csv 2>err.txt >/dev/null; rc=$?
set -e
grep -qx "wattprof symreg: empty.csv: no data rows" err.txt && [ $rc = 1 ] ||
  { echo "FAIL: --data empty.csv: exit $rc, $(cat err.txt)"; fails=$((fails + 1)); }
grep -q '^equation:    mem = ' text.txt && grep -q '^Pareto front' text.txt ||
  { echo "FAIL: text output"; cat text.txt; fails=$((fails + 1)); }
"$PYTHON" - <<'PY' || fails=$((fails + 1))
import csv, json, math
one, two = json.load(open("one.json")), json.load(open("two.json"))
for d in (one, two):
    for k in ("seconds", "evaluations_per_second", "threads"):
        d.pop(k)
assert one == two, "1 and 2 threads differ"
assert one["generations"] <= 15 and one["evaluations"] > 100
assert one["train"]["mape"] < 0.5 and one["test"]["mape"] < 0.5, one
assert one["stopped"] in ("generations", "stall"), one["stopped"]
sel = one["selection"]
assert sel["rule"] == "bic" and sel["why"].startswith("the lowest n ln(MSE)"), sel
chosen = [f for f in one["front"] if f["chosen"]]
assert len(chosen) == 1 and one["front"].index(chosen[0]) == sel["front_index"], one["front"]
assert chosen[0]["size"] >= one["size"] - 2, (chosen[0], one["size"])  # polishing only shrinks
for k in one["constants"]:
    assert set(k) == {"value", "fitted", "stderr"}, k
    assert k["stderr"] is None or abs(k["value"] - k["fitted"]) <= k["stderr"] + 1e-12 * abs(k["fitted"]), k
sizes = [f["size"] for f in one["front"]]
errors = [f["error"] for f in one["front"]]
assert sizes == sorted(sizes) and errors == sorted(errors, reverse=True), one["front"]

model = json.load(open("model.json"))
assert model["format"] == "wattprof-model/1" and model["engine"] == "expr", model
assert model["features"] == ["n", "m"] and model["target"] == "mem"
assert model["expression"] == one["equation"]
env = {"square": lambda x: x * x, "cube": lambda x: x ** 3}
rows = list(csv.DictReader(open("test.csv")))
pred = [eval(model["expression"], {"__builtins__": {}}, dict(env, n=float(r["n"]), m=float(r["m"])))
        for r in rows]
y = [float(r["mem"]) for r in rows]
mape = sum(abs(p - t) / abs(t) for p, t in zip(pred, y)) / len(y)
assert math.isclose(mape, one["test"]["mape"], rel_tol=1e-9, abs_tol=1e-15), (mape, one["test"])
print("ok: JSON, determinism, front and model file")
PY

[ "$fails" = 0 ] || { echo "$fails failures"; exit 1; }

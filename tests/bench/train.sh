#!/usr/bin/env bash
# Benchmark: lib/learn's fits against scikit-learn's, in the same run, on
# the same files, interleaved so both see the same machine load.
#   ridge (alpha 1) and OLS, min-max scaled, on 1,000,000 x 44 rows;
#   random forest, 100 trees, 2 threads vs n_jobs=2, on 100,000 x 22 rows.
# Each case runs REPS times (default 3) as a fresh process; the table shows
# medians of wall and CPU seconds of the fit alone, accuracy on held-out
# rows, and peak RSS of the process (with the RSS once the data was loaded).
#
# usage: tests/bench/train.sh [BUILDDIR]   (env: REPS, LINEAR_ROWS, FOREST_ROWS)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
py=/usr/bin/python3
reps=${REPS:-3}
out=tests/bench/out/train
mkdir -p "$out/linear" "$out/forest"
ninja -C "$build" tests/bench_train_fit >/dev/null
fit="$build/tests/bench_train_fit"

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
$py tests/bench/train_data.py "$out/linear" "${LINEAR_ROWS:-1000000}" 44 100000 1
$py tests/bench/train_data.py "$out/forest" "${FOREST_ROWS:-100000}" 22 20000 2
: >"$out/results.jsonl"
start=$(date +%s)
for rep in $(seq 1 "$reps"); do
    for case in ols:linear:1 ridge:linear:1 forest:forest:2; do
        IFS=: read -r engine data threads <<<"$case"
        for side in wattprof scikit-learn; do
            if [ $side = wattprof ]; then
                line=$("$fit" "$engine" "$out/$data" "$threads")
            else
                line=$($py tests/bench/train_peer.py "$engine" "$out/$data" "$threads")
            fi
            echo "{\"engine\": \"$engine\", \"side\": \"$side\", \"rep\": $rep, \"result\": $line}" |
                tee -a "$out/results.jsonl"
        done
    done
done
echo "took $(( $(date +%s) - start )) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

$py - "$out/results.jsonl" "${LINEAR_ROWS:-1000000}" "${FOREST_ROWS:-100000}" <<'PY'
import json, statistics, sys
sys.path.insert(0, "tests/bench")
from benchjson import Summary, spread
rows = [json.loads(l) for l in open(sys.argv[1])]
sm = Summary()
def med(engine, side, key):
    return statistics.median(r["result"][key] for r in rows if r["engine"] == engine and r["side"] == side)
print()
print("| fit | side | wall s | CPU s | R² (held out) | MAPE | peak RSS MB (data loaded) |")
print("|---|---|---|---|---|---|---|")
lin, fo = int(sys.argv[2]), int(sys.argv[3])
for e, label in [("ols", f"OLS {lin:,} x 44"), ("ridge", f"ridge {lin:,} x 44"),
                 ("forest", f"forest {fo:,} x 22, 100 trees, 2 threads")]:
    for side in ["wattprof", "scikit-learn"]:
        print(f"| {label} | {side} | {med(e, side, 'fit_s'):.2f} | {med(e, side, 'cpu_s'):.2f} | "
              f"{med(e, side, 'r2'):.5f} | {100 * med(e, side, 'mape'):.3f} % | "
              f"{med(e, side, 'rss_peak_mb'):.0f} ({med(e, side, 'rss_loaded_mb'):.0f}) |")
print()
for e in ["ols", "ridge", "forest"]:
    w = {k: med(e, "wattprof", k) for k in ["fit_s", "cpu_s", "rss_peak_mb", "rss_loaded_mb"]}
    s = {k: med(e, "scikit-learn", k) for k in ["fit_s", "cpu_s", "rss_peak_mb", "rss_loaded_mb"]}
    print(f"{e}: scikit-learn / wattprof: wall {s['fit_s'] / w['fit_s']:.1f}x, CPU "
          f"{s['cpu_s'] / w['cpu_s']:.1f}x, memory above the loaded data "
          f"{s['rss_peak_mb'] - s['rss_loaded_mb']:.0f} MB vs {w['rss_peak_mb'] - w['rss_loaded_mb']:.0f} MB")
    vals = lambda side: [r["result"]["fit_s"] for r in rows if r["engine"] == e and r["side"] == side]
    size = f"{lin:,} x 44" if e != "forest" else f"{fo:,} x 22, 100 trees, 2 threads"
    sm.figure(f"{e} fit, {size}: wall s", spread(vals("wattprof")), spread(vals("scikit-learn")),
              "scikit-learn", f"{s['fit_s'] / w['fit_s']:.1f}× faster",
              note=f"R² {med(e, 'wattprof', 'r2'):.4f} vs {med(e, 'scikit-learn', 'r2'):.4f}")
sm.emit()
PY

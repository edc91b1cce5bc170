#!/usr/bin/env bash
# wattprof select against scipy/scikit-learn on the Kepler data: Spearman
# |rho| and PCA scores agree to 1e-9, forest importances to 0.1 (different
# random forests), the constant feature (bytes_read) is reported and ranks
# last, and -k picks the best mean ranks.
set -euo pipefail
data="$TEST_DATA/kepler-broadwell-coremark.csv"
[ -f "$data" ] || { echo "FAIL: $data missing (tests/data is part of the repository)"; exit 1; }
"$PYTHON" -c 'import sklearn, scipy' 2>/dev/null || { echo "skip: $PYTHON has no scikit-learn/scipy"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
features=cache_miss,cpu_cycles,cpu_instr,cpu_time,bytes_read,bytes_writes,energy_in_dram_joule
"$PYTHON" "$SRCDIR/tests/peers/sklearn_select.py" "$data" energy_in_pkg_joule "$features" 100 \
    >"$tmp/sklearn.json"
"$WATTPROF" select "$data" --target energy_in_pkg_joule --features "$features" --trees 100 \
    --threads 2 -k 3 --json >"$tmp/ours.json" 2>"$tmp/err"
grep -q "feature 'bytes_read' is constant" "$tmp/err" || { echo "FAIL: constant feature not reported"; cat "$tmp/err"; exit 1; }
"$WATTPROF" select "$data" --target energy_in_pkg_joule --features "$features" -k 2 >"$tmp/ours.txt" 2>/dev/null
grep -Eq '^top 2: [a-z_]+,[a-z_]+$' "$tmp/ours.txt" || { echo "FAIL: no top-k line"; cat "$tmp/ours.txt"; exit 1; }

"$PYTHON" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
ref = json.load(open(f"{tmp}/sklearn.json"))
ours = json.load(open(f"{tmp}/ours.json"))
fails = []
rows = {r["feature"]: r for r in ours["features"]}
for name, r in ref.items():
    o = rows[name]
    if (r["spearman"] is None) != (o["spearman"] is None) or \
            (r["spearman"] is not None and abs(o["spearman"] - r["spearman"]) > 1e-9):
        fails.append(f"{name} spearman {o['spearman']} vs {r['spearman']}")
    if abs(o["pca"] - r["pca"]) > 1e-9:
        fails.append(f"{name} pca {o['pca']} vs {r['pca']}")
    if abs(o["forest"] - r["forest"]) > 0.1:
        fails.append(f"{name} forest {o['forest']} vs {r['forest']}")
    print(f"{name:22s} |rho| {o['spearman']} ({r['spearman']}), pca {o['pca']:.6f} "
          f"({r['pca']:.6f}), forest {o['forest']:.4f} ({r['forest']:.4f}), mean rank {o['mean_rank']:.3f}")
order = [r["feature"] for r in ours["features"]]
mean = [r["mean_rank"] for r in ours["features"]]
if mean != sorted(mean) or order[-1] != "bytes_read" or ours["top"] != order[:3]:
    fails.append(f"order {order}, top {ours['top']}")
if fails:
    print("FAIL: " + "; ".join(fails))
    sys.exit(1)
PY

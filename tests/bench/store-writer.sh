#!/usr/bin/env bash
# Benchmark: lib/store's writer (per-second rows) against the peer that
# keeps every tick's row, at 50 Hz with 50, 200 and 1000 processes.
# Medians of REPEATS runs of SECONDS seconds each; prints a Markdown table
# with the ratios. Needs a built tree: BUILDDIR (default ./build).
#   tests/bench/store-writer.sh            # 3 runs x 10 s per cell
#   REPEATS=5 SECONDS_PER_RUN=30 tests/bench/store-writer.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
builddir=${BUILDDIR:-build}
repeats=${REPEATS:-3}
seconds=${SECONDS_PER_RUN:-10}
python=${PYTHON:-/usr/bin/python3}

for lib in "$builddir/lib/store/libwpstore.a" "$builddir/lib/util/libwputil.a"; do
  [ -f "$lib" ] || { echo "$lib: not built (run: ninja -C $builddir)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/wattprof-bench-store-XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -D_GNU_SOURCE -std=c11 -Ilib tests/bench/store_writer.c \
  "$builddir/lib/store/libwpstore.a" "$builddir/lib/util/libwputil.a" \
  $(pkg-config --cflags --libs sqlite3 json-c libmd) -lpthread -lm -o "$work/store_writer"

for n in 50 200 1000; do
  for r in $(seq "$repeats"); do
    for mode in store per-tick; do
      rm -f "$work"/db*
      "$work/store_writer" "$mode" "$n" "$seconds" "$work/db" >>"$work/results.jsonl"
    done
  done
done

"$python" - "$work/results.jsonl" "$repeats" "$seconds" <<'PY'
import json, statistics, sys
sys.path.insert(0, "tests/bench")
from benchjson import Summary, spread
rows = [json.loads(l) for l in open(sys.argv[1])]
sm = Summary()
print(f"50 Hz, medians of {sys.argv[2]} runs of {sys.argv[3]} s\n")
print("| processes | writer CPU % of a core (store / per-tick / ratio) | push per tick µs p50, p99 (store / per-tick) | DB MiB per hour (store / per-tick / ratio) | dropped |")
print("|---|---|---|---|---|")
def med(mode, n, key):
    return statistics.median(r[key] for r in rows if r["mode"] == mode and r["processes"] == n)
for n in sorted({r["processes"] for r in rows}):
    cs, cp = med("store", n, "writer_cpu_pct"), med("per-tick", n, "writer_cpu_pct")
    ds, dp = med("store", n, "db_mib_per_hour"), med("per-tick", n, "db_mib_per_hour")
    print(f"| {n} | {cs:.2f} / {cp:.2f} / {cp / cs:.1f}x "
          f"| {med('store', n, 'push_us_p50'):.1f}, {med('store', n, 'push_us_p99'):.1f} / "
          f"{med('per-tick', n, 'push_us_p50'):.1f}, {med('per-tick', n, 'push_us_p99'):.1f} "
          f"| {ds:.0f} / {dp:.0f} / {dp / ds:.1f}x | {int(med('store', n, 'dropped'))} |")
    if n == 200:
        vals = lambda mode, k: [r[k] for r in rows if r["mode"] == mode and r["processes"] == n]
        sm.figure("store writer at 200 processes, 50 Hz: CPU, % of a core",
                  spread(vals("store", "writer_cpu_pct")), spread(vals("per-tick", "writer_cpu_pct")),
                  "per-tick rows, one transaction a second", f"{cp / cs:.1f}× less",
                  note=f"DB growth {ds:.0f} MiB/h (per-tick {dp:.0f} MiB/h)")
sm.emit()
PY

#!/bin/sh
# Where a GP fit's time goes: perf (cpu-clock samples, which work without a
# hardware PMU) over `wattprof gp` fitting rbf+white with 5 restarts on the
# benchmark's data (tests/bench/gp.py) for at most SECONDS per size, with
# the samples summed by concern: LAPACK/BLAS (Cholesky, inverse, solves),
# the kernel matrix (distances and exp), the gradient's traces, the rest.
# Usage: tests/bench/gp_profile.sh BUILDDIR [SECONDS] [SIZES]
set -eu
build=$1 secs=${2:-30} sizes=${3:-200 1000 3000}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
feats=$(seq -s, -f 'x%g' 0 14)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
for n in $sizes; do
    /usr/bin/python3 -c "import importlib.util as u, sys
s = u.spec_from_file_location('gp', '$src/tests/bench/gp.py'); m = u.module_from_spec(s)
s.loader.exec_module(m); m.dataset($n, '$tmp')"
    timeout -s INT "$secs" perf record -q -e cpu-clock -o "$tmp/perf.data" \
        "$build/client/wattprof" gp --data "$tmp/gp${n}_train.csv" --target y --features "$feats" \
        --kernel rbf+white --restarts 5 --seed 0 --loocv none >/dev/null 2>&1 || true
    perf report -i "$tmp/perf.data" --no-children --sort dso,symbol -F overhead,dso,sym \
        --stdio 2>/dev/null | awk -v n="$n" '
        /^ *[0-9.]+%/ {
            p = $1 + 0; dso = $2; sym = $4
            if (dso ~ /openblas|gslcblas|lapack/ || sym ~ /cholesky|dpotr|dtr|dsyrk|dgemm/) c = "LAPACK/BLAS"
            else if (sym ~ /gp_kernel_matrix|base_matrix|correlation|dist2|exp/) c = "kernel matrix"
            else if (sym ~ /gp_kernel_grad|base_grad|gp_evaluate/) c = "gradient traces"
            else if (dso ~ /kernel/) c = "kernel (page faults)"
            else c = "other"
            t[c] += p
        }
        END { printf "n = %s:", n; for (c in t) printf "  %s %.1f %%", c, t[c]; printf "\n" }'
done

#!/usr/bin/env bash
# Session 49's device runs (k4pairs for the next session: no machine came for it in session 49).
#   suite    the whole GPU suite of this checkout (session 45's step)
#   decode   the standing figure (144 decode cells) of this checkout (session 46's step)
#   k4pairs  docs/experiments/s49-k4-cut-pairs.diff (the ON_MUL cut plan's partner pairs: K4 mcg 9 -> 7 ALU
#            cut instructions per 8 states, same count): ab/A = this checkout, ab/B = with the diff (both
#            built here, on the device's copy, which the diff then patches); the GPU tests of the swapped
#            route and of every rate on the patched copy; the 16 K4 mcg M = 1 / 4 cells, A against B,
#            4 rounds, order alternating. (Session 49's K3 shift on the multiply pipe was run the same way:
#            0.9798x, benchmarks/RESULTS.md.)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s49}
case "${1:-}" in
  suite)   TAG=$TAG OUT=$OUT bash docs/experiments/s45-gpu-plan.sh suite ;;
  decode)  TAG=$TAG OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  k4pairs)
    export ESCHA_JIT_CACHE_DIR=/tmp/ect
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    rm -rf ab && mkdir -p ab/A ab/B && cp -r escha_jit templates tuning ab/A/
    patch -p1 < docs/experiments/s49-k4-cut-pairs.diff || exit 1
    cp -r escha_jit templates tuning ab/B/
    timeout ${TS:-150} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "swapped_route or every_rate_codebook" \
      > "$OUT/pytest_k4pairs_${TAG}.log" 2>&1; tail -1 "$OUT/pytest_k4pairs_${TAG}.log"
    ROUNDS=${ROUNDS:-4} BENCH_ARGS="--ks 4 --codebooks mcg --ms 1,4" PREBUILD_ARGS="--ks 4 --codebooks mcg --ms 1,4" \
      timeout ${T:-300} bash scripts/ab_trees.sh ab/A ab/B > "$OUT/ab_k4pairs_${TAG}.log" 2>&1
    tail -20 "$OUT/ab_k4pairs_${TAG}.log" ;;
  *) echo "usage: $0 suite|decode|k4pairs"; exit 2 ;;
esac

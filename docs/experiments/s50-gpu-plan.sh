#!/usr/bin/env bash
# Session 50's device runs.
#   cuts    three trees, built here on the device's copy (which the diffs then patch):
#           (run on 4e663fe; s49-k4-cut-pairs.diff is in main since 6d2f450) A = this checkout; B = A + docs/experiments/s49-k4-cut-pairs.diff (K4 mcg: 9 -> 7 ALU cut
#           instructions per 8 states); C = B + docs/experiments/s50-top-cut-on-mul.diff (the LCG swapped
#           route's first unpaired top-window cut y >> 16 as IMAD.HI: K2 mcg ALU 8.73 -> 8.23 cycles per
#           tile under its issue bound 8.44, K3 9.84 -> 9.41 under 9.77). The GPU tests of the swapped route
#           and of every rate on C; then the 48 K2 / K3 / K4 mcg M = 1 / 4 cells, A B C, 4 rounds, order
#           alternating (scripts/ab_trees.sh).
#   decode  the standing figure (144 decode cells) of this checkout (session 46's step)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s50}
case "${1:-}" in
  decode)  TAG=$TAG OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  cuts)
    export ESCHA_JIT_CACHE_DIR=/tmp/ect
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    rm -rf ab && mkdir -p ab/A ab/B ab/C && cp -r escha_jit templates tuning ab/A/
    patch -p1 -s < docs/experiments/s49-k4-cut-pairs.diff || exit 1
    cp -r escha_jit templates tuning ab/B/
    patch -p1 -s < docs/experiments/s50-top-cut-on-mul.diff || exit 1
    cp -r escha_jit templates tuning ab/C/
    timeout ${TS:-170} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "swapped_route or every_rate_codebook" \
      > "$OUT/pytest_cuts_${TAG}.log" 2>&1; tail -1 "$OUT/pytest_cuts_${TAG}.log"
    ROUNDS=${ROUNDS:-4} BENCH_ARGS="--ks 2,3,4 --codebooks mcg --ms 1,4" PREBUILD_ARGS="--ks 2,3,4 --codebooks mcg --ms 1,4" \
      timeout ${T:-330} bash scripts/ab_trees.sh ab/A ab/B ab/C > "$OUT/ab_cuts_${TAG}.log" 2>&1
    tail -12 "$OUT/ab_cuts_${TAG}.log" ;;
  *) echo "usage: $0 cuts|decode"; exit 2 ;;
esac

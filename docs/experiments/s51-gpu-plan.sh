#!/usr/bin/env bash
# Session 51's device runs. The standing figure is an H200 figure, so both steps stop at once on
# any other card (the reply names it).
#   decode  the standing figure (144 decode cells, session 46's step) of this checkout
#   twins   session 50's four twin-adopted table entries against the configs they replaced
#   flat    (any card: ANY_GPU=1) FusedConfig.flat: its GPU tests with the swapped route's, then the 24
#           4096x14336 M = 1 / 4 cells (f16) against flat variants of their tuned entries (3 rounds,
#           order alternating; bench_variants.py)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
case "$gpu" in *H200*) ;; *) [ -n "${ANY_GPU:-}" ] || { echo "not an H200: skipped"; exit 3; } ;; esac
case "${1:-}" in
  decode) TAG=${TAG:-s51} OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  twins)  OUT=$OUT bash docs/experiments/s50-twins-check.sh ;;
  flat)
    export ESCHA_JIT_CACHE_DIR=/tmp/ecf
    timeout ${TS:-200} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "flat or swapped or split_cluster_same" \
      > "$OUT/pytest_flat_${TAG:-s51}.log" 2>&1; tail -1 "$OUT/pytest_flat_${TAG:-s51}.log"
    P=""; for K in 2 3 4; do for cb in mcg mul1; do for M in 1 4; do P="$P,4096x14336:$K:$cb:$M"; done; done; done
    F="flat=1,splits=1,split_cluster=0"
    timeout ${T:-330} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-3} \
      --variants "$F,rows_per_stage=8;$F,rows_per_stage=8,stages=3;$F,rows_per_stage=8,warps=4,blocks_per_sm=4" \
      --out "$OUT/flat_variants_${TAG:-s51}.json" > "$OUT/flat_variants_${TAG:-s51}.log" 2>&1
    grep -E "^[0-9]+x[0-9]+" "$OUT/flat_variants_${TAG:-s51}.log" | head -30; tail -2 "$OUT/flat_variants_${TAG:-s51}.log" ;;
  *) echo "usage: $0 decode|twins|flat"; exit 2 ;;
esac

#!/usr/bin/env bash
# Session 54's device runs (all done on an H100: benchmarks/RESULTS.md session 54). Any card; the
# reply names it. Session 53's `entries` and `ncudense` steps ran first (docs/experiments/s53-gpu-plan.sh),
# then session 51's `m16bound` (ANY_GPU=1 docs/experiments/s51-gpu-plan.sh m16bound). Build the A/B
# trees first (ab/ is git-ignored: carry=["ab"]), e.g. for the L2 prefetch (3bfa71a) against its parent:
#   rm -rf ab && mkdir -p ab/O ab/N && git archive 3bfa71a~ escha_jit templates tuning | tar -x -C ab/O \
#     && git archive 3bfa71a escha_jit templates tuning | tar -x -C ab/N
# (the dropped experiments: ab/N from `git apply` of docs/experiments/s54-{persistent-prefetch,pair-reads}.diff
# on the commit README.md names for each)
#   tests    the dense-weight and dense-path GPU tests of this checkout
#   dense    the weight build alone on ab/O and ab/N (bench_dense_weight.py, W fp16 and bf16, ROUNDS 2)
#   prefill  the prefill cells (bench_linear.py, M = PREFILL_MS, default 1024,4096; ROUNDS 4)
#   ncu      Nsight Compute over this checkout's build (s53-gpu-plan.sh ncudense; PROBLEMS as there)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s54}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONUNBUFFERED=1 ESCHA_JIT_CACHE_DIR=${ESCHA_JIT_CACHE_DIR:-/tmp/ec54}
case "${1:-}" in
  tests)
    timeout ${T:-150} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "dense or unfused" \
      > "$OUT/pytest_dense_${TAG}.log" 2>&1
    tail -2 "$OUT/pytest_dense_${TAG}.log" ;;
  dense)
    BENCH=dense BENCH_ARGS="--dtypes ${DTYPES:-f16,bf16}" ROUNDS=${ROUNDS:-2} OUT=$OUT/ab_dense_${TAG} \
      bash scripts/ab_trees.sh ab/O ab/N | tail -3 ;;
  prefill)
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024,4096}" PREBUILD_ARGS="--ms=" ROUNDS=${ROUNDS:-4} \
      OUT=$OUT/ab_prefill_${TAG} bash scripts/ab_trees.sh ab/O ab/N | tail -4 ;;
  ncu) OUT=$OUT bash docs/experiments/s53-gpu-plan.sh ncudense ;;
  *) echo "usage: $0 tests|dense|prefill|ncu"; exit 2 ;;
esac

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
export TAG=${TAG:-s54} ESCHA_JIT_CACHE_DIR=${ESCHA_JIT_CACHE_DIR:-/tmp/ec54}
case "${1:-}" in      # session 52's steps (the same trees, benches and tests), with this session's defaults
  tests) T=${T:-150} bash docs/experiments/s52-gpu-plan.sh tests ;;
  dense) DTYPES=${DTYPES:-f16,bf16} ROUNDS=${ROUNDS:-2} bash docs/experiments/s52-gpu-plan.sh dense ;;
  prefill) bash docs/experiments/s52-gpu-plan.sh prefill ;;
  ncu) bash docs/experiments/s53-gpu-plan.sh ncudense ;;
  *) echo "usage: $0 tests|dense|prefill|ncu"; exit 2 ;;
esac

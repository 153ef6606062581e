#!/usr/bin/env bash
# Session 58's device steps (benchmarks/RESULTS.md session 58). Any card; the reply names it.
# Trees (ab/ is git-ignored; carry=["ab"]): ab/N = 767eb99 (session 57's main), ab/E = this tree (the
# coded GEMM's epilogue with the output Hadamard in the accumulators, in the lane and one shuffle round):
#   rm -rf ab && mkdir -p ab/N ab/E && git archive 767eb99 escha_jit templates tuning | tar -x -C ab/N
#   git archive HEAD escha_jit templates tuning | tar -x -C ab/E
#   gemm     the GPU GEMM tests on this tree, then the GEMM alone, ab/N against ab/E (bench_gemm_parts,
#            share 2 where it pairs, K2 mcg, 4 shapes, M = 1024 / 4096)
#   prefill  bench_linear's prefill cells at M = 1024 (the shipped routes), ab/N against ab/E; then
#            clusters of 4 token blocks against the pairs where they take as many waves (4096x14336,
#            4096x11008 at M = 1024; 8192x28672 takes one more); then Nsight Compute over this tree's
#            pair kernel ($OUT/ncu_pair_s58)
#   suite    the whole GPU suite on this tree
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
nvidia-smi -L
case "${1:-}" in
  gemm)
    ESCHA_JIT_CACHE_DIR=/tmp/ec timeout ${T:-200} python3 -m pytest -q -n 8 tests/test_gpu_gemm.py > "$OUT/pytest_gemm_s58.log" 2>&1
    tail -3 "$OUT/pytest_gemm_s58.log"
    BENCH=gemm BENCH_ARGS="--shapes 4096x4096,4096x14336,14336x4096,8192x28672 --ms 1024,4096 --K 2" ROUNDS=2 \
      OUT=$OUT/ab_gemm_epi_s58 timeout ${TG:-240} bash scripts/ab_trees.sh ab/N ab/E | tail -6 ;;
  prefill)
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024}" PREBUILD_ARGS="--ms= --prefill" ROUNDS=2 \
      OUT=$OUT/ab_prefill_epi_s58 timeout ${TP:-320} bash scripts/ab_trees.sh ab/N ab/E | tail -6
    timeout ${TV:-150} python3 benchmarks/ab_gemm_variants.py --variants "share=2;share=4" --shapes 4096x14336,4096x11008,8192x28672 \
      --Ks 2 --codebooks mcg,mul1 --ms 1024 --rounds 2 --out "$OUT/ab_gemm_share4_s58.json" > "$OUT/ab_gemm_share4_s58.log" 2>&1
    tail -8 "$OUT/ab_gemm_share4_s58.log"
    PROBLEMS=4096x14336:2:mcg:1024,4096x4096:2:mcg:1024 GEMM_VARIANT=share=2 OUT=$OUT/ncu_pair_s58 \
      timeout ${TN:-200} bash scripts/ncu_fused.sh | tail -3 ;;
  suite)
    export ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout ${T:-540} python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
      tests/test_nvrtc.py > "$OUT/pytest_gpu_s58.log" 2>&1; tail -3 "$OUT/pytest_gpu_s58.log" ;;
  *) echo "usage: $0 gemm|prefill|suite"; exit 2 ;;
esac

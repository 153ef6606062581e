#!/usr/bin/env bash
# Session 57's device steps (benchmarks/RESULTS.md session 57). Any card; the reply names it.
#   suite    the whole GPU suite on this tree (the coded GEMM's epilogue in row batches, the Hadamard's
#            butterflies as fmas: every kernel that rotates)
#   epi      interleaved A/Bs of ab/O (b53fca6, session 56's main) against ab/N (this tree): the coded
#            GEMM alone (bench_gemm_parts, share 1, K2, 4 shapes, M = 1024 / 4096), then bench_linear's
#            prefill cells at M = 1024 (the shipped routes):
#              rm -rf ab && mkdir -p ab/O ab/N && git archive b53fca6 escha_jit templates tuning | tar -x -C ab/O
#              git archive HEAD escha_jit templates tuning | tar -x -C ab/N      (carry=["ab"])
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
nvidia-smi -L
case "${1:-}" in
  suite)
    export ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout ${T:-540} python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
      tests/test_nvrtc.py > "$OUT/pytest_gpu_s57.log" 2>&1; tail -3 "$OUT/pytest_gpu_s57.log" ;;
  epi)
    BENCH=gemm BENCH_ARGS="--shapes 4096x4096,4096x14336,14336x4096,8192x28672 --ms 1024,4096 --K 2" ROUNDS=2 \
      OUT=$OUT/ab_gemm_epi_s57 timeout ${TG:-260} bash scripts/ab_trees.sh ab/O ab/N | tail -6
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024}" PREBUILD_ARGS="--ms= --prefill" ROUNDS=2 \
      OUT=$OUT/ab_prefill_epi_s57 timeout ${TP:-300} bash scripts/ab_trees.sh ab/O ab/N | tail -6 ;;
  *) echo "usage: $0 suite|epi"; exit 2 ;;
esac

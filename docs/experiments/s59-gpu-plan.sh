#!/usr/bin/env bash
# Session 59's device steps (benchmarks/RESULTS.md session 59). Any card; the reply names it.
# Trees (ab/ is git-ignored; carry=["ab"]): ab/N = 767eb99 (session 57's main), ab/E = session 58's
# epilogue (the coded GEMM's output Hadamard in the accumulators, in the lane and one shuffle round),
# ab/P = this tree (that epilogue and the groups prep kernel over many rows):
#   rm -rf ab && mkdir -p ab/N ab/E ab/P && git archive 767eb99 escha_jit templates tuning | tar -x -C ab/N
#   git archive d0f86da escha_jit templates tuning | tar -x -C ab/E
#   git archive HEAD escha_jit templates tuning | tar -x -C ab/P
#   check    the GPU GEMM tests and the prep tests on this tree, then the prep kernel alone, lane
#            against groups (bench_prep, f16 / bf16, M = 1024 / 4096)
#   gemm     the GEMM call (prep + GEMM, bench_gemm_parts), ab/N against ab/E against ab/P
#   prefill  bench_linear's prefill cells at M = 1024 (the shipped routes), ab/N against ab/P
#   suite    the whole GPU suite on this tree
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
nvidia-smi -L
case "${1:-}" in
  check)
    ESCHA_JIT_CACHE_DIR=/tmp/ec timeout ${T:-260} python3 -m pytest -q -n 8 tests/test_gpu_gemm.py \
      "tests/test_gpu_kernels.py::test_prep_groups_same_bits" "tests/test_gpu_kernels.py::test_prep_rows_any_alignment" \
      "tests/test_gpu_kernels.py::test_prep_row_segments_same_bits" > "$OUT/pytest_check_s59.log" 2>&1
    tail -3 "$OUT/pytest_check_s59.log"
    for dt in f16 bf16; do
      ESCHA_JIT_CACHE_DIR=/tmp/ec timeout ${TB:-90} python3 benchmarks/bench_prep.py --ms 1024,4096 --ics 4096,11008,14336 \
        --segments 1 --kernels lane,groups --dtype $dt --out "$OUT/prep_groups_${dt}_s59.json" > "$OUT/prep_groups_${dt}_s59.log" 2>&1
      cat "$OUT/prep_groups_${dt}_s59.log"
    done ;;
  gemm)
    BENCH=gemm BENCH_ARGS="--shapes 4096x4096,4096x14336,14336x4096,8192x28672 --ms 1024,4096 --K 2 --codebooks mcg" ROUNDS=2 \
      OUT=$OUT/ab_gemm_s59 timeout ${TG:-540} bash scripts/ab_trees.sh ab/N ab/E ab/P | tail -8 ;;
  prefill)
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024}" PREBUILD_ARGS="--ms= --prefill" ROUNDS=2 \
      OUT=$OUT/ab_prefill_s59 timeout ${TP:-540} bash scripts/ab_trees.sh ab/N ab/P | tail -8 ;;
  suite)
    export ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout ${T:-540} python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
      tests/test_nvrtc.py > "$OUT/pytest_gpu_s59.log" 2>&1; tail -3 "$OUT/pytest_gpu_s59.log" ;;
  *) echo "usage: $0 check|gemm|prefill|suite"; exit 2 ;;
esac

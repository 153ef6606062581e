#!/usr/bin/env bash
# Session 57's device steps (benchmarks/RESULTS.md session 57). Any card; the reply names it.
#   suite    the whole GPU suite on this tree (the coded GEMM's epilogue in row batches, the Hadamard's
#            butterflies as fmas: every kernel that rotates)
#   epi      interleaved A/Bs of ab/O (b53fca6, session 56's main) against ab/N (this tree): the coded
#            GEMM alone (bench_gemm_parts, share 1, K2, 4 shapes, M = 1024 / 4096), then bench_linear's
#            prefill cells at M = 1024 (the shipped routes):
#              rm -rf ab && mkdir -p ab/O ab/N && git archive b53fca6 escha_jit templates tuning | tar -x -C ab/O
#              git archive HEAD escha_jit templates tuning | tar -x -C ab/N      (carry=["ab"])
#   rows8    ab/N (this tree) against ab/N8 (the same with EPI_ROWS = 8 in templates/gemm.hip.j2), the GEMM
#            alone; then Nsight Compute over this tree's pair kernel ($OUT/ncu_pair_s57):
#              rm -rf ab && mkdir -p ab/N ab/N8 && for t in N N8; do git archive HEAD escha_jit templates tuning | tar -x -C ab/$t; done
#              sed -i 's/constexpr int EPI_ROWS = 4;/constexpr int EPI_ROWS = 8;/' ab/N8/templates/gemm.hip.j2
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
  rows8)
    # the epilogue at 8 rows per warp and batch (ab/N8: this tree with EPI_ROWS = 8) against 4 (ab/N:
    # this tree), the coded GEMM alone; then Nsight Compute over this tree's pair kernel (as session 56's ncu)
    BENCH=gemm BENCH_ARGS="--shapes 4096x4096,4096x14336,14336x4096,8192x28672 --ms 1024,4096 --K 2" ROUNDS=2 \
      OUT=$OUT/ab_gemm_rows8_s57 timeout ${TG:-260} bash scripts/ab_trees.sh ab/N ab/N8 | tail -4
    PROBLEMS=4096x14336:2:mcg:1024,4096x4096:2:mcg:1024 GEMM_VARIANT=share=2 OUT=$OUT/ncu_pair_s57 \
      timeout 200 bash scripts/ncu_fused.sh | tail -3 ;;
  *) echo "usage: $0 suite|epi|rows8"; exit 2 ;;
esac

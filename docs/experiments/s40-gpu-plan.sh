#!/usr/bin/env bash
# Session 40: the A operand ring (FusedConfig.x_ring, merged without s39's lazy chunks) on the GPU.
# Build the tree here first (`bash docs/experiments/s40-gpu-plan.sh tree`: ab/C = this checkout's
# package), then on the device with carry ["ab"], in one call:
#
#   bash docs/experiments/s40-gpu-plan.sh all
#
# tests: the GPU tests of the ring (same bits as the whole K range in shared memory) and of the
#        chunked A operand next to it;
# tune:  the M = 64 fp16 entries of 4096x14336 and 14336x4096 (where session 40's variants won) re-tuned
#        with the ring in the grid (and the old entries' configurations), merged onto the shipped table;
# ab:    the package with the shipped table (ab/C) against the same package with the re-tuned one
#        (ab/N), interleaved, 2 rounds, M = 64 on those shapes.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
case "${1:-}" in
  tree)
    rm -rf ab/C && mkdir -p ab/C && cp -r escha_jit templates tuning ab/C/ && find ab/C -name __pycache__ -prune -exec rm -rf {} + ;;
  tests)
    export PYTHONPATH=$PWD ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout 150 python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "x_ring or xh_chunks or tile_configs" 2>&1 \
      | tee "$OUT/pytest_x_ring_s40.log" | tail -4 ;;
  tune)
    export ESCHA_JIT_CACHE_DIR=/tmp/ect
    timeout 280 python3 benchmarks/tune_shapes.py --buckets 64 --dtypes f16 --shapes 4096x14336,14336x4096 \
      --warps 8,16 --rows 4,8,16 --stages 2,3 --min-blocks 1,2 --xh 1 --cluster 1 --x-ring 0,3 \
      --onto tuning/sm_90.json --out "$OUT/sm_90_m64_ring_s40.json" --report "$OUT/tune_report_m64_ring_s40.json" 2>&1 \
      | grep -v "^tune" | tail -30 ;;
  ab)
    [ -f "$OUT/sm_90_m64_ring_s40.json" ] || { echo "no re-tuned table"; exit 1; }
    rm -rf ab/N && cp -r ab/C ab/N && cp "$OUT/sm_90_m64_ring_s40.json" ab/N/tuning/sm_90.json
    AB_CACHE_DIR=/tmp/abc ROUNDS=2 BENCH_ARGS="--ms=64 --dtypes=f16 --shapes=4096x14336,14336x4096" \
      PREBUILD_ARGS="--ms=64 --dtypes=f16 --shapes=4096x14336,14336x4096" OUT=$OUT/ab bash scripts/ab_trees.sh ab/C ab/N ;;
  all)
    nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
    for step in tests tune ab; do echo "== $step at $SECONDS s"; bash "$0" "$step"; done ;;
  *) echo "usage: $0 tree|tests|tune|ab|all"; exit 2 ;;
esac

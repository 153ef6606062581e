#!/usr/bin/env bash
# Session 40: the A operand ring (FusedConfig.x_ring, merged without s39's lazy chunks) on the GPU.
# Build the tree here first (`bash docs/experiments/s40-gpu-plan.sh tree`: ab/C = this checkout's
# package), then on the device with carry ["ab"], in one call:
#
#   bash docs/experiments/s40-gpu-plan.sh all
#
# tests: the GPU tests of the ring (same bits as the whole K range in shared memory) and of the
#        chunked A operand next to it;
# variants: the M = 64 entries of 4096x14336 and 14336x4096 (where session 40's first variants won)
#        against ring variants of them; the winners (>= 3 % faster) written into a copy of the table;
# ab:    the package with the shipped table (ab/C) against the same package with the re-tuned one
#        (ab/N), interleaved, 2 rounds, M = 64 on those shapes, fp16 and bf16.
#
# Once `tests` passes: x_ring=(0, 3) into autotune/api.py TUNE_GRID (left out until then), and the
# adopted table (after its A/B) into tuning/sm_90.json if the device was an H200.
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
  variants)
    # (a full tune of these 12 problems did not fit the device time left: each entry against three ring
    # variants of it, interleaved, 3 rounds; entries >= 3 % faster adopted into the table)
    P=""; for shape in 4096x14336 14336x4096; do for K in 2 3 4; do for cb in mcg mul1; do P="$P,$shape:$K:$cb:64"; done; done; done
    export ESCHA_JIT_CACHE_DIR=/tmp/ecv
    timeout 200 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16,bf16 \
      --variants "x_ring=3;warps=8,min_blocks=2,x_ring=3;warps=8,min_blocks=2,rows_per_stage=8,x_ring=3" \
      --out "$OUT/ring_variants_m64_s40.json" --adopt "$OUT/sm_90_m64_ring_s40.json" 2>&1 | tee "$OUT/ring_variants_m64_s40.log" | tail -30 ;;
  ab)
    [ -f "$OUT/sm_90_m64_ring_s40.json" ] || { echo "no re-tuned table"; exit 1; }
    rm -rf ab/N && cp -r ab/C ab/N && cp "$OUT/sm_90_m64_ring_s40.json" ab/N/tuning/sm_90.json
    AB_CACHE_DIR=/tmp/abc ROUNDS=2 BENCH_ARGS="--ms=64 --shapes=4096x14336,14336x4096" \
      PREBUILD_ARGS="--ms=64 --shapes=4096x14336,14336x4096" OUT=$OUT/ab bash scripts/ab_trees.sh ab/C ab/N ;;
  all)
    nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
    for step in tests variants ab; do echo "== $step at $SECONDS s"; bash "$0" "$step"; done ;;
  *) echo "usage: $0 tree|tests|variants|ab|all"; exit 2 ;;
esac

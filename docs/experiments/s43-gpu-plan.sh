#!/usr/bin/env bash
# Session 43's device runs. Session 42 had only an H100: its 42 ring entries (M = 32 / 64, one split)
# and the untuned ring choice (kernels/fused.py _ring_fills) have not run on an H200. Build the trees
# here first (`bash docs/experiments/s43-gpu-plan.sh tree`: ab/C = this checkout's package and table,
# ab/P = the same package with the table before session 42, cf9f130's), then on the device with
# carry ["ab"], one step per call (each fits the 600 s call limit):
#
#   suite     the whole GPU suite (new since session 42's 687: test_untuned_ring_at_one_split)
#   ab64 / ab32   the session-42 table against the one before it over the 48 M = 64 / 32 cells
#             (H100: 0.853x / 0.942x); below 1 on an H200 = the entries stay; else revert them
#   heur      the untuned choice before / after _ring_fills on shapes outside the table, M = 24 / 32 / 64
#             (5120x13824: 108 groups, the ring; 2048x14336: 112 groups at the RING_MIN_IC boundary;
#             3584x18944: 148 groups, split-K both)
#   decode    the 144 PERF.md decode cells with the shipped table: the standing figure, 2 runs
#   ring16c   the ring at 1 / 2 splits on the 19 M = 16 entries session 42 could not vary (cluster 2)
#   ringfill  the ring at 1 / 2 splits where the untuned choice keeps split-K (one split fills < 0.8 of the SMs)
#   ringw4    the ring with 4 waves (each A fragment serving 2 tile columns) on the M = 32 / 64 ring entries
#   ring128   the ring at 8 m tiles (M = 128, one split) against the fused default and today's route there
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s43}     # the session that names the result files
problems() {       # the PERF.md problems at bucket M
  local P=""; for s in 4096x4096 4096x14336 14336x4096 8192x28672; do for K in 2 3 4; do for cb in mcg mul1; do
    P="$P,$s:$K:$cb:$1"; done; done; done; echo "${P#,}"
}
ab_tables() {      # M
  AB_CACHE_DIR=/tmp/abc_$1 ROUNDS=2 BENCH_ARGS="--ms=$1" PREBUILD_ARGS="--ms=$1" OUT=$OUT/ab_table_m$1_${TAG} \
    timeout 500 bash scripts/ab_trees.sh ab/P ab/C | tail -3
}
case "${1:-}" in
  tree)
    rm -rf ab/C ab/P && mkdir -p ab/C && cp -r escha_jit templates tuning ab/C/ && find ab/C -name __pycache__ -prune -exec rm -rf {} + \
      && cp -r ab/C ab/P && git show cf9f130:tuning/sm_90.json > ab/P/tuning/sm_90.json ;;
  suite)
    export PYTHONPATH=$PWD ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout 540 python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
      tests/test_nvrtc.py > "$OUT/pytest_gpu_${TAG}.log" 2>&1; tail -3 "$OUT/pytest_gpu_${TAG}.log" ;;
  ab64) nvidia-smi --query-gpu=name --format=csv,noheader; ab_tables 64 ;;
  ab32) nvidia-smi --query-gpu=name --format=csv,noheader; ab_tables 32 ;;
  heur)
    export PYTHONPATH=$PWD ESCHA_JIT_CACHE_DIR=/tmp/ech
    timeout 540 python3 benchmarks/bench_heuristic.py --shapes 5120x13824,2048x14336,3584x18944 --ks 2,3,4 \
      --ms 24,32,64 --out "$OUT/bench_heuristic_ring_${TAG}.json" > "$OUT/bench_heuristic_ring_${TAG}.log" 2>&1
    tail -25 "$OUT/bench_heuristic_ring_${TAG}.log" ;;
  decode)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ecd
    for r in 1 2; do
      timeout 280 python3 benchmarks/bench_linear.py --prefill-ms= --out "$OUT/bench_decode_${TAG}_r$r.json" \
        > "$OUT/bench_decode_${TAG}_r$r.log" 2>&1; tail -3 "$OUT/bench_decode_${TAG}_r$r.log"
    done ;;
  ring16c)
    export ESCHA_JIT_CACHE_DIR=/tmp/ec_r16
    W16="warps=16,rows_per_stage=16,stages=2,min_blocks=1,xh=1,x_ring=3,cluster=1"
    W8="warps=8,rows_per_stage=16,stages=2,min_blocks=2,xh=1,x_ring=3,cluster=1"
    P=""; for s in 4096x4096 4096x14336; do for K in 2 3 4; do for cb in mcg mul1; do P="$P,$s:$K:$cb:16"; done; done; done
    timeout 540 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16,bf16 --rounds 3 \
      --variants "$W16,splits=1;$W16,splits=2;$W8,splits=1;$W8,splits=2" --min-gain 0.03 \
      --out "$OUT/m16_ring_c1_${TAG}.json" --adopt "$OUT/sm_90_m16_ring_c1_${TAG}.json" > "$OUT/m16_ring_c1_${TAG}.log" 2>&1
    tail -1 "$OUT/m16_ring_c1_${TAG}.log" ;;
  ringfill)   # the untuned ring where one split's blocks fill the SMs poorly (_ring_fills: fill < 0.8):
    # 3584x18944 (148 groups, fill 0.56), 18944x3584 (28), 2048x8192 (64), against 5120x27648 (216, 0.82:
    # the ring already); the dispatched choice against the ring at 1 / 2 splits and against itself with a ring
    export ESCHA_JIT_CACHE_DIR=/tmp/ec_rf
    for M in 64 32; do
      if [ "$M" = 64 ]; then R="warps=16,rows_per_stage=8,stages=3,min_blocks=1,xh=1,x_ring=3,cluster=1"
      else R="warps=16,rows_per_stage=16,stages=2,min_blocks=1,xh=1,x_ring=3,cluster=1"; fi
      P=""; for s in 3584x18944 18944x3584 2048x8192 5120x27648; do for K in 2 4; do for cb in mcg mul1; do
        P="$P,$s:$K:$cb:$M"; done; done; done
      timeout 200 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds 3 \
        --variants "$R,splits=1;$R,splits=2;x_ring=3,cluster=1" --out "$OUT/ring_fill_m${M}_${TAG}.json" \
        > "$OUT/ring_fill_m${M}_${TAG}.log" 2>&1
      tail -2 "$OUT/ring_fill_m${M}_${TAG}.log"
    done ;;
  ringw4)    # 4 waves (2 tile columns per wave: each A fragment serves both) with the ring, 2 blocks per SM, against
    # the ring entries of 4096x14336 / 8192x28672 (16 waves, 1 tile column per wave). SASS model (sass_stats.py,
    # results/2026-12-05_cpu_sass_stats_ring_waves_s43.json, K2 mcg): M = 64 15.34 SM cycles per tile, issue-bound,
    # against 18.38 shared-memory-bound at 8 / 16 waves; M = 32 (16 rows x 2 stages) 12.84 against 13.88. Compiled
    # here (NVRTC 13.5, f16, K 2/3/4, mcg / mul1): M = 64 8 rows x 3 stages 182-227 registers, M = 32 8 x 3
    # 137-167, no spills (M = 32 at 16 x 2 spills 344-352 bytes on mul1 K3 / K4); 72-84 KB at M = 64, so 2
    # blocks per SM: 8 warps per SM instead of 16. 8192x28672 at one split: 224 blocks, one round.
    # Third variant: 8 waves as 2 K slices x 4 waves of 2 tile columns (FusedConfig.k_slices, now only in
    # docs/experiments/s43-k-slices.diff: apply it first), one block per SM holding the whole K range: the same
    # reuse, 8 warps per SM, no partials (M = 64 15.31 cycles per tile, 182-227 registers; M = 32 13.11-14.05).
    # Session 44 (H100, f16, 2 rounds): every variant slower than the shipped ring entries (4 waves 1.12-2.14x,
    # 2 K slices 1.00-1.10x); benchmarks/RESULTS.md "Session 44"
    export ESCHA_JIT_CACHE_DIR=/tmp/ec_w4
    R="warps=4,rows_per_stage=8,stages=3,min_blocks=2,xh=1,x_ring=3,cluster=1"
    KS="warps=8,k_slices=2,rows_per_stage=8,stages=3,min_blocks=1,xh=1,x_ring=3,cluster=1"
    for M in ${MS:-64 32}; do      # MS: a subset, for shorter calls
      P=""; for s in 4096x14336 8192x28672; do for K in 2 3 4; do for cb in mcg mul1; do P="$P,$s:$K:$cb:$M"; done; done; done
      timeout 270 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16,bf16 --rounds 3 \
        --variants "$R,splits=1;$R,splits=2;$KS,splits=1" --min-gain 0.03 --out "$OUT/ring_w4_m${M}_${TAG}.json" \
        --adopt "$OUT/sm_90_ring_w4_m${M}_${TAG}.json" > "$OUT/ring_w4_m${M}_${TAG}.log" 2>&1
      tail -1 "$OUT/ring_w4_m${M}_${TAG}.log"
    done ;;
  ring128)   # the ring at 8 m tiles, one split (sm_90, NVRTC 13.5: 16 waves x 4 rows x 3 stages 127-128 registers,
    # 122-134 KB, 16-byte spills at K2 mul1 / K4 mcg, clean at K3 and the others; 8 waves 149-210 registers,
    # clean; 16 waves x 8 rows and x 4 x 2 spill 16-24 bytes) against the fused default and the route ops.linear takes
    # at M = 128 today (dense weight / coded GEMM: 4096x14336 0.52x dense bf16, 8192x28672 0.89x, session 38).
    # Low priority: the SASS model (benchmarks/sass_stats.py, results/2026-12-05_cpu_sass_stats_ring_m128_s43.json)
    # puts its main loop at 34.75 SM cycles per tile, bound by the shared-memory pipe (each wave reloads
    # all 8 m tiles of A per tile column), against 18.38 at 4 m tiles: ~1.9x the M = 64 loop, which would
    # not beat today's route on 4096x14336 (~63 us) nor on 8192x28672 (~227 us)
    export ESCHA_JIT_CACHE_DIR=/tmp/ec_r128
    R="m_tiles=8,min_blocks=1,xh=1,x_ring=3,cluster=1,splits=1"
    P=""; for s in 4096x14336 8192x28672 5120x13824; do for K in 2 4; do for cb in mcg mul1; do
      P="$P,$s:$K:$cb:128"; done; done; done
    timeout 330 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds 3 \
      --variants "warps=16,rows_per_stage=4,stages=3,$R;warps=8,rows_per_stage=4,stages=3,$R;warps=8,rows_per_stage=8,stages=3,$R" \
      --out "$OUT/ring128_${TAG}.json" > "$OUT/ring128_${TAG}.log" 2>&1; tail -1 "$OUT/ring128_${TAG}.log"
    timeout 200 python3 benchmarks/bench_linear.py --ms=128 --prefill-ms= --shapes 4096x14336,8192x28672,5120x13824 \
      --ks 2,4 --dtypes f16 --out "$OUT/route128_${TAG}.json" > "$OUT/route128_${TAG}.log" 2>&1; tail -2 "$OUT/route128_${TAG}.log" ;;
  *) echo "usage: $0 tree|suite|ab64|ab32|heur|decode|ring16c|ringfill|ringw4|ring128"; exit 2 ;;
esac

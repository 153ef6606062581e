#!/usr/bin/env bash
# Session 42's device runs (what session 41 left for lack of device time). Build the tree here first
# (`bash docs/experiments/s42-gpu-plan.sh tree`: ab/C = this checkout's package and table), then on
# the device with carry ["ab"], one step per call (each fits the 600 s call limit):
#
#   suite   the whole GPU suite on this tree (session 41 ran it on e4e6fdc, on an H100: 687 passed;
#           since then the table's ring and level entries and tests/test_bench_variants.py)
#   decode  the 144 PERF.md decode cells with the shipped table (session 41 moved 11 M = 16 entries to
#           re-checked ptxas levels after its last full run): the standing figure, 2 runs
#   levels BUCKET   (1 or 4) each of that bucket's 48 entries at ptxas levels -1 / 0 / 10, the ones
#           >= 2 % faster adopted into $OUT/sm_90_m<BUCKET>_levels_s42.json (written after every
#           problem: a cut run keeps its part), then an A/B of that table against the shipped one
#           over the bucket's cells. Session 41's M = 16 pass: 11 of 48, 0.9878x the time.
#   ring64 / ring32   the M = 64 / 32 entries against A operand ring variants at FEWER splits: the ring
#           lets a block hold its whole K range (S = 1: 4096x14336's 112 blocks with no partials, no
#           finishing block), which the A operand in shared memory never allowed (64 rows x 4096 fp16
#           = 512 KB). Session 40/41 timed rings only at each entry's own split (0.83-0.96x at M = 64);
#           the per-block trace (M = 64, S = 4) had the main loop at about half of a block's time.
#           Variants (no spills, sm_90 NVRTC 13.5, session 41): 16 waves with 8 rows x 3 stages
#           (133-158 KB at M = 64), 8 waves at 2 blocks per SM; adopted at >= 3 %, A/B'd
#
# A table whose A/B is below 1 goes into tuning/sm_90.json if the device was an H200 (the entries
# carry what they replaced; merge only the entries with "adopted", as session 41 did).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
problems() {       # the PERF.md problems at bucket M
  local P=""; for s in 4096x4096 4096x14336 14336x4096 8192x28672; do for K in 2 3 4; do for cb in mcg mul1; do
    P="$P,$s:$K:$cb:$1"; done; done; done; echo "${P#,}"
}
adopt_and_ab() {   # M, variants, min gain, tag
  export ESCHA_JIT_CACHE_DIR=/tmp/ec_$4
  timeout 330 python3 benchmarks/bench_variants.py --problems "$(problems "$1")" --dtypes f16,bf16 --rounds 3 \
    --variants "$2" --min-gain "$3" --out "$OUT/$4.json" --adopt "$OUT/sm_90_$4.json" > "$OUT/$4.log" 2>&1
  tail -1 "$OUT/$4.log"
  [ -f "$OUT/sm_90_$4.json" ] || { echo "no adopted table"; return 1; }
  rm -rf ab/N && cp -r ab/C ab/N && cp "$OUT/sm_90_$4.json" ab/N/tuning/sm_90.json
  AB_CACHE_DIR=/tmp/abc_$4 ROUNDS=2 BENCH_ARGS="--ms=$1" PREBUILD_ARGS="--ms=$1" OUT=$OUT/ab_$4 \
    timeout 230 bash scripts/ab_trees.sh ab/C ab/N | tail -3
}
case "${1:-}" in
  tree)
    rm -rf ab/C && mkdir -p ab/C && cp -r escha_jit templates tuning ab/C/ && find ab/C -name __pycache__ -prune -exec rm -rf {} + ;;
  suite)
    export PYTHONPATH=$PWD ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout 540 python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
      tests/test_nvrtc.py > "$OUT/pytest_gpu_s42.log" 2>&1; tail -3 "$OUT/pytest_gpu_s42.log" ;;
  decode)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ecd
    for r in 1 2; do
      timeout 280 python3 benchmarks/bench_linear.py --prefill-ms= --out "$OUT/bench_decode_s42_r$r.json" \
        > "$OUT/bench_decode_s42_r$r.log" 2>&1; tail -3 "$OUT/bench_decode_s42_r$r.log"
    done ;;
  levels)
    [ "${2:-}" = 1 ] || [ "${2:-}" = 4 ] || { echo "levels 1|4"; exit 2; }
    adopt_and_ab "$2" "reg_level=-1;reg_level=0;reg_level=10" 0.02 "m$2_levels_s42" ;;
  ring64)
    W16="warps=16,rows_per_stage=8,stages=3,min_blocks=1,xh=1,x_ring=3"; W8="warps=8,rows_per_stage=8,stages=2,min_blocks=2,xh=1,x_ring=3"
    adopt_and_ab 64 "$W16,splits=1;$W16,splits=2;$W8,splits=1;$W8,splits=2" 0.03 "m64_ring_s42" ;;
  ring32)
    W16="warps=16,rows_per_stage=16,stages=2,min_blocks=1,xh=1,x_ring=3"; W8="warps=8,rows_per_stage=8,stages=2,min_blocks=2,xh=1,x_ring=3"
    adopt_and_ab 32 "$W16,splits=1;$W16,splits=2;$W8,splits=1;$W8,splits=2" 0.03 "m32_ring_s42" ;;
  ring16)           # one m tile: the grid leaves rings out there (candidates.py); 8192x28672 needs S >= 2 without
    W16="warps=16,rows_per_stage=16,stages=2,min_blocks=1,xh=1,x_ring=3"; W8="warps=8,rows_per_stage=16,stages=2,min_blocks=2,xh=1,x_ring=3"
    adopt_and_ab 16 "$W16,splits=1;$W16,splits=2;$W8,splits=1;$W8,splits=2" 0.03 "m16_ring_s42" ;;
  *) echo "usage: $0 tree|suite|decode|levels 1|levels 4|ring64|ring32|ring16"; exit 2 ;;
esac

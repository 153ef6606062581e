#!/usr/bin/env bash
# Session 39 had no GPU. What its work needs from the next lease, in order (run from the repository
# root on the device machine with carry ["ab"] after `bash docs/experiments/s39-gpu-plan.sh trees`
# here; each step fits one device call of <= 600 s):
#
#   bash docs/experiments/s39-gpu-plan.sh trees      # (CPU, here) ab/H = HEAD, ab/L = lazy chunks
#                                                    # (2 sent ahead), ab/L1 = 1 sent ahead, ab/L8 =
#                                                    # lazy + 8 chunks on every launch, ab/B = the
#                                                    # finishing block's loads together, ab/R =
#                                                    # lazy chunks + the A operand in a ring (x_ring)
#   bash docs/experiments/s39-gpu-plan.sh gemm       # the GPU tests of the coded GEMM: its barriers
#                                                    # moved to dynamic shared memory in 6808a84
#   bash docs/experiments/s39-gpu-plan.sh ab1        # H / L / L1 at M = 16 (fp16; PERF.md's decode cells)
#   bash docs/experiments/s39-gpu-plan.sh ab2        # H / L / L8 at M = 32, 64 (fp16, K 2 / 4)
#   bash docs/experiments/s39-gpu-plan.sh ab3        # H / B / LB (lazy + B) at M = 1, 4, 16, 64 (fp16, K 2 / 4)
#   bash docs/experiments/s39-gpu-plan.sh ring       # in ab/R: the M = 32 / 64 entries against x_ring
#                                                    # variants that fit 2 blocks per SM
#   TREE=ab/L bash docs/experiments/s39-gpu-plan.sh tune16   # the M = 16 entries re-tuned in a
#                                                    # winning tree (the new table in $OUT: copy it
#                                                    # into a copy of the tree and A/B the two trees)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
tree() {      # tree NAME DIFF...: HEAD's package with the diffs applied
  local name=$1; shift
  rm -rf "ab/$name"; mkdir -p "ab/$name"
  git archive HEAD escha_jit templates tuning | tar -x -C "ab/$name"
  for d in "$@"; do      # (the package part of each diff; its tests run on the CPU)
    git apply --directory="ab/$name" --include="ab/$name/escha_jit/*" --include="ab/$name/templates/*" \
      "docs/experiments/$d" || exit 1
  done
}
case "${1:-}" in
  trees)
    tree H
    tree L s39-lazy-x-chunks.diff
    tree L1 s39-lazy-x-chunks.diff
    sed -i 's/static constexpr int X_AHEAD = 2;/static constexpr int X_AHEAD = 1;/' ab/L1/templates/include/escha/fused.h
    grep -q "X_AHEAD = 1;" ab/L1/templates/include/escha/fused.h || exit 1
    tree L8 s39-lazy-x-chunks.diff s39-lazy-x-chunks-all-launches.diff
    tree B s39-last-block-loads.diff
    tree LB s39-lazy-x-chunks.diff s39-last-block-loads.diff
    tree R s39-x-ring.diff ;;
  gemm)
    export PYTHONPATH=$PWD ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout 560 python3 -m pytest -q -n 8 tests/test_gpu_gemm.py 2>&1 | tee "$OUT/pytest_gemm_s39.log" | tail -5 ;;
  ab1)
    AB_CACHE_DIR=/tmp/abc ROUNDS=2 BENCH_ARGS="--ms=16 --dtypes=f16" PREBUILD_ARGS="--ms=16 --dtypes=f16" \
      bash scripts/ab_trees.sh ab/H ab/L ab/L1 ;;
  ab2)
    AB_CACHE_DIR=/tmp/abc ROUNDS=2 BENCH_ARGS="--ms=32,64 --dtypes=f16 --ks=2,4" \
      PREBUILD_ARGS="--ms=32,64 --dtypes=f16 --ks=2,4" bash scripts/ab_trees.sh ab/H ab/L ab/L8 ;;
  ab3)
    AB_CACHE_DIR=/tmp/abc ROUNDS=2 BENCH_ARGS="--ms=1,4,16,64 --dtypes=f16 --ks=2,4" \
      PREBUILD_ARGS="--ms=1,4,16,64 --dtypes=f16 --ks=2,4" bash scripts/ab_trees.sh ab/H ab/B ab/LB ;;
  ring)
    # (the variants keep the entry's splits; 8 waves with 2 blocks per SM is what the ring makes fit)
    mkdir -p ab/R/benchmarks && cp -r benchmarks/*.py benchmarks/baselines ab/R/benchmarks/
    export ESCHA_JIT_CACHE_DIR=/tmp/ecr
    timeout 560 python3 ab/R/benchmarks/bench_variants.py --dtypes f16 \
      --problems 4096x14336:2:mcg:64,4096x4096:2:mcg:64,14336x4096:2:mcg:64,8192x28672:2:mcg:64,4096x14336:4:mul1:32,4096x4096:4:mul1:32 \
      --variants "x_ring=2;warps=8,min_blocks=2,x_ring=3;warps=8,min_blocks=2,rows_per_stage=8,x_ring=3;warps=8,min_blocks=2,rows_per_stage=8,stages=3,x_ring=4" \
      --out "$OUT/ring_variants_s39.json" 2>&1 | tee "$OUT/ring_variants_s39.log" | tail -30
    # where a ring block's time goes, next to the entry's (session 38's trace of the same problem)
    timeout 120 python3 ab/R/benchmarks/trace_fused.py --out "$OUT/trace_ring_s39.json" \
      --problems 4096x14336:2:mcg:64,4096x14336:2:mcg:64:warps=8:min_blocks=2:rows_per_stage=8:x_ring=3 \
      2>&1 | tee "$OUT/trace_ring_s39.log" | tail -20 ;;
  tune16)
    # (a kernel change moves which configuration wins: session 12 re-tuned M = 16 after the chunks)
    mkdir -p "$TREE/benchmarks" && cp -r benchmarks/*.py benchmarks/baselines "$TREE/benchmarks/"
    export ESCHA_JIT_CACHE_DIR=/tmp/ect
    timeout 560 python3 "$TREE/benchmarks/tune_shapes.py" --buckets 16 --dtypes f16 --onto "$TREE/tuning/sm_90.json" \
      --out "$OUT/sm_90_m16_retuned_s39.json" 2>&1 | tail -20 ;;
  batch)
    # (session 40: device starts were scarce; every step in one call, each A/B's files in its own
    # folder of $OUT, a step skipped once the call has run $BUDGET seconds)
    t0=$SECONDS; root=$OUT
    for step in gemm ab1 ab3 ab2; do
      [ $((SECONDS - t0)) -lt "${BUDGET:-420}" ] || { echo "skipped $step"; continue; }
      echo "== $step at $((SECONDS - t0)) s"
      OUT=$root/$step bash "$0" "$step" 2>&1 | tail -40
    done ;;
  *) echo "usage: $0 trees|gemm|ab1|ab2|ab3|ring|tune16|batch"; exit 2 ;;
esac

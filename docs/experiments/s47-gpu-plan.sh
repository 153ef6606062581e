#!/usr/bin/env bash
# Session 47's device runs: session 46's split-cluster entries (measured only on an H100) on an H200.
#   decode  the standing figure (144 decode cells, bench_linear.py) of this checkout, kernels prebuilt first
#   scab    interleaved A/B over 4096x14336's 36 decode cells: ab/U (this checkout's package with the
#           table before the split-cluster entries, 732c597) against ab/S (this checkout's)
#   suite   the whole GPU suite (this checkout)
#   refine  tune()'s split-cluster refine step (autotune/split_clusters.py) on the shipped table's entries
#           of the four PERF.md shapes at M = 1 / 4 / 16, f16 and bf16 (tune_shapes.py --refine-only), the
#           refine GPU test first; writes $OUT/sm_90_refine_${TAG}.json; then `abref` A/Bs it: ab/S (this
#           checkout) against ab/R (the same with that table), every decode cell
#   pdl     is it co-scheduling under PDL that makes split clusters lose on 4096x4096 / 14336x4096 (session
#           46)? The M = 1 / 4 f16 cells of both against split clusters at S = own / 2 / 4 / 8, once as
#           shipped and once with ESCHA_JIT_NO_PDL=1 (every launch an ordinary kernel)
# Build first: rm -rf ab && mkdir -p ab/U ab/S && git archive HEAD escha_jit templates tuning | tar -x -C ab/S
#   && git archive HEAD escha_jit templates | tar -x -C ab/U && git archive 732c597 tuning | tar -x -C ab/U
# then run with carry=["ab"].
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s47}
case "${1:-}" in
  decode)   # the standing figure as session 46 took it (its plan's decode step, this TAG and OUT)
    TAG=$TAG OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  scab)
    nvidia-smi --query-gpu=name --format=csv,noheader
    AB_CACHE_DIR=/tmp/abc ROUNDS=${ROUNDS:-4} BENCH_ARGS="--shapes 4096x14336" PREBUILD_ARGS="--shapes 4096x14336" \
      OUT=$OUT/ab_sc_${TAG} timeout ${T:-300} bash scripts/ab_trees.sh ab/U ab/S | tail -8 ;;
  suite)    # the whole GPU suite as session 45 ran it (its plan's suite step)
    TAG=$TAG OUT=$OUT bash docs/experiments/s45-gpu-plan.sh suite ;;
  refine)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ecr PYTHONPATH=$PWD
    timeout 200 python3 -m pytest -q tests/test_gpu_autotune.py -k refine > "$OUT/pytest_refine_${TAG}.log" 2>&1
    tail -1 "$OUT/pytest_refine_${TAG}.log"
    timeout ${T:-420} python3 benchmarks/tune_shapes.py --refine-only tuning/sm_90.json --steps split_cluster \
      --shapes 4096x4096,4096x14336,14336x4096,8192x28672 --buckets 1,4,16 --out "$OUT/sm_90_refine_${TAG}.json" \
      --report "$OUT/refine_${TAG}.json" > "$OUT/refine_${TAG}.log" 2>&1; grep -E "entries changed|Error" "$OUT/refine_${TAG}.log" ;;
  abref)
    nvidia-smi --query-gpu=name --format=csv,noheader
    rm -rf ab/R && cp -r ab/S ab/R && cp "${TABLE:-$OUT/sm_90_refine_${TAG}.json}" ab/R/tuning/sm_90.json
    AB_CACHE_DIR=/tmp/abc ROUNDS=${ROUNDS:-2} OUT=$OUT/ab_refine_${TAG} timeout ${T:-500} bash scripts/ab_trees.sh ab/S ab/R | tail -6 ;;
  pdl)
    nvidia-smi --query-gpu=name --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/abc PYTHONPATH=$PWD
    python3 scripts/prebuild_variant.py --set split_cluster=1 --dtypes f16 --shapes 4096x4096,14336x4096 --ms 1,4 2>&1 | tail -1
    P=""; for s in 4096x4096 14336x4096; do for K in 2 3 4; do for cb in mcg mul1; do
      for M in 1 4; do P="$P,$s:$K:$cb:$M"; done; done; done; done
    for pdl in 1 0; do
      ESCHA_JIT_NO_PDL=$((1 - pdl)) timeout ${T:-250} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 \
        --rounds 2 --variants "split_cluster=1;split_cluster=1,splits=2;split_cluster=1,splits=4;split_cluster=1,splits=8" \
        --out "$OUT/pdl${pdl}_sc_${TAG}.json" > "$OUT/pdl${pdl}_sc_${TAG}.log" 2>&1; tail -1 "$OUT/pdl${pdl}_sc_${TAG}.log"
    done ;;
  mb3)   # residency: clusters of 8 hold 240 of 4096x4096's 256 blocks at 2 per SM; at min_blocks 3 (<= 168
    # registers) they would all fit. The same cells against min_blocks=3 with and without split clusters
    nvidia-smi --query-gpu=name --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/abc PYTHONPATH=$PWD
    python3 scripts/prebuild_variant.py --set split_cluster=1,min_blocks=3 --dtypes f16 --shapes 4096x4096,14336x4096 --ms 1,4 2>&1 | tail -1
    python3 scripts/prebuild_variant.py --set min_blocks=3 --dtypes f16 --shapes 4096x4096,14336x4096 --ms 1,4 2>&1 | tail -1
    P=""; for s in 4096x4096 14336x4096; do for K in 2 3 4; do for cb in mcg mul1; do
      for M in 1 4; do P="$P,$s:$K:$cb:$M"; done; done; done; done
    timeout ${T:-250} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds 2 \
      --variants "min_blocks=3;split_cluster=1,min_blocks=3;split_cluster=1,min_blocks=3,splits=8" \
      --out "$OUT/mb3_sc_${TAG}.json" > "$OUT/mb3_sc_${TAG}.log" 2>&1; tail -3 "$OUT/mb3_sc_${TAG}.log" ;;
  late)   # the trace (trace_fused.py) of a split-cluster launch on 4096x4096 puts the last block's dependency
    # wait 5.5 us after the first (0.2 without clusters): the next call's clusters, scheduled at block start
    # (PDL), take slots before this call's last clusters are placed? ab/D = this checkout with split-cluster
    # kernels letting their dependents launch after the main loop (docs/experiments/s47-sc-late-dependents.diff)
    nvidia-smi --query-gpu=name --format=csv,noheader
    P=""; for s in 4096x4096 14336x4096; do for K in 2 3 4; do for cb in mcg mul1; do
      for M in 1 4; do P="$P,$s:$K:$cb:$M"; done; done; done; done
    V="split_cluster=1;split_cluster=1,min_blocks=3;split_cluster=1,splits=4"
    (cd ab/D && export ESCHA_JIT_CACHE_DIR=/tmp/abd PYTHONPATH=$PWD
     mkdir -p scripts && cp ../../scripts/*.py scripts/ && python3 scripts/prebuild_variant.py --table tuning/sm_90.json --set split_cluster=1 --dtypes f16 --shapes 4096x4096,14336x4096 --ms 1,4 2>&1 | tail -1
     timeout 200 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds 2 --variants "$V" \
       --out "$OUT/late_sc_${TAG}.json" > "$OUT/late_sc_${TAG}.log" 2>&1; tail -1 "$OUT/late_sc_${TAG}.log"
     timeout 100 python3 benchmarks/trace_fused.py --problems 4096x4096:2:mcg:1:split_cluster=1,4096x4096:2:mcg:1:split_cluster=1:min_blocks=3 \
       --out "$OUT/late_trace_${TAG}.json" > "$OUT/late_trace_${TAG}.log" 2>&1; grep "last block at" "$OUT/late_trace_${TAG}.log")
    export ESCHA_JIT_CACHE_DIR=/tmp/abc PYTHONPATH=$PWD
    ESCHA_JIT_NO_PDL=1 timeout 150 python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds 2 \
      --variants "split_cluster=1,min_blocks=3" --out "$OUT/nopdl_mb3_sc_${TAG}.json" > "$OUT/nopdl_mb3_sc_${TAG}.log" 2>&1
    tail -1 "$OUT/nopdl_mb3_sc_${TAG}.log" ;;
  *) echo "usage: $0 decode|scab|suite|refine|abref|pdl|mb3|late"; exit 2 ;;
esac

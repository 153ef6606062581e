#!/usr/bin/env bash
# Session 46's device runs: the launch's blocks per SM (FusedLaunch.blocks_per_sm) as a tuning axis.
# Session 45's "held at the former blocks per SM" A/B (0.994x) pinned with CPU register counts, which
# put some kernels below the occupancy they run at on the GPU; pinned at the GPU's own occupancy
# (session 46, stamp_occupancy.py) the same change took 1.008x. So: do some entries run faster with
# fewer blocks per SM than fit?
#   occ   every f16 decode cell whose kernel fits >= 2 blocks per SM (56 of 72, session 46's stamp on an
#         H100) timed at each lower cap (bench_variants.py blocks_per_sm=1..4, 3 rounds); the entries
#         >= 2 % faster adopted into a table (ab/P), then an interleaved A/B of ab/O (this checkout's
#         package) against ab/P over the 72 f16 cells
#   stamped  see below
#   decode   the standing figure (144 decode cells) of this checkout, kernels prebuilt first
#   sc       FusedConfig.split_cluster (the split-K partials through a cluster's shared memory): GPU test
#            and every f16 decode cell against it
# Build first: rm -rf ab && mkdir -p ab/O && git archive HEAD escha_jit templates tuning | tar -x -C ab/O
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s46}
case "${1:-}" in
  occ)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/abc PYTHONPATH=$PWD
    python3 scripts/ab_prebuild.py ab/O --dtypes f16 > "$OUT/prebuild_${TAG}.log" 2>&1; tail -1 "$OUT/prebuild_${TAG}.log"
    P=${PROBLEMS:-14336x4096:2:mcg:1,14336x4096:2:mcg:4,4096x14336:2:mcg:1,4096x14336:2:mcg:4,4096x4096:2:mcg:1,4096x4096:2:mcg:4,8192x28672:2:mcg:1,8192x28672:2:mcg:16,8192x28672:2:mcg:4,14336x4096:2:mul1:1,14336x4096:2:mul1:4,4096x14336:2:mul1:1,4096x14336:2:mul1:4,4096x4096:2:mul1:1,4096x4096:2:mul1:16,4096x4096:2:mul1:4,8192x28672:2:mul1:1,8192x28672:2:mul1:16,8192x28672:2:mul1:4,14336x4096:3:mcg:1,14336x4096:3:mcg:4,4096x14336:3:mcg:1,4096x14336:3:mcg:4,4096x4096:3:mcg:1,4096x4096:3:mcg:4,8192x28672:3:mcg:1,8192x28672:3:mcg:16,8192x28672:3:mcg:4,14336x4096:3:mul1:1,14336x4096:3:mul1:16,14336x4096:3:mul1:4,4096x14336:3:mul1:1,4096x14336:3:mul1:4,4096x4096:3:mul1:1,4096x4096:3:mul1:16,4096x4096:3:mul1:4,8192x28672:3:mul1:1,8192x28672:3:mul1:16,8192x28672:3:mul1:4,14336x4096:4:mcg:1,14336x4096:4:mcg:4,4096x14336:4:mcg:1,4096x4096:4:mcg:1,4096x4096:4:mcg:16,4096x4096:4:mcg:4,8192x28672:4:mcg:1,8192x28672:4:mcg:16,8192x28672:4:mcg:4,14336x4096:4:mul1:1,14336x4096:4:mul1:4,4096x14336:4:mul1:1,4096x4096:4:mul1:1,4096x4096:4:mul1:4,8192x28672:4:mul1:1,8192x28672:4:mul1:16,8192x28672:4:mul1:4}
    timeout ${T:-300} python3 benchmarks/bench_variants.py --problems "$P" --dtypes f16 --rounds 3 \
      --variants "blocks_per_sm=1;blocks_per_sm=2;blocks_per_sm=3;blocks_per_sm=4" --min-gain 0.02 \
      --out "$OUT/occ_variants_${TAG}.json" --adopt "$OUT/sm_90_occ_${TAG}.json" > "$OUT/occ_variants_${TAG}.log" 2>&1
    grep -c "^[0-9]" "$OUT/occ_variants_${TAG}.log"; tail -1 "$OUT/occ_variants_${TAG}.log"
    rm -rf ab/P && cp -r ab/O ab/P && cp "$OUT/sm_90_occ_${TAG}.json" ab/P/tuning/sm_90.json
    AB_CACHE_DIR=/tmp/abc ROUNDS=${ROUNDS:-2} BENCH_ARGS="--dtypes f16" PREBUILD_ARGS="--dtypes f16" \
      OUT=$OUT/ab_occ_${TAG} timeout ${T2:-240} bash scripts/ab_trees.sh ab/O ab/P | tail -5 ;;
  stamped)   # the shipped table stamped (732c597): does any pin differ from this machine's kernels, the
    # occupancy GPU test, and an A/B of ab/U (b19d29a's table, unstamped) against ab/S (this checkout's)
    export ESCHA_JIT_CACHE_DIR=/tmp/abc
    timeout 200 python3 benchmarks/stamp_occupancy.py --check > "$OUT/stamp_check_${TAG}.log" 2>&1; tail -3 "$OUT/stamp_check_${TAG}.log"
    timeout 120 python3 -m pytest -q tests/test_gpu_kernels.py -k pinned_occupancy 2>&1 | tail -1
    AB_CACHE_DIR=/tmp/abc ROUNDS=${ROUNDS:-2} BENCH_ARGS="--dtypes f16" PREBUILD_ARGS="--dtypes f16" \
      OUT=$OUT/ab_stamped_${TAG} timeout ${T2:-240} bash scripts/ab_trees.sh ab/U ab/S | tail -5 ;;
  decode)   # the standing figure: the 144 decode cells (bench_linear.py), kernels prebuilt on every core first
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ecd PYTHONPATH=$PWD
    python3 scripts/ab_prebuild.py . > "$OUT/prebuild_decode_${TAG}.log" 2>&1; tail -1 "$OUT/prebuild_decode_${TAG}.log"
    for r in ${RUNS:-1 2}; do
      timeout ${T:-200} python3 benchmarks/bench_linear.py --prefill-ms= --out "$OUT/bench_decode_${TAG}_r$r.json" \
        > "$OUT/bench_decode_${TAG}_r$r.log" 2>&1; tail -3 "$OUT/bench_decode_${TAG}_r$r.log"
    done ;;
  sc)   # FusedConfig.split_cluster: the GPU test (bit-equal to the workspace route), then every f16 decode
    # cell's tuned entry against split clusters at its own and other split counts (2 rounds, order
    # alternating), the entries >= 2 % faster adopted into $OUT/sm_90_sc_${TAG}.json
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/abc PYTHONPATH=$PWD
    python3 scripts/ab_prebuild.py . --dtypes f16 > "$OUT/prebuild_${TAG}.log" 2>&1; tail -1 "$OUT/prebuild_${TAG}.log"
    python3 scripts/prebuild_variant.py --set split_cluster=1 2>&1 | tail -2
    timeout 120 python3 -m pytest -q tests/test_gpu_kernels.py -k "split_cluster" > "$OUT/pytest_sc_${TAG}.log" 2>&1
    tail -2 "$OUT/pytest_sc_${TAG}.log"
    P=""; for s in 4096x4096 4096x14336 14336x4096 8192x28672; do for K in 2 3 4; do for cb in mcg mul1; do
      for M in 1 4 16; do P="$P,$s:$K:$cb:$M"; done; done; done; done
    timeout ${T:-240} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-2} \
      --variants "split_cluster=1;split_cluster=1,splits=2;split_cluster=1,splits=4;split_cluster=1,splits=8" \
      --min-gain 0.02 --out "$OUT/sc_variants_${TAG}.json" --adopt "$OUT/sm_90_sc_${TAG}.json" > "$OUT/sc_variants_${TAG}.log" 2>&1
    grep -c "^[0-9]" "$OUT/sc_variants_${TAG}.log"; tail -1 "$OUT/sc_variants_${TAG}.log" ;;
  scab)   # ab/P = this checkout with the table `sc` adopted (f16); its bf16 twins on 4096x14336 measured the
    # same way and adopted into ab/P, then an A/B of ab/O (this checkout) against ab/P over the 144 cells
    nvidia-smi --query-gpu=name --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/abc
    P=""; for K in 2 3 4; do for cb in mcg mul1; do for M in 1 4; do P="$P,4096x14336:$K:$cb:$M"; done; done; done
    (export PYTHONPATH=$PWD/ab/P; python3 scripts/prebuild_variant.py --table ab/P/tuning/sm_90.json --set split_cluster=1 \
      --dtypes bf16 --shapes 4096x14336 --ms 1,4 2>&1 | tail -1
     cd ab/P && mkdir -p benchmarks && cp ../../benchmarks/*.py benchmarks/ && timeout 90 python3 benchmarks/bench_variants.py \
      --problems "${P#,}" --dtypes bf16 --rounds 2 --variants "split_cluster=1;split_cluster=1,splits=2;split_cluster=1,splits=4" \
      --min-gain 0.02 --out "$OUT/sc_bf16_variants_${TAG}.json" --adopt tuning/sm_90.json > "$OUT/sc_bf16_variants_${TAG}.log" 2>&1
     tail -1 "$OUT/sc_bf16_variants_${TAG}.log"; cp tuning/sm_90.json "$OUT/sm_90_sc_f16_bf16_${TAG}.json")
    AB_CACHE_DIR=/tmp/abc ROUNDS=${ROUNDS:-2} BENCH_ARGS="--shapes 4096x14336" PREBUILD_ARGS="--shapes 4096x14336" \
      OUT=$OUT/ab_sc_${TAG} timeout ${T2:-120} bash scripts/ab_trees.sh ab/O ab/P | tail -5 ;;
  *) echo "usage: $0 occ|stamped|decode|sc|scab"; exit 2 ;;
esac

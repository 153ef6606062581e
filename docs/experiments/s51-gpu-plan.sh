#!/usr/bin/env bash
# Session 51's device runs. The standing figure is an H200 figure, so both steps stop at once on
# any other card (the reply names it).
#   decode  the standing figure (144 decode cells, session 46's step) of this checkout
#   twins   session 50's four twin-adopted table entries against the configs they replaced
# flat, flatdiag, flatshapes: FusedConfig.flat, built and dropped in session 51 (RESULTS.md): the
# steps patch this checkout with docs/experiments/s51-flat.diff first.
#   flat    (any card: ANY_GPU=1) FusedConfig.flat: its GPU tests with the swapped route's, then the 12
#           f16 cells of 4096x14336 M = 1 / 4 against flat variants of their tuned entries (3 rounds,
#           order alternating; bench_variants.py)
# Any card (ANY_GPU=1), each described at its step: sc4, rescan (not run yet), m16bound (not run yet).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
case "$gpu" in *H200*) ;; *) [ -n "${ANY_GPU:-}" ] || { echo "not an H200: skipped"; exit 3; } ;; esac
case "${1:-}" in flat*) patch -p1 -s < docs/experiments/s51-flat.diff || exit 1 ;; esac
case "${1:-}" in
  decode) TAG=${TAG:-s51} OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  twins)  OUT=$OUT bash docs/experiments/s50-twins-check.sh ;;
  flat)
    export ESCHA_JIT_CACHE_DIR=/tmp/ecf
    timeout ${TS:-200} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "flat or swapped or split_cluster_same" \
      > "$OUT/pytest_flat_${TAG:-s51}.log" 2>&1; tail -1 "$OUT/pytest_flat_${TAG:-s51}.log"
    P=""; for K in 2 3 4; do for cb in mcg mul1; do for M in 1 4; do P="$P,4096x14336:$K:$cb:$M"; done; done; done
    F="flat=1,splits=1,split_cluster=0"
    timeout ${T:-330} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-3} \
      --variants "$F,rows_per_stage=8;$F,rows_per_stage=8,stages=3;$F,rows_per_stage=8,warps=4,blocks_per_sm=4" \
      --out "$OUT/flat_variants_${TAG:-s51}.json" > "$OUT/flat_variants_${TAG:-s51}.log" 2>&1
    grep -E "^[0-9]+x[0-9]+" "$OUT/flat_variants_${TAG:-s51}.log" | head -30; tail -2 "$OUT/flat_variants_${TAG:-s51}.log" ;;
  flatdiag)   # (any card) where flat's time goes: the tuned entries without split clusters, and flat at
    # 4 / 3 / 2 blocks per SM (fewer, longer ranges), 6 cells, 3 rounds
    export ESCHA_JIT_CACHE_DIR=/tmp/ecf
    P=4096x14336:2:mcg:1,4096x14336:2:mcg:4,4096x14336:3:mul1:1,4096x14336:4:mcg:1,4096x14336:3:mcg:4,4096x14336:4:mul1:4
    F="flat=1,splits=1,split_cluster=0,rows_per_stage=8"
    timeout ${T:-330} python3 benchmarks/bench_variants.py --problems "$P" --dtypes f16 --rounds ${ROUNDS:-3} \
      --variants "split_cluster=0;$F;$F,blocks_per_sm=3;$F,blocks_per_sm=2" \
      --out "$OUT/flatdiag_${TAG:-s51}.json" > "$OUT/flatdiag_${TAG:-s51}.log" 2>&1
    grep -E "^[0-9]+x[0-9]+" "$OUT/flatdiag_${TAG:-s51}.log" | sed 's/flat=1,splits=1,split_cluster=0,rows_per_stage=8/F/g' ;;
  flatshapes)   # (any card) flat on the other PERF.md shapes: 8192x28672 (224 groups: 1.7 rounds of blocks),
    # 14336x4096 and 4096x4096 (32 groups), M = 1 / 4, K2 mcg / K3 mul1 / K4 mcg, f16, 3 rounds
    export ESCHA_JIT_CACHE_DIR=/tmp/ecf
    P=""; for s in 8192x28672 14336x4096 4096x4096; do for kc in 2:mcg 3:mul1 4:mcg; do for M in 1 4; do
      P="$P,$s:$kc:$M"; done; done; done
    F="flat=1,splits=1,split_cluster=0,rows_per_stage=8"
    timeout ${T:-400} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-3} \
      --variants "$F;$F,blocks_per_sm=4;$F,blocks_per_sm=2" \
      --out "$OUT/flatshapes_${TAG:-s51}.json" > "$OUT/flatshapes_${TAG:-s51}.log" 2>&1
    grep -E "^[0-9]+x[0-9]+" "$OUT/flatshapes_${TAG:-s51}.log" | sed 's/flat=1,splits=1,split_cluster=0,rows_per_stage=8/F/g' ;;
  sc4)   # (any card) split clusters of 4-wave blocks on the 32-group shapes (4096x4096, 14336x4096;
    # M = 1 / 4, K2 mcg / K3 mul1 / K4 mcg, f16): clusters of 8 four-wave blocks span 2 SMs at 4 per SM,
    # where the tuned 8-wave entries' clusters of 8 hold 240 of 264 slots (session 47); 3 rounds
    export ESCHA_JIT_CACHE_DIR=/tmp/ecs
    P=""; for s in 4096x4096 14336x4096; do for kc in 2:mcg 3:mul1 4:mcg; do for M in 1 4; do
      P="$P,$s:$kc:$M"; done; done; done
    W="warps=4,blocks_per_sm=4"
    timeout ${T:-400} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-3} \
      --variants "$W;$W,split_cluster=1;$W,split_cluster=1,rows_per_stage=8;$W,split_cluster=1,splits=4" \
      --out "$OUT/sc4_${TAG:-s51}.json" > "$OUT/sc4_${TAG:-s51}.log" 2>&1
    grep -E "^[0-9]+x[0-9]+" "$OUT/sc4_${TAG:-s51}.log" | sed 's/warps=4,blocks_per_sm=4/W/g' ;;
  rescan)   # (any card) the K3 / K4 mcg entries (whose swapped loops sessions 49-50 changed) against
    # their neighbours in stages and tile rows per stage, f16, 3 rounds; entries >= 3 % faster written
    # to $OUT/sm_90_rescan_$TAG.json (a candidate table: to be confirmed by an A/B before it ships)
    export ESCHA_JIT_CACHE_DIR=/tmp/ecr PYTHONPATH=$PWD
    for v in stages=2 stages=3 rows_per_stage=8 rows_per_stage=16; do
      python3 scripts/prebuild_variant.py --set $v 2>&1 | tail -1; done
    P=""; for s in 4096x4096 4096x14336 14336x4096 8192x28672; do for K in 3 4; do for M in 1 4 16; do
      P="$P,$s:$K:mcg:$M"; done; done; done
    timeout ${T:-420} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-3} \
      --variants "stages=2;stages=3;rows_per_stage=8;rows_per_stage=16" --min-gain 0.03 \
      --out "$OUT/rescan_${TAG:-s51}.json" --adopt "$OUT/sm_90_rescan_${TAG:-s51}.json" > "$OUT/rescan_${TAG:-s51}.log" 2>&1
    grep -E "^[0-9]+x[0-9]+" "$OUT/rescan_${TAG:-s51}.log" | cut -c1-200; tail -1 "$OUT/rescan_${TAG:-s51}.log" ;;
  m16bound)   # (any card) the owner / helper lever's bound before building it (docs/DECODE_BOUNDS.md,
    # "Balancing 4096x14336"): each 4096x14336 M = 16 f16 entry's own configuration on 4096x14336 and on
    # 3584x14336 (an owner's 14 of 16 steps, no helper partial to wait for), 3 rounds; the ratio is the
    # most a helper scheme could take off the call before its tail
    export ESCHA_JIT_CACHE_DIR=/tmp/ecm PYTHONPATH=$PWD
    python3 - "$OUT" <<'PY'
import json, subprocess, sys
out = sys.argv[1]
t = json.load(open("tuning/sm_90.json"))["entries"]
for K in ("2", "3", "4"):
    for cb in ("mcg", "mul1"):
        e = t[f"fused|K{K}|{cb}|4096x14336|f16|M16"]
        c = {k: v for k, v in e["config"].items() if k not in ("diag",)}
        var = ",".join(f"{k}={int(v)}" for k, v in c.items()) + f",splits=1,blocks_per_sm={e['launch']['blocks_per_sm']}"
        probs = f"4096x14336:{K}:{cb}:16,3584x14336:{K}:{cb}:16"
        subprocess.run(["python3", "benchmarks/bench_variants.py", "--problems", probs, "--dtypes", "f16",
                        "--rounds", "3", "--variants", var, "--out", f"{out}/m16bound_K{K}_{cb}.json"],
                       check=False, timeout=120)
PY
    ;;
  *) echo "usage: $0 decode|twins|flat|flatdiag|flatshapes|sc4|rescan|m16bound"; exit 2 ;;
esac

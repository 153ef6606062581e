#!/usr/bin/env bash
# Session 48's device runs.
#   decode  the standing figure (144 decode cells, bench_linear.py) of this checkout (session 46's plan step)
#   suite   the whole GPU suite of this checkout (session 45's plan step)
#   scheur  split clusters for UNTUNED shapes: on shapes outside the shipped table (bench_heuristic.py's
#           held-out set) at M = 1 / 4, where the untuned choice runs 2..8 splits, the heuristic's own
#           (config, launch) against its split-cluster twin (bench_variants.py: for an untuned shape the
#           dispatched configuration is the heuristic's), f16, K 2 / 4, mcg / mul1, 2 rounds
#   scnew   after the untuned choice takes split clusters where the driver holds them all at once
#           (ops/fused.py untuned_split_cluster): its GPU tests, then the same problems against the
#           choice without them (variant split_cluster=0: the ratio is the old untuned time over the new),
#           and split clusters at 2 / 4 splits (would an untuned split count that knows them do better?)
#   scsplit after the untuned choice also picks the split count of its split clusters
#           (kernels/fused.py split_cluster_splits): the whole GPU suite, and the problems whose choice moved
#           (bench_variants prints the dispatched one) against what the untuned choice ran before (832a20d):
#           4096x6144 and 5120x13824 M = 1 (8 splits, no clusters), 5120x13824 M = 4 (K2: clusters at 4
#           splits, unchanged; K4: 10 splits)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s48}
held_out() {   # bench_variants.py problems: the 7 held-out shapes x K 2 / 4 x mcg / mul1 x M = 1 / 4
  local P=""; for s in 3584x3584 3584x18944 5120x5120 5120x13824 13824x5120 8192x8192 4096x6144; do
    for K in 2 4; do for cb in mcg mul1; do for M in 1 4; do P="$P,$s:$K:$cb:$M"; done; done; done; done
  echo ",${P#,}"
}
case "${1:-}" in
  decode) TAG=$TAG OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  suite)  TAG=$TAG OUT=$OUT bash docs/experiments/s45-gpu-plan.sh suite ;;
  scheur)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ech PYTHONPATH=$PWD
    P=$(held_out)
    timeout ${T:-400} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-2} \
      --variants "split_cluster=1" --out "$OUT/scheur_${TAG}.json" > "$OUT/scheur_${TAG}.log" 2>&1
    tail -4 "$OUT/scheur_${TAG}.log" ;;
  scnew)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ech PYTHONPATH=$PWD
    timeout 200 python3 -m pytest -q tests/test_gpu_kernels.py -k "untuned_small_m_takes_split or split_cluster_same_bits" \
      > "$OUT/pytest_scnew_${TAG}.log" 2>&1; tail -1 "$OUT/pytest_scnew_${TAG}.log"
    P=$(held_out)
    timeout ${T:-300} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-2} \
      --variants "split_cluster=0;split_cluster=1,splits=2;split_cluster=1,splits=4" --out "$OUT/scnew_${TAG}.json" > "$OUT/scnew_${TAG}.log" 2>&1
    tail -3 "$OUT/scnew_${TAG}.log" ;;
  scsplit)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ech PYTHONPATH=$PWD
    if [ -n "${QUICK:-}" ]; then    # the tests that touch untuned plans and split clusters only
      timeout ${TS:-150} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py tests/test_gpu_autotune.py \
        -k "untuned or split_cluster or cluster or refine or fused_deterministic" > "$OUT/pytest_scsplit_${TAG}.log" 2>&1
    else
      timeout ${TS:-380} python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
        tests/test_nvrtc.py > "$OUT/pytest_scsplit_${TAG}.log" 2>&1
    fi; tail -1 "$OUT/pytest_scsplit_${TAG}.log"
    grep -E "FAILED|untuned_small_m" "$OUT/pytest_scsplit_${TAG}.log" | head -12
    P=""; for s in 4096x6144; do for K in 2 4; do for cb in mcg mul1; do for M in 1 4; do P="$P,$s:$K:$cb:$M"; done; done; done; done
    for K in 2 4; do for cb in mcg mul1; do P="$P,5120x13824:$K:$cb:1"; done; done
    timeout ${T:-120} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-2} \
      --variants "split_cluster=0,splits=8" --out "$OUT/scsplit_a_${TAG}.json" > "$OUT/scsplit_a_${TAG}.log" 2>&1
    P=""; for K in 2 4; do for cb in mcg mul1; do P="$P,5120x13824:$K:$cb:4"; done; done
    timeout ${T:-60} python3 benchmarks/bench_variants.py --problems "${P#,}" --dtypes f16 --rounds ${ROUNDS:-2} \
      --variants "split_cluster=1,splits=4;split_cluster=0,splits=10" --out "$OUT/scsplit_b_${TAG}.json" > "$OUT/scsplit_b_${TAG}.log" 2>&1
    tail -2 "$OUT/scsplit_a_${TAG}.log" "$OUT/scsplit_b_${TAG}.log" ;;
  *) echo "usage: $0 decode|suite|scheur|scnew|scsplit"; exit 2 ;;
esac

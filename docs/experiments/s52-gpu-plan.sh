#!/usr/bin/env bash
# Session 52's device runs: the dense weight (prefill path) with the output side's 16-point
# transform on the matrix unit (P = H128 . What rounded to fp16 once): measured on an H100 and
# dropped (benchmarks/RESULTS.md session 52); the kernel is docs/experiments/s52-dense-r16-mma.diff.
# Any card; the reply names it. Build the trees first (ab/ is git-ignored: carry=["ab"]):
#   rm -rf ab && mkdir -p ab/O ab/N && git archive HEAD escha_jit templates tuning | tar -x -C ab/O \
#     && git archive HEAD escha_jit templates tuning | tar -x -C ab/N \
#     && (cd ab/N && git apply --include='templates/*' --include='escha_jit/*' ../../docs/experiments/s52-dense-r16-mma.diff)
#   tests    the dense-weight and unfused-linear (dense-path) GPU tests of this checkout
#   dense    bench_dense_weight.py (the build alone, 4 shapes x K 2/3/4 x mcg/mul1, DTYPES of W: f16)
#            on ab/O (before) and ab/N (after): scripts/ab_trees.sh BENCH=dense, ROUNDS rounds (3)
#   prefill  bench_linear.py's prefill cells (M = PREFILL_MS, default 1024,4096; every shape, K,
#            codebook, dtype) on ab/O and ab/N: scripts/ab_trees.sh, ROUNDS rounds (4; ~20 s a run
#            on an H100)
#   routes   the M = 1024 route entries (dense / coded GEMM / fused) measured again (BUCKETS=...)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s52}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONUNBUFFERED=1 ESCHA_JIT_CACHE_DIR=${ESCHA_JIT_CACHE_DIR:-/tmp/ec52}
case "${1:-}" in
  tests)
    timeout ${T:-300} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py -k "dense or unfused" \
      > "$OUT/pytest_dense_${TAG}.log" 2>&1
    tail -3 "$OUT/pytest_dense_${TAG}.log" ;;
  dense)
    BENCH=dense BENCH_ARGS="--dtypes ${DTYPES:-f16}" ROUNDS=${ROUNDS:-3} OUT=$OUT/ab_dense_${TAG} \
      bash scripts/ab_trees.sh ab/O ab/N | tail -3 ;;
  prefill)
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024,4096}" PREBUILD_ARGS="--ms=" ROUNDS=${ROUNDS:-4} \
      OUT=$OUT/ab_prefill_${TAG} bash scripts/ab_trees.sh ab/O ab/N | tail -4 ;;
  routes)   # the route entries of BUCKETS (default 1024) on the PERF.md shapes, measured again with this
    # checkout's kernels, merged onto the shipped table: $OUT/sm_90_routes_${TAG}.json
    timeout ${T:-500} python3 benchmarks/tune_shapes.py --buckets= --route-buckets ${BUCKETS:-1024} \
      --shapes 4096x4096,4096x14336,14336x4096,8192x28672 --onto tuning/sm_90.json \
      --out "$OUT/sm_90_routes_${TAG}.json" --report "$OUT/routes_report_${TAG}.json" > "$OUT/routes_${TAG}.log" 2>&1
    tail -3 "$OUT/routes_${TAG}.log" ;;
  *) echo "usage: $0 tests|dense|prefill|routes"; exit 2 ;;
esac

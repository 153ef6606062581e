#!/usr/bin/env bash
# Session 45's device runs: the split-K partials without a release / acquire pair (fused.h split_*).
# Trees (built here, carry ["ab"]): ab/O = the package before (git archive HEAD before the change),
# ab/N = this checkout's package.
#   tests   the fused-kernel GPU tests (every split-K route, int8, graphs) on ab/N's package (TREE=)
#   ab      interleaved A/B ab/O vs ab/N (TREES: others too) over the 72 f16 PERF.md decode cells, 2 rounds
#   suite   the whole GPU suite (this checkout)
#   decode  the 144 decode cells, the standing figure
#   trace   phase traces of two cells in ab/O and ab/N (copy benchmarks/ into both first)
# Next (session 46): build ab/O = this checkout's package, ab/N = the same + s45-split-partials.diff (and
# ab/L = the same + s39-last-block-loads.diff: session 39 measured it without the pin, 1.040x), then on the
# device `STAMPED="ab/N ab/L" ... stamp` then `TREES="ab/O ab/N ab/L" ... ab` in one call (the machine's
# cache and ab/ edits do not outlive it).
# The pinned variant measured in session 45 (ab/NP = ab/N + s45-split-partials-pin.diff) caps each kernel's blocks per SM at
# what its registers allowed before (ESCHA_PIN_REGS=ab/regs_O.json, written from
# results/2026-12-06_cpu_split_partials_registers_s45.json's "before"): TREES="ab/O ab/NP".
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
TAG=${TAG:-s45}
case "${1:-}" in
  tests)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ect PYTHONPATH=$PWD/${TREE:-ab/N}     # that tree's package and templates
    timeout ${T:-330} python3 -m pytest -q -n 8 tests/test_gpu_kernels.py tests/test_gpu_int8.py \
      > "$OUT/pytest_gpu_kernels_${TAG}.log" 2>&1; tail -3 "$OUT/pytest_gpu_kernels_${TAG}.log" ;;
  ab)
    nvidia-smi --query-gpu=name --format=csv,noheader
    AB_CACHE_DIR=/tmp/abc ROUNDS=${ROUNDS:-2} BENCH_ARGS="--dtypes f16 ${MSARG:-}" PREBUILD_ARGS="--dtypes f16 ${MSARG:-}" \
      OUT=$OUT/ab_split_${TAG} timeout ${T:-560} bash scripts/ab_trees.sh ${TREES:-ab/O ab/N} | tail -12 ;;
  suite)
    export ESCHA_JIT_CACHE_DIR=/tmp/ec
    timeout ${T:-540} python3 -m pytest -q -n 8 tests/test_gpu_*.py tests/test_amd_on_nvidia.py tests/test_nn_cli.py \
      tests/test_nvrtc.py > "$OUT/pytest_gpu_${TAG}.log" 2>&1; tail -3 "$OUT/pytest_gpu_${TAG}.log" ;;
  decode)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    export ESCHA_JIT_CACHE_DIR=/tmp/ecd
    for r in ${RUNS:-1 2}; do
      timeout 280 python3 benchmarks/bench_linear.py --prefill-ms= --out "$OUT/bench_decode_${TAG}_r$r.json" \
        > "$OUT/bench_decode_${TAG}_r$r.log" 2>&1; tail -3 "$OUT/bench_decode_${TAG}_r$r.log"
    done ;;
  stamp)   # ab/O's kernels stamp the shipped table (benchmarks/stamp_occupancy.py), which ab/N then takes too:
    # both trees launch at the occupancy ab/O's kernels have, the condition the 0.994x above was measured under
    mkdir -p ab/O/benchmarks && cp benchmarks/*.py ab/O/benchmarks/
    (cd ab/O && ESCHA_JIT_CACHE_DIR=/tmp/ecst timeout ${T:-400} python3 benchmarks/stamp_occupancy.py \
      --table tuning/sm_90.json --out tuning/sm_90.json > "$OUT/stamp_${TAG}.log" 2>&1; tail -2 "$OUT/stamp_${TAG}.log")
    for t in ${STAMPED:-ab/N}; do cp ab/O/tuning/sm_90.json "$t/tuning/sm_90.json"; done
    cp ab/O/tuning/sm_90.json "$OUT/sm_90_stamped_${TAG}.json" ;;
  trace)   # per-phase trace (benchmarks/trace_fused.py) of the same cells in ab/O and ab/N (each with benchmarks/)
    for t in O N; do
      (cd ab/$t && ESCHA_JIT_CACHE_DIR=/tmp/ect_$t timeout 120 python3 benchmarks/trace_fused.py \
        --problems ${PROBLEMS:-14336x4096:4:mul1:1,4096x4096:2:mcg:1} --out "$OUT/trace_${t}_${TAG}.json" \
        > "$OUT/trace_${t}_${TAG}.log" 2>&1; grep -v "^   main loops" "$OUT/trace_${t}_${TAG}.log" | tail -16)
    done ;;
  *) echo "usage: $0 tests|ab|suite|decode|trace|stamp"; exit 2 ;;
esac

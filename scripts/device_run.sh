#!/usr/bin/env bash
# One batched run on the GPU machine (the device tool): GPU tests, JIT timings, benchmark.
# Results land in $OUT (or ./.out when run by hand). Usage: scripts/device_run.sh [tests|bench|jit|tune|sweep|trace|floor|ncu|gemm|all]...
# (gemm: the coded GEMM's tests and benchmarks/bench_gemm_parts.py, GEMM_ARGS e.g. --variants "tokens=192;stages=3")
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ESCHA_JIT_CACHE_DIR=${ESCHA_JIT_CACHE_DIR:-/tmp/escha-cache}
what=${*:-all}
python3 -c 'import torch, cuda.bindings, jinja2; print("torch", torch.__version__, torch.cuda.get_device_name())'
python3 -m escha_jit.cli info | tee "$OUT/info.txt"
python3 -m escha_jit.cli compile --arch sm_90 --all -j 16 --json "$OUT/compile_sm90.json" > "$OUT/compile_sm90.txt" 2>&1
tail -1 "$OUT/compile_sm90.txt"
rc=0
for w in $what; do
  case "$w" in
    tune) timeout 400 python3 benchmarks/tune_shapes.py --out "$OUT/sm_90.json" --report "$OUT/tune_report.json" ${TUNE_ARGS:-} 2>&1 | tee "$OUT/tune.log" | tail -30 || rc=1
          # tune() writes the user table after every problem: a run cut short by the time limit still brings them back
          [ -f "$OUT/sm_90.json" ] || cp "$ESCHA_JIT_CACHE_DIR/tuning/sm_90.json" "$OUT/user_table_partial.json" 2>/dev/null ;;
    # -v names every result as it comes: a run the timeout cuts short still says which test failed
    tests|all) timeout 420 python3 -m pytest -v -rf tests/test_gpu_*.py $(ls tests/test_amd_on_nvidia.py 2>/dev/null) 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25 || rc=1 ;;&
    jit|all) timeout 300 python3 benchmarks/jit_times.py --out "$OUT/jit_times.json" 2>&1 | tail -20 || rc=1 ;;&
    sweep) timeout 500 python3 benchmarks/sweep_fused.py --out "$OUT/sweep.json" ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.log" | tail -60 || rc=1 ;;
    trace) timeout 200 python3 benchmarks/trace_fused.py --out "$OUT/trace.json" ${TRACE_ARGS:-} 2>&1 | tee "$OUT/trace.log" | tail -40 || rc=1 ;;
    ncu) mkdir -p "$OUT/ncu"; OUT="$OUT/ncu" scripts/ncu_fused.sh || rc=1 ;;
    gemm) timeout 240 python3 -m pytest -q -rf tests/test_gpu_gemm.py 2>&1 | tee "$OUT/pytest_gemm.log" | tail -8 || rc=1
          timeout 300 python3 benchmarks/bench_gemm_parts.py --out "$OUT/gemm_parts.json" ${GEMM_ARGS:-} 2>&1 | tee "$OUT/gemm_parts.log" | tail -20 || rc=1 ;;
    floor) timeout 200 python3 benchmarks/bench_floor.py --out "$OUT/floor.json" 2>&1 | tee "$OUT/floor.log" | tail -40 || rc=1 ;;
    bench|all) timeout 540 python3 benchmarks/bench_linear.py --out "$OUT/bench_linear.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -70 || rc=1 ;;
  esac
done
exit $rc

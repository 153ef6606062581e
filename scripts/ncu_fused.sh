#!/usr/bin/env bash
# Nsight Compute over one dispatched call per problem (benchmarks/profile_fused.py): issue rate,
# warp stall reasons, occupancy, memory throughput, per kernel, as CSV in $OUT (device machine).
# Usage: [PROBLEMS=IC x OC:K:cb:M,...] [GEMM_VARIANT=tokens=128 | diag=1 ...] scripts/ncu_fused.sh (M > 256: the coded GEMM)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ESCHA_JIT_CACHE_DIR=${ESCHA_JIT_CACHE_DIR:-/tmp/escha-cache}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
args=(--problems "${PROBLEMS:-}")
[ -n "${PROBLEMS:-}" ] || args=()
[ -z "${GEMM_VARIANT:-}" ] || args+=(--gemm-variant "$GEMM_VARIANT")   # problems with M > 256: the coded GEMM
# warm the JIT cache outside the profiler (compiles are slow under ncu's process hooks)
python3 benchmarks/profile_fused.py "${args[@]}" --out "$OUT/ncu_plans.json" > "$OUT/ncu_plans.log" 2>&1 || { tail -20 "$OUT/ncu_plans.log"; exit 1; }
rep=/tmp/escha_ncu
timeout 500 "$NCU" --profile-from-start off --clock-control none --target-processes all -f -o "$rep" \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
  --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters \
  --metrics smsp__inst_executed.sum,sm__cycles_active.avg,dram__bytes_read.sum \
  python3 benchmarks/profile_fused.py "${args[@]}" > "$OUT/ncu_stderr.log" 2>&1
rc=$?
tail -5 "$OUT/ncu_stderr.log"
"$NCU" --import "$rep.ncu-rep" --csv --page details > "$OUT/ncu_details.csv" 2>>"$OUT/ncu_stderr.log" || rc=1
# per-instruction SASS with its stall samples (the hot loop's stall reasons)
"$NCU" --import "$rep.ncu-rep" --csv --page source --print-source sass > "$OUT/ncu_source.csv" 2>>"$OUT/ncu_stderr.log" || rc=1
# every collected metric, one row per kernel (pipe utilisation: sm__inst_executed_pipe_*, sm__pipe_*)
"$NCU" --import "$rep.ncu-rep" --csv --page raw > "$OUT/ncu_raw.csv" 2>>"$OUT/ncu_stderr.log" || rc=1
wc -l "$OUT"/ncu_*.csv
exit $rc

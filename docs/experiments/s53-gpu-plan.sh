#!/usr/bin/env bash
# Session 53's device runs. Done on an H100 (benchmarks/RESULTS.md session 53): the rotated route's
# parts (`python benchmarks/bench_prefill_parts.py` with docs/experiments/s53-rotated-route.diff
# applied), the K3 / K4 mcg rescan (`ANY_GPU=1 docs/experiments/s51-gpu-plan.sh rescan`) and its
# confirmation, the prefill timeline (`python benchmarks/prefill_timeline.py`). Left for the next
# lease (the device time ran out) and run in session 54 on an H100 (benchmarks/RESULTS.md session 54),
# any card; the reply names it:
#   entries   the shipped-table GPU test (every tuning/sm_90.json entry against the untuned plan: the
#             three stages = 2 entries shipped in session 53 have run on the CPU's sm_90 emulation only)
#             and the occupancy stamps' check on this card
#   ncudense  Nsight Compute over one dense-weight build per problem (benchmarks/profile_dense.py):
#             issue rate, warp stall reasons, memory throughput, per-instruction stall samples, as CSV.
#             Why: the build is 29-33 % of an M = 1024 prefill call, runs at ~67 % of its issue bound
#             and did not speed up with 16 % fewer instructions on mcg (session 52); what it waits on
#             has never been read
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ESCHA_JIT_CACHE_DIR=${ESCHA_JIT_CACHE_DIR:-/tmp/ec53}
case "${1:-}" in
  entries)
    timeout ${T:-300} python3 -m pytest -q -p no:cacheprovider tests/test_gpu_autotune.py -k shipped_entries \
      > "$OUT/pytest_entries_s53.log" 2>&1; tail -3 "$OUT/pytest_entries_s53.log"
    python3 benchmarks/stamp_occupancy.py --check 2>&1 | tail -3 ;;
  ncudense)
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    [ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
    P=${PROBLEMS:-8192x28672:2:mcg,8192x28672:4:mcg,8192x28672:2:mul1,8192x28672:4:mul1}
    python3 benchmarks/profile_dense.py --problems "$P" > "$OUT/dense_plans.log" 2>&1 || { tail -5 "$OUT/dense_plans.log"; exit 1; }
    timeout ${T:-300} "$NCU" --profile-from-start off --clock-control none --target-processes all -f -o /tmp/escha_dn \
      --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters \
      --section MemoryWorkloadAnalysis \
      --metrics smsp__inst_executed.sum,sm__cycles_active.avg,dram__bytes_read.sum,dram__bytes_write.sum \
      python3 benchmarks/profile_dense.py --problems "$P" > "$OUT/ncu_dense_stderr.log" 2>&1
    tail -3 "$OUT/ncu_dense_stderr.log"
    D=$OUT/ncu_dense; mkdir -p "$D"        # the file names benchmarks/ncu_summary.py reads
    "$NCU" --import /tmp/escha_dn.ncu-rep --csv --page details > "$D/ncu_details.csv"
    "$NCU" --import /tmp/escha_dn.ncu-rep --csv --page raw > "$D/ncu_raw.csv"
    "$NCU" --import /tmp/escha_dn.ncu-rep --csv --page source --print-source sass > "$D/ncu_source.csv"
    wc -l "$D"/*.csv
    python3 benchmarks/ncu_summary.py "$D" --hot 20 --json "$D/summary.json" 2>&1 | head -60 ;;
  *) echo "usage: $0 entries|ncudense"; exit 2 ;;
esac

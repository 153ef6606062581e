#!/usr/bin/env bash
# Session 50: the 4 entries adopted from their dtype twins (RESULTS.md session 50) against the
# configurations they replaced (each entry's runner_up), 5 rounds interleaved (bench_variants.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
export ESCHA_JIT_CACHE_DIR=/tmp/ecw
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
i=0
while IFS='|' read -r prob dt vars; do
  i=$((i + 1))
  timeout 80 python3 benchmarks/bench_variants.py --problems "$prob" --dtypes "$dt" --variants "$vars" --rounds 5 \
    --out "$OUT/twcheck_$i.json" > "$OUT/twcheck_$i.log" 2>&1 || echo "$prob failed"
  grep -E "^[0-9]+x[0-9]+:" "$OUT/twcheck_$i.log"
done <<'LIST'
8192x28672:4:mcg:4|bf16|rows_per_stage=8
4096x14336:2:mcg:16|bf16|warps=16,stages=2,xh=0,cluster=4
4096x14336:3:mul1:16|bf16|stages=3
8192x28672:4:mul1:1|f16|rows_per_stage=4,stages=3
LIST
cd "$OUT" && tar czf twcheck_s50.tgz twcheck_*.json twcheck_*.log && rm -f twcheck_*.json twcheck_*.log

#!/usr/bin/env bash
# Session 50: each decode entry whose f16 and bf16 twins differ in structure (rows per stage, stages,
# waves, xh, clusters, splits) timed at both twins' configurations (benchmarks/bench_variants.py,
# 3 rounds interleaved); problems and variants in docs/experiments/s50-twins.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
export ESCHA_JIT_CACHE_DIR=/tmp/ecv
i=0
while IFS='|' read -r prob vars; do
  i=$((i + 1))
  timeout 60 python3 benchmarks/bench_variants.py --problems "$prob" --variants "$vars" \
    --out "$OUT/twins_$i.json" > "$OUT/twins_$i.log" 2>&1 || echo "$prob failed"
  tail -2 "$OUT/twins_$i.log" | head -2
done < docs/experiments/s50-twins.txt
cd "$OUT" && tar czf twins_s50.tgz twins_*.json twins_*.log && rm -f twins_*.json twins_*.log

#!/usr/bin/env bash
# Interleaved A/B(/C...) of escha_jit trees on the GPU machine: runs benchmarks/bench_linear.py with
# tree A's package, then tree B's, ..., ROUNDS times (A B, B A, ...: clock drift and order hit all alike), and
# prints per-cell time ratios against tree A (benchmarks/ab_compare.py). BENCH=gemm times the coded
# GEMM instead (benchmarks/bench_gemm_parts.py; BENCH_ARGS e.g. --shapes 4096x4096 --codebooks mcg), BENCH=dense
# the prefill path's weight build (benchmarks/bench_dense_weight.py); prefill cells only: BENCH_ARGS="--ms=
# --prefill-ms=1024,4096" PREBUILD_ARGS="--ms= --prefill". Each tree is a folder that
# holds an escha_jit package with its templates/ and tuning/
# (`git archive <rev> escha_jit templates tuning | tar -x -C ab/<rev>`); this tree's benchmarks/
# are copied into each (bench_linear.py imports the package beside its own folder). Kernels compile
# beforehand on every core (scripts/ab_prebuild.py; BENCH=linear only).
# Usage: ROUNDS=2 BENCH_ARGS=... scripts/ab_trees.sh TREE_A TREE_B [TREE_C ...]   (results in $OUT:
# ab_compare.txt and ab_runs.tgz with every run's JSON and log;
# ab/ is git-ignored: pass carry=["ab"] to the device tool)
set -uo pipefail
cd "$(dirname "$0")/.."
trees=(); for t in "$@"; do trees+=("$(realpath "$t")"); done
OUT=${OUT:-.out}; mkdir -p "$OUT"
# A cache dir of its own with no user tuning table in it: a user table (written there by a tune run)
# wins over every tree's shipped table, and an A/B of two tables would compare one table with itself.
export PYTHONUNBUFFERED=1 ESCHA_JIT_CACHE_DIR=${AB_CACHE_DIR:-/tmp/escha-ab-cache}
rm -f "$ESCHA_JIT_CACHE_DIR"/tuning/*.json
for tree in "${trees[@]}"; do
  mkdir -p "$tree/benchmarks" && cp -r benchmarks/*.py benchmarks/baselines "$tree/benchmarks/"
done
case "${BENCH:-linear}" in
  linear) bench=bench_linear.py; args=(--prefill-ms= ${BENCH_ARGS:-}) ;;
  gemm) bench=bench_gemm_parts.py; args=(${BENCH_ARGS:-}) ;;
  dense) bench=bench_dense_weight.py; args=(${BENCH_ARGS:-}) ;;
  *) echo "BENCH=$BENCH: linear, gemm or dense"; exit 2 ;;
esac
# compile every tree's kernels first on all cores (the benchmark would compile them one at a time
# on first use; scripts/ab_prebuild.py says what that cost); PREBUILD_ARGS narrows the grid like BENCH_ARGS
if [ "${BENCH:-linear}" = linear ]; then
  for tree in "${trees[@]}"; do python3 scripts/ab_prebuild.py "$tree" ${PREBUILD_ARGS:-}; done
fi
# Every other round runs the trees in reverse order (A B, B A, ...): a tree that runs second in a
# round measured 0.995x the time of an identical tree that ran first (session 46, an A/A over the 72
# f16 cells, benchmarks/RESULTS.md), as large as the levers being measured. Use an even ROUNDS.
files=(); runs=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  order=("${!trees[@]}"); [ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${order[@]}" | sort -rn))
  for i in "${order[@]}"; do
    tag=$(basename "${trees[$i]}")$r
    timeout 280 python3 "${trees[$i]}/benchmarks/$bench" "${args[@]}" \
      --out "$OUT/ab_$tag.json" > "$OUT/ab_$tag.log" 2>&1 || echo "run $tag failed: $(tail -2 "$OUT/ab_$tag.log")"
    echo "$tag: $(grep -c '^FAILED' "$OUT/ab_$tag.log") failed cells"
    runs+=("ab_$tag.json" "ab_$tag.log")
  done
  for i in "${!trees[@]}"; do files+=("$OUT/ab_$(basename "${trees[$i]}")$r.json"); done   # tree order for ab_compare.py
done
python3 benchmarks/ab_compare.py --trees ${#trees[@]} "${files[@]}" | tee "$OUT/ab_compare.txt"
# the device tool brings back at most 8 files: the per-run JSON and logs travel as one archive
(cd "$OUT" && tar czf ab_runs.tgz "${runs[@]}" && rm -f "${runs[@]}")

#!/usr/bin/env bash
# Session 55's device steps (benchmarks/RESULTS.md session 55). Any card; the reply names it.
#   share    the coded GEMM with clusters of token blocks splitting the decode (kernels.gemm share=2 / 4):
#            its GPU tests (bit-equal to share = 1, tests/test_gpu_gemm.py c2 / c4 / c2s2t64), then an
#            interleaved A/B of share 1 / 2 / 4 (benchmarks/ab_gemm_variants.py, ROUNDS 3, K 2 / 4)
#   prefill  bench_linear's prefill cells (M = PREFILL_MS, default 1024) on main against trees whose
#            kernels.gemm.SHARES is (4, 2) and (2,) (build them first; ab/ is git-ignored, carry=["ab"]):
#              rm -rf ab && mkdir -p ab/O ab/N4 ab/N2 && for t in O N4 N2; do git archive HEAD escha_jit templates tuning | tar -x -C ab/$t; done
#              sed -i 's/^SHARES: tuple = ()/SHARES: tuple = (4, 2)/' ab/N4/escha_jit/kernels/gemm.py
#              sed -i 's/^SHARES: tuple = ()/SHARES: tuple = (2,)/' ab/N2/escha_jit/kernels/gemm.py
#   words    (done, dropped) the word-copy variants of docs/experiments/s55-gemm-words.diff, applied first
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
nvidia-smi -L
case "${1:-}" in
  share)
    timeout 300 python -m pytest -q tests/test_gpu_gemm.py -k "variants_same_bits" 2>&1 | tee "$OUT/pytest_gemm_share_s55.log" | tail -3
    timeout 400 python benchmarks/ab_gemm_variants.py --variants ";share=2;share=4" --rounds "${ROUNDS:-3}" \
      --Ks "${KS:-2,4}" --out "$OUT/ab_gemm_share_s55.json" 2>&1 | tee "$OUT/ab_gemm_share_s55.log" | tail -8 ;;
  prefill)
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024}" PREBUILD_ARGS="--ms=" ROUNDS=${ROUNDS:-2} \
      OUT=$OUT/ab_prefill_share_s55 bash scripts/ab_trees.sh ab/O ab/N4 ab/N2 | tail -12 ;;
  words)
    timeout 400 python benchmarks/ab_gemm_variants.py --variants ";words=1;words=1,l2ahead=8;l2ahead=8" \
      --out "$OUT/ab_gemm_words_s55.json" 2>&1 | tee "$OUT/ab_gemm_words_s55.log" | tail -8 ;;
  *) echo "usage: $0 share|prefill|words"; exit 2 ;;
esac

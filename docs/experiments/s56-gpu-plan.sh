#!/usr/bin/env bash
# Session 56's device steps (benchmarks/RESULTS.md session 56). Any card; the reply names it.
#   routes   with kernels.gemm.SHARES = (2,): the GPU tests of the coded GEMM and of the routes, the
#            driver's residency of GEMM clusters (benchmarks/gemm_residency.py), and every route
#            bucket of the PERF.md shapes measured again, merged onto the shipped table:
#            $OUT/sm_90_routes_s56.json (the table to ship), routes_report_s56.json, routes_s56.log
#   parts    where a cluster pair's time goes: share 1 / 2, each whole, without the decode (diag=1) and
#            without the wgmma (diag=2), K2 mcg on the two widest shapes (benchmarks/ab_gemm_variants.py)
#   ncu      Nsight Compute over the pair kernel (share=2) at 4096x14336 and 4096x4096, M = 1024, K2 mcg
#            (scripts/ncu_fused.sh): what its pipeline waits on now that neither the decode nor the
#            wgmma alone bounds it (ab_gemm_parts_share_s56); $OUT/ncu_pair (benchmarks/ncu_summary.py reads it)
#   mcast    clusters of 2 column groups sharing each activation tile by TMA multicast (kernels.gemm
#            spec_for(mcast=2), built this session): its GPU tests (bit-equal to the default kernel,
#            tests/test_gpu_gemm.py m2 / m2s2t64), then an interleaved A/B of share 1 / pairs / mcast 2 at
#            M = 256 / 1024 / 4096 (ab_gemm_variants.py)
#   all      routes, then prefill at M = 1024 with ab/N's table replaced by the one routes wrote
#   prefill  bench_linear's prefill cells (M = PREFILL_MS, default 1024,4096) on ab/O (session 55's
#            main: no clusters, its table) against ab/N (this tree with the table of `routes`):
#              rm -rf ab && mkdir -p ab/O ab/N && git archive c0b1a24 escha_jit templates tuning | tar -x -C ab/O
#              git archive HEAD escha_jit templates tuning | tar -x -C ab/N      (carry=["ab"])
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
nvidia-smi -L
case "${1:-}" in
  routes)
    timeout 240 python -m pytest -q tests/test_gpu_gemm.py tests/test_gpu_autotune.py \
      "tests/test_gpu_kernels.py::test_linear_routes_by_m_at_the_crossover" \
      "tests/test_gpu_kernels.py::test_linear_routes_mid_m_to_the_coded_gemm_on_wide_layers" \
      > "$OUT/pytest_gemm_routes_s56.log" 2>&1; tail -3 "$OUT/pytest_gemm_routes_s56.log"
    timeout 60 python benchmarks/gemm_residency.py --out "$OUT/gemm_residency_s56.json" 2>&1 | tee "$OUT/gemm_residency_s56.log"
    timeout ${T:-240} python benchmarks/tune_shapes.py --buckets= --route-buckets all \
      --shapes 4096x4096,4096x14336,14336x4096,8192x28672 --onto tuning/sm_90.json \
      --out "$OUT/sm_90_routes_s56.json" --report "$OUT/routes_report_s56.json" > "$OUT/routes_s56.log" 2>&1
    tail -3 "$OUT/routes_s56.log" ;;
  parts)
    timeout 300 python benchmarks/ab_gemm_variants.py --variants ";diag=1;diag=2;share=2;share=2,diag=1;share=2,diag=2" \
      --shapes 4096x14336,8192x28672 --Ks 2 --codebooks mcg --rounds 2 --out "$OUT/ab_gemm_parts_share_s56.json" 2>&1 \
      | tee "$OUT/ab_gemm_parts_share_s56.log" | tail -16 ;;
  all)
    bash "$0" routes
    [ -s "$OUT/sm_90_routes_s56.json" ] && cp "$OUT/sm_90_routes_s56.json" ab/N/tuning/sm_90.json
    PREFILL_MS=${PREFILL_MS:-1024} bash "$0" prefill ;;
  mcast)
    timeout 200 python -m pytest -q tests/test_gpu_gemm.py -k "variants_same_bits and m2" 2>&1 \
      | tee "$OUT/pytest_gemm_mcast_s56.log" | tail -3
    timeout 330 python benchmarks/ab_gemm_variants.py --variants ";share=2;mcast=2" --ms 256,1024,4096 --rounds 2 \
      --out "$OUT/ab_gemm_mcast_s56.json" 2>&1 | tee "$OUT/ab_gemm_mcast_s56.log" | tail -12 ;;
  ncu)
    PROBLEMS=${PROBLEMS:-4096x14336:2:mcg:1024,4096x4096:2:mcg:1024} GEMM_VARIANT=share=2 OUT=$OUT/ncu_pair \
      bash scripts/ncu_fused.sh ;;
  prefill)
    BENCH_ARGS="--ms= --prefill-ms=${PREFILL_MS:-1024,4096}" PREBUILD_ARGS="--ms= --prefill" ROUNDS=${ROUNDS:-2} \
      OUT=$OUT/ab_prefill_share_s56 bash scripts/ab_trees.sh ab/O ab/N | tail -12 ;;
  *) echo "usage: $0 routes|parts|mcast|ncu|prefill|all"; exit 2 ;;
esac

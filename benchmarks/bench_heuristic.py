"""The untuned path: what a layer whose shape is not in the shipped table runs, before and after
the session-15 heuristic (kernels/fused.py default_config_for / default_launch), on shapes that
are NOT in tuning/sm_90.json (Qwen2.5-7B, Qwen2.5-14B / Mistral-Nemo, Llama-3-70B attention,
Llama-3-8B merged QKV and K/V). Prints a table and writes JSON.

    python benchmarks/bench_heuristic.py --out heuristic.json
    python benchmarks/bench_heuristic.py --shapes 3584x18944 --ks 2 --tune     # + the tuner's best

"previous" is the rule shipped until session 14: 4 waves x 8 tile rows x 3 stages up to M = 8,
8 waves and the prep kernel above, and the fewest splits that give 3.5+ blocks per SM. "current"
is what ops/fused.plan_for picks now for an untuned shape (asserted: the plan's source is the
heuristic). Both are timed as in bench_linear.py (one CUDA graph over distinct weight copies,
median of 20 replays), fp16 activations, in the same process, alternating per case. --tune adds
escha_jit.tune's best for each problem and its own reading of the current heuristic (the
tuner's timer, not comparable in absolute terms with the columns before it).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.bench_linear import bench_dense, n_copies, random_layers, run_meta, time_graph  # noqa: E402
from escha_jit.autotune.candidates import Candidate  # noqa: E402
from escha_jit.kernels import fused as KF  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402

HELD_OUT = "3584x3584,3584x18944,18944x3584,5120x5120,5120x13824,13824x5120,8192x8192,4096x6144,4096x1024"


def previous_choice(K: float, cb: str, IC: int, OC: int, M: int, sms: int):
    """The untuned (config, launch) of sessions 6-14 (the baseline this benchmark compares with)."""
    cfg = KF.default_config(M)                           # unchanged: the shape-free default
    routed = KF.swap_route(cfg, "nvidia", cb, M)
    groups = OC // KF.COLS
    fitting = [d for d in range(1, IC // 128 + 1) if (IC // 128) % d == 0 and IC // d % (16 * cfg.rows_per_stage) == 0
               and KF.smem_layout(routed, K, M, IC // d).total <= KF.SMEM_BUDGET["nvidia"]]
    S = next((d for d in fitting if 2 * groups * d >= 7 * sms), fitting[-1])
    return cfg, KF.FusedLaunch(S)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_heuristic.json")
    ap.add_argument("--shapes", default=HELD_OUT)
    ap.add_argument("--ks", default="2,4")
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--ms", default="1,4,16")
    ap.add_argument("--tune", action="store_true", help="also run escha_jit.tune on each problem (slow)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ks = [float(k) for k in args.ks.split(",")]
    ms = [int(m) for m in args.ms.split(",")]
    rows = []
    print(f"{'shape':>11} {'K':>3} {'cb':>4} {'M':>3} {'previous':>9} {'current':>9} {'cur/prev':>8} {'bf16':>7} "
          f"{'x bf16':>7}  current choice", flush=True)
    for IC, OC in shapes:
        dense = {M: bench_dense(IC, OC, M, dev, n_copies(2 * IC * OC)) for M in ms}
        for K in ks:
            for cb in args.codebooks.split(","):
                layers = random_layers(IC, OC, K, cb, n_copies(IC * OC * K // 8), dev)
                for M in ms:
                    x = torch.randn(M, IC, device=dev).half()
                    ys = [torch.empty(M, OC, device=dev, dtype=torch.float16) for _ in layers]
                    plan = F.plan_for(dev, K, cb, IC, OC, "f16", "f16", M)
                    assert plan.source == "heuristic", f"{IC}x{OC} K{K} {cb} M{M} is in the tuned table"
                    pcfg, plaunch = previous_choice(K, cb, IC, OC, M, sms)
                    t_prev = time_graph([lambda w=w, y=y: F.fused_linear(x, w, out=y, cfg=pcfg, launch=plaunch)
                                         for w, y in zip(layers, ys)])
                    t_cur = time_graph([lambda w=w, y=y: F.fused_linear(x, w, out=y) for w, y in zip(layers, ys)])
                    c = plan.cfg
                    choice = Candidate(c, plan.launch).key()      # names the ring, clusters and ptxas level too
                    row = dict(IC=IC, OC=OC, K=K, codebook=cb, M=M, dtype="f16", previous_us=t_prev, current_us=t_cur,
                               bf16_us=dense[M], previous=dataclasses.asdict(pcfg) | {"splits": plaunch.splits},
                               current=dataclasses.asdict(c) | {"splits": plan.launch.splits})
                    rows.append(row)
                    print(f"{IC:>5}x{OC:<5} {K:>3g} {cb:>4} {M:>3} {t_prev:>9.2f} {t_cur:>9.2f} {t_cur / t_prev:>8.3f} "
                          f"{dense[M]:>7.2f} {dense[M] / t_cur:>7.2f}  {choice}", flush=True)
                del layers
                torch.cuda.empty_cache()
    gm = statistics.geometric_mean
    summary = {"current_over_previous_geomean": gm([r["current_us"] / r["previous_us"] for r in rows]),
               "current_over_previous_max": max(r["current_us"] / r["previous_us"] for r in rows)}
    for M in ms:
        summary[f"current_over_previous_M{M}"] = gm([r["current_us"] / r["previous_us"] for r in rows if r["M"] == M])
    summary["current_vs_bf16_geomean"] = gm([r["bf16_us"] / r["current_us"] for r in rows])
    summary["previous_vs_bf16_geomean"] = gm([r["bf16_us"] / r["previous_us"] for r in rows])
    tuned = []
    if args.tune:
        from escha_jit.autotune.api import tune
        from escha_jit.autotune.shapes import LayerShape
        layer_shapes = [LayerShape(IC, OC, K, cb) for IC, OC in shapes for K in ks for cb in args.codebooks.split(",")]
        rep = tune(None, shapes=layer_shapes, m_buckets=ms, dtypes=[torch.float16], save=False, progress=True)
        print(rep.summary())
        tuned = [r.__dict__ for r in rep.rows]
        summary["tuner_heuristic_over_best_geomean"] = gm([r["heuristic_us"] / r["best_us"] for r in tuned])
    print(json.dumps(summary, indent=1))
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), summary=summary, rows=rows, tuned=tuned), f, indent=1)


if __name__ == "__main__":
    main()

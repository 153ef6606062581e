"""Where the swapped route's two A-side sources disagree: each (codebook, M, S) run with x rotated
in the kernel (xh=0) and bulk-copied from the words prep kernel (xh=1), same configuration; prints
how many outputs differ, by how much, and each one's error against the float64 reference.

    python benchmarks/compare_xh_sources.py          # needs an NVIDIA GPU (the swapped route)
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from escha_jit import reference as R  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.synth import random_layer  # noqa: E402


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm())


def main() -> None:
    torch.manual_seed(0)
    for cb in ("mcg", "mul1"):
        w = random_layer(2048, 512, 3.0, cb, seed=32).to("cuda")
        for M, S in ((1, 1), (1, 2), (4, 1), (4, 2), (8, 1), (8, 4)):
            x = torch.randn(M, 2048, device="cuda").half()
            ys, plans = {}, {}
            for xh in (0, 1):
                F._PLANS.clear()
                cfg = F.FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, xh=xh)
                ys[xh] = F.fused_linear(x, w, cfg=cfg, launch=F.FusedLaunch(S))
                plans[xh] = [(p.cfg.swap, p.cfg.xh, p.x_chunks) for p in F._PLANS.values()]
            ref = x.double().cpu() @ R.dense_weight(w.to("cpu"))
            d = ys[0].float() - ys[1].float()
            rows = (d != 0).any(dim=1).nonzero().flatten().tolist()
            print(f"{cb:<4} M {M} S {S} plans {plans[0]} {plans[1]} differ {int((d != 0).sum())} of {d.numel()} "
                  f"rows {rows[:8]} maxabs {float(d.abs().max()):.3g} "
                  f"rel RMS vs reference {rel_rms(ys[0], ref):.2e} (xh=0) {rel_rms(ys[1], ref):.2e} (xh=1)", flush=True)


if __name__ == "__main__":
    main()

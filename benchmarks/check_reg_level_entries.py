"""Correctness, on the GPU, of every tuning-table entry that names a ptxas register-usage level
(FusedConfig.reg_level): at its bucket's M, within the float64 reference's band and bit-identical
to the same config at ptxas' default level (the level changes the schedule, not the arithmetic).

    python benchmarks/check_reg_level_entries.py [--table tuning/sm_90.json]

Prints one line per entry; exits 1 if any is off.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit import reference as R  # noqa: E402
from escha_jit.autotune.table import TuningTable, parse_key, shipped_table_path  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.synth import random_layer  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
TOL = {"f16": 1e-3, "bf16": 2.5e-3}          # tests/test_gpu_kernels.py TOL


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default=shipped_table_path("sm_90"))
    args = ap.parse_args(argv)
    table = TuningTable.load(args.table)
    bad = n = 0
    layer = (None, None, None)
    for key, e in sorted(table.entries.items()):
        if e.cfg.reg_level < 0:
            continue
        k = parse_key(key)
        if layer[0] != (k.IC, k.OC, k.K, k.codebook):     # sorted keys: one layer per shape and codebook
            w = random_layer(k.IC, k.OC, k.K, k.codebook, seed=5).to("cuda")
            layer = ((k.IC, k.OC, k.K, k.codebook), w, R.dense_weight(w.to("cpu")))
        _, w, W = layer
        x = torch.randn(k.M, k.IC, device="cuda").to(DTYPES[k.dtype])
        y = F.fused_linear(x, w, cfg=e.cfg, launch=e.launch)
        y0 = F.fused_linear(x, w, cfg=dataclasses.replace(e.cfg, reg_level=-1), launch=e.launch)
        ref = x.double().cpu() @ W
        err = float((y.double().cpu() - ref).norm() / ref.norm())
        same = torch.equal(y, y0)
        ok = err < TOL[k.dtype] and same
        n += 1
        bad += not ok
        print(key, f"reg_level {e.cfg.reg_level}", f"{err:.2e}", "same bits" if same else "BITS DIFFER",
              "OK" if ok else "BAD", flush=True)
    print(f"{n} entries checked, {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Would folding mul1's affine map out of the fp16 route's decode keep the error budget? (CPU, numpy)

The fp16 route (M = 9..256) decodes a mul1 pair as PRMT + HFMA2: {1024 + B0, 1024 + B1} exactly in
fp16, then value = fp16(1774/2^18 * (1024 + B) - 10.3828125) (FORMAT.md section 5). Dropping the
HFMA2 (0.5 of ~5.5 instructions per weight) means the unit multiplies x by 1024 + B and the epilogue
applies the scale and subtracts 10.3828125 * sum(x). The accumulators then carry an offset ~10x
the result, and the matrix unit's fp32 accumulation truncates (modelled here: each 16-deep step's
exact dot product plus the accumulator, rounded toward zero to fp32, as published measurements of
NVIDIA's tensor cores describe). Prints the relative RMS error against float64 of today's decode
(fp16-rounded weights), the fold, and a fold centred on B - 510 (which needs the instruction the
fold removes), for random x and trellis byte sums.

    python benchmarks/sim_mul1_fold.py --ks 4096,14336 --trials 3
"""
from __future__ import annotations

import argparse

import numpy as np

SCALE = 1774 / 2 ** 18
OFFSET = 905216 / 2 ** 18                 # value = SCALE * B - OFFSET (pre-rounding, exact)
FOLD_OFFSET = OFFSET + 1024 * SCALE       # 10.3828125: value = SCALE * (1024 + B) - FOLD_OFFSET


def truncate_fp32(v: np.ndarray) -> np.ndarray:
    """float64 -> fp32 rounded toward zero, back as float64."""
    f = v.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(v)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f.astype(np.float64)


def unit_matmul(x: np.ndarray, w: np.ndarray, depth: int = 16) -> np.ndarray:
    """x [K] @ w [K, N] as the matrix unit sums it: per 16-deep step, exact products and sum plus
    the accumulator, truncated to fp32."""
    acc = np.zeros(w.shape[1])
    for k0 in range(0, len(x), depth):
        acc = truncate_fp32(acc + x[k0:k0 + depth] @ w[k0:k0 + depth])
    return acc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", default="4096,14336", help="input features (the sum's depth)")
    ap.add_argument("--n", type=int, default=128, help="output columns")
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    for K in (int(k) for k in a.ks.split(",")):
        for t in range(a.trials):
            x = rng.standard_normal(K).astype(np.float16).astype(np.float64)
            B = rng.integers(0, 256, (K, a.n, 4)).sum(-1).astype(np.float64)    # byte sums of the hashes
            exact = SCALE * B - OFFSET
            ref = x @ exact

            def rel(v):
                return float(np.sqrt(np.mean((v - ref) ** 2) / np.mean(ref ** 2)))
            today = unit_matmul(x, exact.astype(np.float16).astype(np.float64))
            fold = SCALE * unit_matmul(x, 1024 + B) - FOLD_OFFSET * x.sum()
            centred = SCALE * unit_matmul(x, B - 510) - (OFFSET - 510 * SCALE) * x.sum()
            print(f"K={K:6d} trial {t}: today {rel(today):.2e}  fold {rel(fold):.2e}  centred fold {rel(centred):.2e}")


if __name__ == "__main__":
    main()

"""A correct GPU linear from the two basic kernels (the fused kernels of ops/fused.py replace it
where they apply): Hadamard(x * s_in * rin) -> matmul with the reconstructed What -> Hadamard ->
* rout * s_out (+ bias for EXL3)."""
from __future__ import annotations

from typing import Optional

import torch

from ..reference import LinearWeights
from .fused import MAX_M, fused_linear
from .hadamard import hadamard128
from .reconstruct import reconstruct


def linear(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
           bias32: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The GPU linear: the fused single-launch kernel for M <= 256, reconstruct + vendor GEMM above."""
    if x.shape[0] <= MAX_M:
        return fused_linear(x, w, out=out, bias32=bias32)
    return linear_unfused(x, w, out=out)


def linear_unfused(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
                   weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W. fp16 x multiplies in fp16 (fp32 accumulate);
    bf16 / fp32 x in fp32 (fp16 could overflow on bf16's range). ``weight`` may pass a
    precomputed What; ``out`` a [M, out_features] view (unit last stride) to write into."""
    M = x.shape[0]
    if w.logical_in != w.IC:
        x = torch.nn.functional.pad(x, (0, w.IC - w.logical_in))
    mm_dtype = torch.float16 if x.dtype == torch.float16 else torch.float32
    xh = hadamard128(x, r_pre=w.rin, s_pre=w.s_in, out_dtype=mm_dtype)
    What = weight if weight is not None else reconstruct(w.code, w.K, w.codebook)
    t = xh @ What.to(mm_dtype)
    padded_out = w.logical_out != w.OC
    target = out if (out is not None and not padded_out) else None
    y = hadamard128(t, r_post=w.rout, s_post=w.s_out, out_dtype=out.dtype if out is not None else x.dtype, out=target)
    if padded_out:
        y = y[:, :w.logical_out]
        if out is not None:
            out.copy_(y)
            y = out
    if w.bias is not None:
        y += w.bias.to(y.dtype)
    return y

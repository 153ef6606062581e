"""A correct GPU linear from the two basic kernels (the fused kernels of ops/fused.py replace it
where they apply): Hadamard(x * s_in * rin) -> matmul with the reconstructed What -> Hadamard ->
* rout * s_out (+ bias for EXL3)."""
from __future__ import annotations

from typing import Optional

import torch

from ..reference import LinearWeights
from ..kernels.fused import check_act_quant
from .fused import fused_handles, fused_linear
from .hadamard import hadamard128
from .reconstruct import reconstruct


def linear(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
           bias32: Optional[torch.Tensor] = None, act_quant: Optional[str] = None) -> torch.Tensor:
    """The GPU linear: the fused single-launch kernel for M <= 256, reconstruct + vendor GEMM above.

    ``act_quant='int8'`` (opt-in, mul1 layers only) sends decode-sized calls (M <= 8) to the
    int8-activation kernels; larger M keep the exact fp16 route."""
    check_act_quant(act_quant, w.codebook)
    if act_quant == "int8" and fused_handles(w.code.device, w.K, x.shape[0], act_quant):
        return fused_linear(x, w, out=out, bias32=bias32, act_quant=act_quant)
    if fused_handles(w.code.device, w.K, x.shape[0]):
        return fused_linear(x, w, out=out, bias32=bias32)
    return linear_unfused(x, w, out=out)


def _mm_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp16 x fp16 -> fp32 product on the vendor GEMM (fp32 output where torch offers it)."""
    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except (TypeError, RuntimeError, NotImplementedError):
        return torch.mm(a, b).float()


def linear_unfused(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
                   weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W for any M: Hadamard(x * s_in * rin) -> fp16
    GEMM with the reconstructed What (fp32 accumulate and output) -> Hadamard * rout * s_out.

    The rotated activations enter the fp16 GEMM scaled per row by a power of two that keeps them
    inside fp16's range (bf16 / fp32 inputs may exceed it); the product is scaled back exactly.
    ``weight`` may pass a precomputed What; ``out`` a [M, out_features] view (unit last stride).
    """
    if w.logical_in != w.IC:
        x = torch.nn.functional.pad(x, (0, w.IC - w.logical_in))
    if x.dtype == torch.float16 and w.s_in is None:
        xh = hadamard128(x, r_pre=w.rin, out_dtype=torch.float16)
        row_scale = None
    else:
        xh32 = hadamard128(x, r_pre=w.rin, s_pre=w.s_in, out_dtype=torch.float32)
        amax = xh32.abs().amax(dim=1, keepdim=True).clamp_min(1.0)
        row_scale = torch.exp2(torch.ceil(torch.log2(amax / 16384.0)).clamp_min(0))   # powers of two
        xh = (xh32 / row_scale).to(torch.float16)
    What = weight if weight is not None else reconstruct(w.code, w.K, w.codebook)
    t = _mm_f32(xh, What)
    if row_scale is not None:
        t *= row_scale
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

"""The coded GEMM for prefill on Hopper, torch entry point (kernel side: escha_jit.kernels.gemm)."""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels import gemm, prep
from ..reference import LinearWeights
from ..trellis import check_rate_codebook, tile_words
from .common import DTYPE_NAMES, arch_of, check_tensor, kernel_for
from .fused import scratch


def gemm_available(dev: torch.device) -> bool:
    """Whether the coded GEMM runs on ``dev``: NVIDIA sm_90 (wgmma). ops/linear routes prefill to
    it only with ESCHA_JIT_PREFILL=gemm (today it is slower than the dense-weight path)."""
    return dev.type == "cuda" and torch.version.hip is None and gemm.supported(arch_of(dev))


def coded_gemm(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
               bias32: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W (+ bias) with the weights decoded inside the
    GEMM (two launches: the prep kernel rotates x once into an fp16 scratch buffer, then the
    GEMM). Any M >= 1; meant for prefill (M in the hundreds and up). Experimental: on the H200 it
    runs at 0.42-0.71x dense bf16 against the dense-weight path's 0.57-0.95x (benchmarks/RESULTS.md,
    session 4), so ops/linear takes it only with ESCHA_JIT_PREFILL=gemm.

    ``x`` fp16 / bf16 / fp32 with unit last stride; ``out`` an optional [M, out_features] view with
    unit last stride (its dtype is the output dtype, default x's); ``bias32`` the bias as fp32.
    Accumulation in fp32 over fp16 products of the rotated activations and the decoded weights
    (the fused kernel's arithmetic), one rounding to the output dtype.
    """
    check_rate_codebook(w.K, w.codebook)
    dev = w.code.device
    if not gemm_available(dev):
        raise ValueError(f"coded_gemm needs an sm_90 NVIDIA GPU (wgmma); got {dev}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, in_features], got shape {list(x.shape)}")
    check_tensor("x", x, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(None, w.logical_in), contiguous=False)
    if x.stride(1) != 1:
        raise ValueError(f"x must have unit stride in its last dim, got strides {x.stride()}")
    check_tensor("code", w.code, dtypes=(torch.int16,), device=dev, shape=(None, None, tile_words(w.K)))
    IC, OC, M = w.IC, w.OC, x.shape[0]
    check_tensor("rin", w.rin, dtypes=(torch.float16,), device=dev, shape=(IC,))
    check_tensor("rout", w.rout, dtypes=(torch.float16,), device=dev, shape=(OC,))
    check_tensor("s_in", w.s_in, dtypes=(torch.float32,), device=dev, shape=(IC,), optional=True)
    check_tensor("s_out", w.s_out, dtypes=(torch.float32,), device=dev, shape=(OC,), optional=True)
    if bias32 is None and w.bias is not None:
        bias32 = w.bias.to(torch.float32)
    check_tensor("bias", bias32, dtypes=(torch.float32,), device=dev, shape=(OC,), optional=True)
    if out is None:
        out = torch.empty(M, w.logical_out, dtype=x.dtype, device=dev)
    else:
        check_tensor("out", out, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(M, w.logical_out), contiguous=False)
        if out.stride(1) != 1:
            raise ValueError(f"out must have unit stride in its last dim, got strides {out.stride()}")
    if M == 0:
        return out
    arch = arch_of(dev)
    ps = prep.spec_for(arch, DTYPE_NAMES[x.dtype])
    pk = kernel_for(ps, dev, prep.ARGS, prep.render_extra(ps))
    gs = gemm.spec_for(arch, w.K, w.codebook, DTYPE_NAMES[out.dtype])
    gk = kernel_for(gs, dev, gemm.ARGS, gemm.render_extra(gs))
    xh, xh_exp = scratch.xh(dev, M, IC)
    stream = torch.cuda.current_stream(dev).cuda_stream
    pk.launch((M,), (prep.THREADS,), (x, x.stride(0), w.rin, w.s_in, xh, xh_exp, IC, w.logical_in), stream=stream)
    gk.launch(gemm.grid(gs, M, OC), (gemm.THREADS,),
              (xh, xh_exp, out, out.stride(0), w.code, w.rout, w.s_out, bias32, M, IC, OC, w.logical_out),
              smem=gemm.smem_bytes(gs), stream=stream)
    return out

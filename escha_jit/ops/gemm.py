"""The coded GEMM for prefill on Hopper, torch entry point (kernel side: escha_jit.kernels.gemm)."""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels import gemm, prep
from ..reference import LinearWeights
from ..runtime import runtime_for
from .common import DTYPE_NAMES, arch_of, check_call, kernel_for
from .fused import prep_kernel, run_prep, scratch


def gemm_available(dev: torch.device) -> bool:
    """Whether the coded GEMM runs on ``dev``: NVIDIA sm_90 (wgmma). ops/linear routes calls of one
    or two token blocks (65..512 rows) on wide layers to it (kernels.gemm.takes_mid_m), others where
    the tuned table's route entry says so (ops.linear.route_for) or with ESCHA_JIT_PREFILL=gemm."""
    return dev.type == "cuda" and torch.version.hip is None and gemm.supported(arch_of(dev))


def coded_gemm(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
               bias32: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W (+ bias) with the weights decoded inside the
    GEMM (two launches: the prep kernel rotates x once into an fp16 scratch buffer, then the
    GEMM). Any M >= 1. At one token block (M <= 256) with OC / 128 column groups that fill the GPU
    it takes 0.50-0.64x the dense-weight path's time on the H200, at two (M <= 512) 0.77-0.97x,
    so ops/linear sends such calls here (kernels.gemm.takes_mid_m; benchmarks/RESULTS.md sessions
    33, 34). At prefill sizes it runs at
    0.48-0.72x dense bf16 where the dense-weight path runs faster (session 11,
    docs/PREFILL_GEMM.md), so ops/linear takes it there only with ESCHA_JIT_PREFILL=gemm.

    ``x`` fp16 / bf16 / fp32 with unit last stride; ``out`` an optional [M, out_features] view with
    unit last stride (its dtype is the output dtype, default x's); ``bias32`` the bias as fp32.
    Accumulation in fp32 over fp16 products of the rotated activations and the decoded weights
    (the fused kernel's arithmetic), one rounding to the output dtype.
    """
    dev = w.code.device
    if not gemm_available(dev):
        raise ValueError(f"coded_gemm needs an sm_90 NVIDIA GPU (wgmma); got {dev}")
    out, bias32 = check_call(x, w, out, bias32)
    IC, M = w.IC, x.shape[0]
    if M == 0:
        return out
    arch = arch_of(dev)
    pk = prep_kernel(dev, DTYPE_NAMES[x.dtype], groups=M > prep.MANY_ROWS)
    gs = gemm.spec_for(arch, w.K, w.codebook, DTYPE_NAMES[out.dtype], share=gemm.share_for(M))
    gk = kernel_for(gs, dev, gemm.ARGS, gemm.render_extra(gs))
    xh, xh_exp = scratch.xh(dev, gemm.padded_rows(gs, M), IC)     # the GEMM reads whole token tiles
    stream = torch.cuda.current_stream(dev).cuda_stream
    run_prep(pk, x, w, xh, xh_exp, stream)
    run_gemm(gk, gs, xh, xh_exp, w, out, bias32, stream)
    return out


def run_gemm(kernel, spec, xh: torch.Tensor, xh_exp: torch.Tensor, w: LinearWeights, out: torch.Tensor,
             bias32: Optional[torch.Tensor], stream: int) -> None:
    """Launch the coded GEMM ``spec`` over the prep kernel's rows (xh with whole token tiles):
    y = out [M, out_features] from M = out.shape[0] tokens."""
    M = out.shape[0]
    args = (xh, xh_exp, out, out.stride(0), w.code, w.rout, w.s_out, bias32, M, w.IC, w.OC, w.logical_out,
            _x_tensor_map(xh, gemm.padded_rows(spec, M), w.IC, spec.params["tokens"]))
    kernel.launch(gemm.grid(spec, M, w.OC), (gemm.THREADS,), args, smem=gemm.smem_bytes(spec), stream=stream,
                  cluster=gemm.share_of(spec))


_tensor_maps: dict = {}


def _x_tensor_map(xh: torch.Tensor, rows: int, IC: int, tokens: int):
    """The TMA descriptor of the prep buffer's [rows][IC] fp16 activations in [tokens][64] boxes,
    built once per (buffer address, rows, IC, tokens): encoding one costs Python and driver time, and
    a CUDA graph keeps the descriptor it captured (the buffer stays where it is: ops.fused.scratch)."""
    key = (xh.device.index, xh.data_ptr(), rows, IC, tokens)
    tm = _tensor_maps.get(key)
    if tm is None:
        if len(_tensor_maps) > 64:
            _tensor_maps.clear()
        tm = _tensor_maps[key] = runtime_for(xh.device).tensor_map_2d(xh.data_ptr(), rows, IC, tokens, 64)
    return tm

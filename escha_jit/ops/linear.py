"""The GPU linear for any M. Which path a call takes is measured per layer shape, dtype and M
bucket by escha_jit.tune (route entries of the tuned table, route_for); where there is none, the
built-in rule (rule_route): up to kernels.fused.ROUTE_MAX_M rows (NVIDIA 64, AMD 128) the fused
single-launch kernel of ops/fused.py. Above, on Hopper up to 512 rows (two token blocks), the coded
wgmma GEMM of ops/gemm.py (weights decoded inside the GEMM) where its column groups fill the GPU
(kernels.gemm.takes_mid_m: OC >= ~12.7k on an H200), and above 256 rows with ESCHA_JIT_PREFILL=gemm.
Otherwise the dense path: the original-basis weight W = diag(s_in*rin) Hb What Hb diag(rout*s_out)
is built once per call in fp16 (ops/dense.py) and one vendor GEMM computes y = x @ W (+ bias), so
no Hadamard or scale touches the activations.

fp16 activations with an fp16 output go straight into cuBLAS / hipBLASLt (bias via addmm). bf16
and fp32 activations keep the 1e-3 error budget without a bf16 weight (its rounding alone costs
~1.6e-3): they are cast to fp16 scaled per row by an exact power of two (templates/rowscale.hip.j2,
stage "in"), multiplied, and scaled back with the bias added and one rounding to the output dtype
(stage "out"). Into a 16-bit output (bf16 activations' case) the dense-weight kernel also reports
max |W|, and the row's power of two keeps rowmax |xs| * in_features * max |W| <= 2^15: no output
of the GEMM can leave fp16's range, so the GEMM writes fp16 (rounding t to fp16 costs ~2e-4
relative, far inside a bf16 output's own rounding) and the output pass reads half the bytes. Into
an fp32 output the row is only kept inside fp16's range and the GEMM writes fp32.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch

from .. import env
from ..kernels import gemm, rowscale
from ..reference import LinearWeights
from ..autotune.table import ROUTE_MIN_M, route_bucket, route_key, tables
from ..kernels.fused import check_act_quant
from .common import DTYPE_NAMES, arch_of, check_call, check_tensor, kernel_for
from .dense import dense_weight
from .fused import MAX_M, fused_fits_call, fused_handles, fused_linear, sm_count
from .gemm import coded_gemm, gemm_available

log = logging.getLogger(__name__)


def rule_route(dev: torch.device, K: float, OC: int, M: int) -> str:
    """The route the built-in rule gives a call of M rows (no act_quant): 'fused' up to
    ROUTE_MAX_M, 'gemm' for one or two token blocks on wide layers on Hopper (or above 256 rows
    with ESCHA_JIT_PREFILL=gemm), else 'dense'."""
    if fused_handles(dev, K, M):
        return "fused"
    if gemm_available(dev) and (gemm.takes_mid_m(OC, M, sm_count(dev)) or (M > MAX_M and env.prefill_route() == "gemm")):
        return "gemm"
    return "dense"


def route_for(dev: torch.device, w: LinearWeights, dtype: torch.dtype, M: int) -> str:
    """The path a call of M rows with activations of ``dtype`` takes: the tuned table's route
    entry for its bucket (autotune.table.ROUTE_BUCKETS, measured by escha_jit.tune) where there is
    one and the path can run here, else rule_route. Decode sizes (M <= ROUTE_MIN_M) always take
    the rule (the fused kernel), and ESCHA_JIT_PREFILL=gemm wins above 256 rows."""
    bucket = route_bucket(M) if M > ROUTE_MIN_M else None
    if bucket is not None and not (M > MAX_M and env.prefill_route() == "gemm"):
        e = tables().route(arch_of(dev), route_key(w.K, w.codebook, w.IC, w.OC, DTYPE_NAMES.get(dtype, "?"), bucket))
        if e is not None and route_runs(dev, w.K, M, e.route):
            return e.route
    return rule_route(dev, w.K, w.OC, M)


def route_runs(dev: torch.device, K: float, M: int, route: str) -> bool:
    """Whether ``route`` can serve a call of M rows on ``dev``."""
    if route == "fused":
        return fused_fits_call(dev, K, M)
    if route == "gemm":
        return gemm_available(dev)
    return True


def linear(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
           bias32: Optional[torch.Tensor] = None, act_quant: Optional[str] = None) -> torch.Tensor:
    """The GPU linear: the path of route_for (the tuned table's route entry, else the rule: the
    fused single-launch kernel for M <= ROUTE_MAX_M (NVIDIA 64, AMD 128); above, the coded GEMM of
    ops/gemm.py on Hopper for M <= 512 where its blocks fill the GPU (kernels.gemm.takes_mid_m)
    and, with ESCHA_JIT_PREFILL=gemm, for M > 256; else dense W + vendor GEMM).

    ``act_quant='int8'`` (opt-in, mul1 layers only) sends decode-sized calls (M <= 8) to the
    int8-activation kernels; larger M keep the exact fp16 route."""
    check_act_quant(act_quant, w.codebook)
    if act_quant == "int8" and fused_handles(w.code.device, w.K, x.shape[0], act_quant):
        return fused_linear(x, w, out=out, bias32=bias32, act_quant=act_quant)
    route = route_for(w.code.device, w, x.dtype, x.shape[0])
    if route == "fused":
        return fused_linear(x, w, out=out, bias32=bias32)
    if route == "gemm":
        return coded_gemm(x, w, out=out, bias32=bias32)
    return linear_unfused(x, w, out=out, bias32=bias32)


_MM_DTYPE_OK = True


def _mm_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp16 x fp16 -> fp32 product [M, N] on the vendor GEMM (fp32 accumulate and output).

    Where this torch has no fp32-output fp16 GEMM, falls back to an fp32 GEMM (slower, exact
    operands): rounding the product to fp16 would add error and could overflow."""
    global _MM_DTYPE_OK
    if _MM_DTYPE_OK:
        try:
            return torch.mm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError) as e:
            _MM_DTYPE_OK = False
            log.warning("torch.mm(..., out_dtype=float32) is unavailable (%s); using an fp32 GEMM", e)
    return torch.mm(a.float(), b.float())


def _check_weight(weight: torch.Tensor, w: LinearWeights) -> None:
    check_tensor("weight", weight, dtypes=(torch.float16,), device=w.code.device, shape=(w.IC, w.OC),
                 contiguous=False)
    if weight.stride(1) != 1:
        raise ValueError(f"weight must have unit column stride, got strides {weight.stride()}")


def linear_unfused(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
                   weight: Optional[torch.Tensor] = None, bias32: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W (+ bias) for any M, through the dense weight.

    ``x`` fp16 / bf16 / fp32 with unit last stride (rows may be strided); ``out`` an optional
    [M, out_features] view with unit last stride (e.g. a column slice), whose dtype is the output
    dtype (default x's); ``weight`` a precomputed :func:`escha_jit.ops.dense.dense_weight` in fp16
    [IC, OC] (reuse it across calls of one layer); ``bias32`` the layer's bias as fp32 [OC].
    Padded dims are sliced off W, never padded onto x.
    """
    dev = w.code.device
    if dev.type != "cuda":
        raise ValueError(f"linear_unfused needs the layer on a CUDA/ROCm device; its code is on {dev}")
    out, bias32 = check_call(x, w, out, bias32)
    M, n_in, n_out = x.shape[0], w.logical_in, w.logical_out
    # fp16 GEMM output under a bound on |W| (module docstring); a caller's weight has no bound
    bounded = weight is None and rowscale.bounded(DTYPE_NAMES[x.dtype], DTYPE_NAMES[out.dtype])
    amax = torch.zeros(1, dtype=torch.int32, device=dev) if bounded else None
    if weight is None:
        weight = dense_weight(w, torch.float16, amax=amax)
    else:
        _check_weight(weight, w)
    if M == 0 or n_out == 0:
        return out
    Wv = weight[:n_in, :n_out]          # rows: contiguous; columns: a strided GEMM operand, no copy

    if x.dtype == torch.float16 and out.dtype == torch.float16:
        # the GEMM writes a contiguous result (a strided out= takes another cuBLAS route whose
        # bias epilogue rounds differently); a column-slice out gets a copy, bit-identical
        dst = out if out.is_contiguous() else torch.empty(M, n_out, dtype=out.dtype, device=dev)
        if bias32 is None:
            torch.mm(x, Wv, out=dst)
        else:
            torch.addmm(bias32[:n_out].to(torch.float16), x, Wv, out=dst)
        if dst is not out:
            out.copy_(dst)
        return out

    arch = arch_of(dev)
    stream = torch.cuda.current_stream(dev).cuda_stream
    if x.dtype == torch.float16:
        xs, row_exp = x, None
    else:
        xs = torch.empty(M, n_in, dtype=torch.float16, device=dev)
        row_exp = torch.empty(M, dtype=torch.int32, device=dev)
        spec = rowscale.spec_in(arch, DTYPE_NAMES[x.dtype])
        k = kernel_for(spec, dev, rowscale.ARGS_IN, rowscale.render_extra(spec))
        k.launch((M,), (rowscale.THREADS,), (x, x.stride(0), xs, xs.stride(0), row_exp, n_in, amax), stream=stream)
    t = torch.mm(xs, Wv) if bounded else _mm_f32(xs, Wv)
    spec = rowscale.spec_out(arch, DTYPE_NAMES[out.dtype], DTYPE_NAMES[t.dtype])
    k = kernel_for(spec, dev, rowscale.ARGS_OUT, rowscale.render_extra(spec))
    k.launch((M,), (rowscale.THREADS,), (t, t.stride(0), out, out.stride(0), row_exp, bias32, n_out), stream=stream)
    return out

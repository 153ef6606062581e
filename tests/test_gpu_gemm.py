"""The coded wgmma GEMM (prefill on Hopper, ops/gemm.py) against the float64 reference (skipped
without an sm_90 GPU; run on the H200 by scripts/device_run.sh)."""

import pytest
import torch

from escha_jit import reference as R
from escha_jit.ops import fused as F
from escha_jit.ops.gemm import coded_gemm, gemm_available
from escha_jit.ops.common import arch_of
from escha_jit.ops.linear import linear, linear_unfused
from escha_jit.trellis import all_rate_codebooks, rate_name
from conftest import gpu, rel_rms
from test_gpu_kernels import _layer

pytestmark = gpu
DEV = "cuda"
PAIRS = all_rate_codebooks()
TOL = {torch.float16: 1e-3, torch.bfloat16: 2.5e-3, torch.float32: 1e-3}   # output rounding included


@pytest.fixture(autouse=True)
def _needs_hopper():
    if not gemm_available(torch.device(DEV)):
        pytest.skip(f"the coded GEMM runs on wgmma (sm_90) only; this GPU is {arch_of(torch.device(DEV))} "
                    f"(its prefill takes the dense-weight path, tested in test_gpu_kernels.py)")


@pytest.mark.parametrize("K,cb", PAIRS, ids=[f"K{rate_name(k)}_{cb}" for k, cb in PAIRS])
def test_gemm_every_rate_and_codebook(K, cb):
    w = _layer(512, 384, K, cb, seed=int(4 * K))
    x = torch.randn(300, 512, device=DEV).half()
    ref = x.double().cpu() @ R.dense_weight(w.to("cpu"))
    assert rel_rms(coded_gemm(x, w), ref) < 1e-3


@pytest.mark.parametrize("M", [1, 17, 255, 256, 257, 1024, 1500])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gemm_every_m_and_dtype(M, dtype):
    w = _layer(1024, 512, 2.0, "mcg", seed=M)
    x = torch.randn(M, 1024, device=DEV).to(dtype)
    ref = x.double().cpu() @ R.dense_weight(w.to("cpu"))
    y = coded_gemm(x, w)
    assert y.dtype == dtype and rel_rms(y, ref) < TOL[dtype]
    # the same arithmetic as the fused kernel's fp16 route: products of the same fp16 operands
    if M <= F.MAX_M:
        yf = F.fused_linear(x, w, cfg=F.FusedConfig(warps=8, m_tiles=-(-M // 16) if M > 16 else 1, xh=1,
                                                     min_blocks=1, rows_per_stage=4))
        assert rel_rms(y, yf.double().cpu()) < TOL[dtype]


@pytest.mark.parametrize("variant", [dict(tokens=192), dict(tokens=128), dict(tokens=64), dict(stages=2),
                                     dict(share=2), dict(share=4), dict(share=2, stages=2, tokens=64)],
                         ids=["t192", "t128", "t64", "s2", "c2", "c4", "c2s2t64"])
@pytest.mark.parametrize("K,cb,M", [(2.0, "mcg", 300), (3.0, "mul1", 1024), (4.0, "3inst", 17)])
def test_gemm_variants_same_bits(K, cb, M, variant):
    """Block-shape variants (kernels.gemm.spec_for: tokens per block, ring stages - with 2 stages
    the epilogue takes 64 tokens per pass -, clusters of token blocks that split the decode) change
    which tokens share a block and which block decodes a weight, not the sums: each
    output is the same fp32 accumulation over the same k order, so the same bits as the default
    kernel; also replayed from a CUDA graph."""
    from escha_jit.kernels import gemm as G
    from escha_jit.ops.common import DTYPE_NAMES, kernel_for
    from escha_jit.ops.gemm import run_gemm
    w = _layer(2048, 1024, K, cb, seed=9)
    x = torch.randn(M, 2048, device=DEV).half()
    dev = torch.device(DEV)
    ys = []
    for v in ({}, variant):
        gs = G.spec_for(arch_of(dev), K, cb, "f16", **v)
        gk = kernel_for(gs, dev, G.ARGS, G.render_extra(gs))
        xh, xe = F.scratch.xh(dev, G.padded_rows(gs, M), 2048)
        y = torch.full((M, 1024), float("nan"), dtype=torch.float16, device=DEV)

        def call(y=y, gs=gs, gk=gk, xh=xh, xe=xe):
            s = torch.cuda.current_stream().cuda_stream
            F.run_prep(F.prep_kernel(dev, DTYPE_NAMES[x.dtype]), x, w, xh, xe, s)
            run_gemm(gk, gs, xh, xe, w, y, None, s)
        call()
        ys.append(y.clone())
    assert rel_rms(ys[1], x.double().cpu() @ R.dense_weight(w.to("cpu"))) < 1e-3
    assert torch.equal(ys[0], ys[1])
    y.fill_(float("nan"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, ys[0])


def test_gemm_large_shape_padded_dims_bias_and_slice():
    w = _layer(4096, 1024, 3.0, "mul1", seed=5, bias=True, escha=False)
    x = torch.randn(700, w.logical_in, device=DEV).half()
    ref = x.double().cpu() @ R.dense_weight(w.to("cpu")) + w.bias.double().cpu()
    big = torch.full((700, 3 * w.logical_out), 7.0, dtype=torch.float16, device=DEV)
    y = coded_gemm(x, w, out=big[:, w.logical_out:2 * w.logical_out])
    assert rel_rms(y, ref) < 1e-3
    assert (big[:, :w.logical_out] == 7).all() and (big[:, 2 * w.logical_out:] == 7).all()
    w2 = _layer(200, 300, 4.0, "3inst", seed=6, bias=True, escha=False)
    x2 = torch.randn(400, w2.logical_in, device=DEV).half()
    ref2 = x2.double().cpu() @ R.dense_weight(w2.to("cpu"))[:200, :300] + w2.bias.double().cpu()[:300]
    assert rel_rms(coded_gemm(x2, w2), ref2) < 1e-3


def test_gemm_large_bf16_activations():
    w = _layer(512, 256, 2.0, "mcg", 3)
    x = (torch.randn(300, 512, device=DEV) * 3e5).to(torch.bfloat16)       # beyond fp16's range
    x[7] *= 1e-6                                                            # rows scale independently
    ref = x.double().cpu() @ R.dense_weight(w.to("cpu"))
    y = coded_gemm(x, w, out=torch.empty(300, 256, device=DEV))
    assert torch.isfinite(y).all() and rel_rms(y, ref) < 1e-3 and rel_rms(y[7], ref[7]) < 1e-3


def test_linear_routes_prefill_to_gemm_on_request(monkeypatch):
    w = _layer(1024, 384, 4.0, "mul1", 9, bias=True)
    x = torch.randn(600, 1024, device=DEV).half()
    assert torch.equal(linear(x, w), linear_unfused(x, w))               # the default: the dense path
    monkeypatch.setenv("ESCHA_JIT_PREFILL", "gemm")
    y = linear(x, w)
    assert torch.equal(y, coded_gemm(x, w)) and torch.equal(y, linear(x, w))     # deterministic
    monkeypatch.setenv("ESCHA_JIT_PREFILL", "fast")
    with pytest.raises(ValueError, match="ESCHA_JIT_PREFILL"):
        linear(x, w)


def test_gemm_graph_capture():
    w = _layer(1024, 512, 2.0, "mcg", 11)
    x = torch.randn(512, 1024, device=DEV).half()
    y = coded_gemm(x, w)
    out = torch.empty_like(y)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        coded_gemm(x, w, out=out)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        coded_gemm(x, w, out=out)
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, y)


def test_gemm_bad_input():
    w = _layer(256, 256, 2.0, "mcg", 8)
    with pytest.raises(ValueError, match="x has shape"):
        coded_gemm(torch.zeros(300, 128, device=DEV).half(), w)
    with pytest.raises(TypeError, match="x must be"):
        coded_gemm(torch.zeros(300, 256, device=DEV, dtype=torch.int32), w)
    with pytest.raises(ValueError, match="unit stride"):
        coded_gemm(torch.zeros(256, 300, device=DEV).half().t(), w)
    with pytest.raises(ValueError, match="out has shape"):
        coded_gemm(torch.zeros(300, 256, device=DEV).half(), w, out=torch.empty(300, 128, device=DEV).half())

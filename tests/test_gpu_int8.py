"""The opt-in int8-activation fused kernels (act_quant='int8', mul1) on the GPU, against their
reference (escha_jit.reference_int8: same quantization, exact mul1 weights, float64 after it)
and, for the error report, against the exact float64 product."""
import dataclasses

import pytest
import torch

from escha_jit import reference as R
from escha_jit import reference_int8 as Q
from escha_jit.ops import fused as F
from escha_jit.ops.linear import linear
from escha_jit.synth import random_layer
from escha_jit.trellis import all_rate_codebooks, rate_name
from conftest import gpu, rel_rms

pytestmark = gpu
DEV = "cuda"
MUL1_RATES = [k for k, cb in all_rate_codebooks() if cb == "mul1"]
# GPU vs the route's reference: the kernels sum the same int8 products in a different fp32 order
# and may round a rare q the other way (v * 127/amax within an ulp of .5)
TOL_ROUTE = {torch.float16: 2e-3, torch.bfloat16: 5e-3, torch.float32: 2e-3}


def _layer(IC, OC, K, seed, bias=False, escha=True):
    return random_layer(IC, OC, K, "mul1", seed=seed, bias=bias, escha_scales=escha).to(DEV)


def _check(w, M, dtype, seed=0, out_dtype=None, **kw):
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(M, w.logical_in, device=DEV, generator=g).to(dtype)
    y = F.fused_linear(x, w, act_quant="int8", out_dtype=out_dtype, **kw)
    assert y.shape == (M, w.logical_out) and y.dtype == (out_dtype or dtype)
    wc = w.to("cpu")
    emu = Q.forward_int8(x.cpu(), wc, out_dtype=torch.float64)
    exact = x.double().cpu() @ R.dense_weight(wc)[: w.logical_in, : w.logical_out]
    if w.bias is not None:
        exact += w.bias.double().cpu()[: w.logical_out]
    route_err, err = rel_rms(y, emu), rel_rms(y, exact)
    assert route_err < TOL_ROUTE[y.dtype], (M, dtype, route_err)
    assert err < 2e-2, (M, dtype, err)             # the route's own error: ~0.6 %
    return err


@pytest.mark.parametrize("K", MUL1_RATES, ids=[f"K{rate_name(k)}" for k in MUL1_RATES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_int8_every_rate(K, dtype):
    w = _layer(512, 384, K, seed=int(4 * K))
    for M in (1, 5, 8):
        _check(w, M, dtype, seed=M)


@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 6, 7, 8])
def test_int8_every_m(M):
    _check(_layer(1024, 256, 3.0, seed=M), M, torch.float16, seed=M)


@pytest.mark.parametrize("shape", [(4096, 512), (14336, 256), (8192, 1024)])
def test_int8_split_k(shape):
    w = _layer(*shape, 2.0, seed=7)
    for M in (1, 4, 8):
        _check(w, M, torch.float16, seed=M)


@pytest.mark.parametrize("K", [1.5, 2.0, 4.0, 8.0])
def test_int8_dot_route(K):
    """The M = 1 dot route (the gfx12 default there), run with NVIDIA's lane layout: the same
    generic code (per-column dp4a partial sums, lane reduction, 128-block fold) as on AMD."""
    cfg = dataclasses.replace(F.default_config_i8(1), dot=1)
    w = _layer(1024, 384, K, seed=int(2 * K), bias=True, escha=False)
    for dtype in (torch.float16, torch.bfloat16):
        _check(w, 1, dtype, cfg=cfg)
    _check(_layer(4096, 256, K, seed=3), 1, torch.float16, cfg=cfg, launch=F.FusedLaunch(4))
    with pytest.raises(ValueError, match="M = 1"):
        F.fused_linear(torch.randn(2, 1024, device=DEV).half(), w, act_quant="int8", cfg=cfg)


def test_int8_fp32_output_padding_bias_and_explicit_launch():
    w = _layer(200, 300, 3.5, seed=8, bias=True, escha=False)
    _check(w, 3, torch.float16, out_dtype=torch.float32)
    w = _layer(2048, 256, 4.0, seed=9)
    for S in (1, 2, 16):
        _check(w, 4, torch.bfloat16, launch=F.FusedLaunch(S))


def test_int8_large_activations_and_zero_rows():
    w = _layer(512, 256, 2.0, seed=10)
    x = torch.randn(4, 512, device=DEV, dtype=torch.bfloat16) * 3e5       # beyond fp16's range: scales absorb it
    x[2] = 0
    y = F.fused_linear(x, w, act_quant="int8")
    exact = x.double().cpu() @ R.dense_weight(w.to("cpu"))
    assert torch.isfinite(y.float()).all() and (y[2] == 0).all()
    assert rel_rms(y, exact) < 2e-2


def test_int8_deterministic_graph_and_routing():
    w = _layer(4096, 512, 2.0, seed=11)
    x = torch.randn(4, 4096, device=DEV).half()
    y0 = F.fused_linear(x, w, act_quant="int8")
    out = torch.empty_like(y0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        F.fused_linear(x, w, out=out, act_quant="int8")
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, y0)
    # linear(): int8 for M <= 8, the exact fp16 route above
    assert torch.equal(linear(x, w, act_quant="int8"), y0)
    xb = torch.randn(100, 4096, device=DEV).half()
    assert torch.equal(linear(xb, w, act_quant="int8"), linear(xb, w))
    with pytest.raises(ValueError, match="mul1"):
        F.fused_linear(x, random_layer(4096, 256, 2.0, "mcg").to(DEV), act_quant="int8")
    with pytest.raises(ValueError, match="M <= 8"):
        F.fused_linear(xb, w, act_quant="int8")


def test_int8_escha_linear_module():
    from escha_jit.nn import EschaLinear
    w = random_layer(1024, 256, 2.0, "mul1", seed=12)
    lin = EschaLinear(w, act_quant="int8").cuda()
    x = torch.randn(2, 3, 1024, device=DEV).half()          # 6 tokens: the int8 route
    y = lin(x)
    assert y.shape == (2, 3, 256)
    assert torch.equal(y.reshape(6, 256), F.fused_linear(x.reshape(6, 1024), lin.weights, act_quant="int8"))

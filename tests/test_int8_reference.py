"""The int8-activation route's reference (escha_jit.reference_int8) and its option checks: CPU."""
import pytest
import torch

from escha_jit import reference as R
from escha_jit import reference_int8 as Q
from escha_jit.kernels import fused
from escha_jit.kernels.registry import shipped_specs
from escha_jit.synth import random_layer
from conftest import rel_rms


def test_exact_mul1_values_round_to_the_codebook():
    states = torch.arange(65536, dtype=torch.int32)
    exact = Q.mul1_exact_values(states)
    table = R.codebook_table("mul1")
    assert torch.equal(exact.to(torch.float16), table)             # one rounding apart, for every state
    ulp = torch.abs(exact - table.double())
    assert float(ulp.max()) <= 2.0 ** -11 * 4                      # <= half an fp16 ulp at |w| < 4


def test_quantize_blocks():
    v = torch.tensor([[0.5, -1.0, 0.25, 0.0] * 32, [0.0] * 128])
    q, step = Q.quantize_blocks(v)
    assert q[0, :4].tolist() == [64, -127, 32, 0]                  # 63.5 rounds half to even: 64
    assert step[0, 0] == torch.tensor(1.0 / 127, dtype=torch.float32) and step[1, 0] == 0
    assert (q[1] == 0).all()


@pytest.mark.parametrize("K", [2.0, 3.5, 4.0])
def test_int8_route_error_band(K):
    """The route is a real approximation: about 0.5 % relative RMS, not exact, not garbage."""
    w = random_layer(512, 256, K, "mul1", seed=int(2 * K), escha_scales=True)
    x = torch.randn(5, 512)
    y = Q.forward_int8(x, w, out_dtype=torch.float64)
    ref = x.double() @ R.dense_weight(w)
    err = rel_rms(y, ref)
    assert 1e-3 < err < 2e-2, err


def test_int8_route_bias_and_padding():
    w = random_layer(200, 300, 3.0, "mul1", seed=1, bias=True, escha_scales=False)
    x = torch.randn(3, 200)
    y = Q.forward_int8(x, w, out_dtype=torch.float64)
    ref = x.double() @ R.dense_weight(w)[:200, :300] + w.bias.double()[:300]
    assert y.shape == (3, 300) and rel_rms(y, ref) < 2e-2


def test_int8_option_errors():
    with pytest.raises(ValueError, match="mul1"):
        fused.spec_for("sm_90", 2.0, "mcg", "f16", "f16", fused.default_config_i8(1), act_quant="int8")
    with pytest.raises(ValueError, match="act_quant"):
        fused.check_act_quant("fp8", "mul1")
    with pytest.raises(ValueError, match="M <= 8"):
        fused.default_config_i8(9)
    with pytest.raises(ValueError, match="mul1"):
        Q.forward_int8(torch.randn(1, 256), random_layer(256, 128, 2.0, "mcg"))


def test_int8_dot_route_defaults():
    assert fused.default_config_i8(1, "amd").dot == 1                  # gfx12: M = 1 on v_dot4
    assert fused.default_config_i8(2, "amd").dot == 0 and fused.default_config_i8(1).dot == 0
    assert "dot" not in fused.default_config_i8(1).tile()              # off: spec keys unchanged
    with pytest.raises(ValueError, match="dot=1"):
        fused.spec_for("sm_90", 2.0, "mul1", "f16", "f16", fused.FusedConfig(dot=1))
    amd = [s for s, _ in shipped_specs("gfx1201") if s.op == "fused_i8"]
    assert any(s.params.get("dot") for s in amd) and not all(s.params.get("dot") for s in amd)


def test_int8_kernels_are_named_and_shipped():
    specs = [s for s, _ in shipped_specs("sm_90") if s.op == "fused_i8"]
    assert specs and all(s.codebook == "mul1" for s in specs)
    assert all(s.kernel_name().startswith("escha_fused_i8_") for s in specs)
    assert {s.K for s in specs} == {k for k, cb in __import__("escha_jit.trellis", fromlist=["x"]).all_rate_codebooks()
                                    if cb == "mul1"}
    s = specs[0]
    assert fused.render_extra(s)["i8"] is True
    assert fused.smem_layout(fused.FusedConfig(**s.params), s.K, 4, 1024, i8=True).total > \
        fused.smem_layout(fused.FusedConfig(**s.params), s.K, 4, 1024).total


def test_escha_linear_act_quant_option():
    from escha_jit.nn import EschaLinear
    lin = EschaLinear(random_layer(256, 128, 2.0, "mul1"), act_quant="int8")
    assert "act_quant=int8" in repr(lin)
    x = torch.randn(3, 256)
    # the CPU (reference) backend stays exact whatever the option
    assert torch.equal(lin(x), EschaLinear(random_layer(256, 128, 2.0, "mul1"))(x))
    with pytest.raises(ValueError, match="mul1"):
        EschaLinear(random_layer(256, 128, 2.0, "mcg"), act_quant="int8")

"""The torch reference against the reference runtime's own GPU outputs (tests/golden/exl3)."""
import json

import pytest
import torch

from escha_jit import reference as R
from escha_jit.trellis import all_rate_codebooks, rate_name
from conftest import golden, golden_trellis, parse_case, rel_rms

RECON = "golden_recon_small.safetensors"
CASES = json.loads(golden(RECON)[1]["configs"])


def test_golden_covers_all_27_pairs():
    assert sorted(CASES) == sorted(f"K{rate_name(k)}_{cb}" for k, cb in all_rate_codebooks())


@pytest.mark.parametrize("case", CASES)
def test_states_and_dense_bit_exact(case):
    g, _ = golden(RECON)
    K, cb = parse_case(case)
    code = g[f"{case}.trellis"]
    states = R.unpack_states(code, K)
    assert torch.equal(states.to(torch.int16), g[f"{case}.states"])
    dense = R.reconstruct(code, K, cb)
    assert dense.dtype == torch.float16 and dense.shape == (256, 256)
    assert torch.equal(dense.view(torch.int16), g[f"{case}.dense"].view(torch.int16))
    assert torch.equal(R.pack(states, K), code)


def test_worked_example():
    code = torch.arange(64, dtype=torch.int16).reshape(1, 1, 64)
    s = R.unpack_states(code, 4)[0, 0]
    assert [int(v) for v in s[:4]] == [0x03E0, 0x3E00, 0xE000, 0x0001]
    assert int(s[255]) == 0x003E


def _ulp_diff(a: torch.Tensor, b: torch.Tensor) -> int:
    def mono(t):
        i = t.view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)
    return int((mono(a) - mono(b)).abs().max())


@pytest.mark.parametrize("variant,kwargs", [
    ("h_none", {}), ("h_pre", {"pre": True}), ("h_post", {"post": True}), ("h_none_s2", {"out_scale": 2.0})])
def test_hadamard_fp16_within_one_ulp(variant, kwargs):
    g, _ = golden("golden_had.safetensors")
    x, s = g["had.x16"], g["had.scale"]
    y = R.hadamard128(x, pre_scale=s if kwargs.get("pre") else None, post_scale=s if kwargs.get("post") else None,
                      out_scale=kwargs.get("out_scale", 1.0))
    assert y.dtype == torch.float16
    assert _ulp_diff(y, g[f"had.{variant}"]) <= 1


@pytest.mark.parametrize("variant", ["f_pre", "f_post"])
def test_hadamard_fp32(variant):
    g, _ = golden("golden_had.safetensors")
    s = g["had.scale"]
    y = R.hadamard128(g["had.x32"], pre_scale=s if variant == "f_pre" else None,
                      post_scale=s if variant == "f_post" else None)
    assert y.dtype == torch.float32
    assert rel_rms(y, g[f"had.{variant}"]) < 1e-6


def test_original_basis_weight_matches_runtime():
    g, _ = golden("golden_had.safetensors")
    cases = sorted({k[3:-2] for k in g if k.startswith("rh.") and k.endswith(".w")})
    assert len(cases) == 5
    for c in cases:
        K, cb = parse_case(c)
        w = R.dense_weight(R.LinearWeights(g[f"rh.{c}.trellis"], K, cb, g[f"rh.{c}.suh"], g[f"rh.{c}.svh"]))
        # the runtime computes this in fp16 arithmetic: about 1e-3 from the exact weight
        assert rel_rms(w, g[f"rh.{c}.w"]) < 1.5e-3, c


def _gemm_cases(fname):
    g, meta = golden(fname)
    return sorted({k.split(".")[0] for k in g})


def _check_gemm(fname, case):
    g, meta = golden(fname)
    K, cb = parse_case(case)
    IC, OC = (int(v) for v in case.rsplit("_", 1)[1].split("x"))
    code = golden_trellis(int(meta[f"{case}.seed"]), IC, OC, K)
    import hashlib
    assert hashlib.sha256(code.numpy().tobytes()).hexdigest() == meta[f"{case}.trellis_sha256"]
    layer = R.LinearWeights(code, K, cb, g[f"{case}.suh"], g[f"{case}.svh"], bias=g.get(f"{case}.bias"))
    W = R.reconstruct(code, K, cb)
    checked = 0
    for key, ref in g.items():
        if not key.startswith(case + ".M") or ".y" not in key:
            continue
        mkey, yname = key[len(case) + 1:].split(".")
        path = meta.get(f"{case}.{mkey}.path{yname[1:]}", "")
        y = R.forward(g[f"{case}.{mkey}.x"], layer, weight=W, out_dtype=ref.dtype)
        if "int8" in path:          # the runtime's int8-activation path: about 1e-2 by design
            assert rel_rms(y, ref) < 2e-2, (key, path)
        else:
            assert rel_rms(y, ref) < 2e-3, (key, path)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("case", _gemm_cases("golden_gemm_n4096_part0.safetensors"))
def test_forward_golden_gemm(case):
    _check_gemm("golden_gemm_n4096_part0.safetensors", case)


@pytest.mark.parametrize("case", _gemm_cases("golden_gemm_int8off.safetensors"))
def test_forward_golden_gemm_int8off(case):
    _check_gemm("golden_gemm_int8off.safetensors", case)

"""The Hadamard and reconstruct kernels (templates/hadamard.hip.j2, templates/reconstruct.hip.j2)
run on the CPU (tests/host/hadamard_host.cpp, reconstruct_host.cpp: the grid's blocks in turn, their
threads as std::threads, the shuffles per wave) and compared with the reference runtime's golden
vectors, as tests/test_gpu_kernels.py compares the GPU's: the same ulp and bit-for-bit bounds."""
import functools

import numpy as np
import pytest
import torch

from escha_jit import reference as R
from escha_jit.trellis import rate_name
from escha_jit.kernels import hadamard, reconstruct
from conftest import golden, rel_rms, ulps
from host_kernel import aligned_parts, build, run_binary

BYTES = {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4}
NAMES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}


@functools.cache
def hadamard_binary(din: str, dout: str) -> str:
    spec = hadamard.spec_for("sm_90", din, dout)
    return build(spec, hadamard.render_extra(spec), "hadamard_host.cpp", [f"ESCHA_THREADS={hadamard.THREADS}"])


def run_hadamard(x, r_pre=None, s_pre=None, r_post=None, s_post=None, out_scale=1.0, out_dtype=None):
    """ops.hadamard.hadamard128's kernel call on the CPU: y = H128(x * pre) * scale * post per 128-block"""
    out_dtype = out_dtype or x.dtype
    rows, n = x.shape
    scale = np.float32(R.HAD_SCALE_F32 * out_scale)
    hdr = np.array([rows, n, BYTES[x.dtype], BYTES[out_dtype], r_pre is not None, s_pre is not None,
                    r_post is not None, s_post is not None, 0] + [0] * 7, np.int32)
    hdr[8] = scale.view(np.int32)
    parts = [hdr.tobytes(), x.contiguous().view(torch.uint8).numpy().tobytes()]
    parts += [t.contiguous().view(torch.uint8).numpy().tobytes() for t in (r_pre, s_pre, r_post, s_post) if t is not None]
    raw = run_binary(hadamard_binary(NAMES[x.dtype], NAMES[out_dtype]), aligned_parts(parts), timeout=300)
    return torch.from_numpy(raw.copy()).view(out_dtype).reshape(rows, n)


@pytest.mark.parametrize("variant", ["h_none", "h_pre", "h_post", "h_none_s2"])
def test_hadamard_kernel_on_host_golden_fp16(variant):
    # h_pre with fp16 x and r_pre alone is the reference runtime's fp16 product x * r_pre
    g, _ = golden("golden_had.safetensors")
    x, s = g["had.x16"], g["had.scale"]
    y = run_hadamard(x, r_pre=s if variant == "h_pre" else None, r_post=s if variant == "h_post" else None,
                     out_scale=2.0 if variant == "h_none_s2" else 1.0)
    assert ulps(y, g[f"had.{variant}"]) <= 1


@pytest.mark.parametrize("variant", ["f_pre", "f_post"])
def test_hadamard_kernel_on_host_golden_fp32(variant):
    g, _ = golden("golden_had.safetensors")
    x, s = g["had.x32"], g["had.scale"]
    y = run_hadamard(x, r_pre=s if variant == "f_pre" else None, r_post=s if variant == "f_post" else None)
    assert rel_rms(y, g[f"had.{variant}"]) < 1e-6


def test_hadamard_kernel_on_host_every_scale():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 384, generator=g).to(torch.bfloat16)
    r = (torch.rand(384, generator=g) + 0.5).half()
    s = torch.rand(384, generator=g) + 0.5
    y = run_hadamard(x, r_pre=r, s_pre=s, r_post=r, s_post=s, out_dtype=torch.float32)
    ref = R.hadamard128(x.double() * s.double() * r.double(), out_dtype=torch.float64) * r.double() * s.double()
    assert rel_rms(y, ref) < 1e-6


@functools.cache
def reconstruct_binary(K: float, cb: str) -> str:
    spec = reconstruct.spec_for("sm_90", K, cb)
    return build(spec, reconstruct.render_extra(spec), "reconstruct_host.cpp")


def run_reconstruct(code: torch.Tensor, K: float, cb: str) -> torch.Tensor:
    IC, OC = code.shape[0] * 16, code.shape[1] * 16
    raw = run_binary(reconstruct_binary(K, cb), aligned_parts([np.array([IC, OC, 0, 0], np.int32).tobytes(),
                                                               code.numpy().tobytes()]), timeout=300).view(np.int16)
    return torch.from_numpy(raw.copy()).view(torch.float16).reshape(IC, OC)


@pytest.mark.parametrize("K,cb", [(1.0, "mcg"), (2.5, "mul1"), (4.0, "3inst"), (8.0, "mcg")])
def test_reconstruct_kernel_on_host_golden_bit_exact(K, cb):
    g, _ = golden("golden_recon_small.safetensors")
    case = f"K{rate_name(K)}_{cb}"
    out = run_reconstruct(g[f"{case}.trellis"], K, cb)
    assert torch.equal(out.view(torch.int16), g[f"{case}.dense"].view(torch.int16))


def test_reconstruct_kernel_on_host_ragged_strip():
    # OC = 48 tiles of 16: the last block's strip of 8 tiles is cut to its valid columns
    code = torch.randint(-32768, 32768, (4, 48 // 16 * 5, 48), dtype=torch.int16, generator=torch.Generator().manual_seed(1))
    out = run_reconstruct(code, 3.0, "mcg")
    assert torch.equal(out.view(torch.int16), R.reconstruct(code, 3.0, "mcg").view(torch.int16))

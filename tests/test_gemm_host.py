"""The coded wgmma GEMM (templates/gemm.hip.j2: prefill on Hopper) run on the CPU, against the float64
reference: the kernel source built into tests/host/gemm_host.cpp with sm_90's mbarriers, cp.async
groups, TMA boxes, shared-memory descriptors, the 128-byte swizzle and wgmma emulated
(tests/host/escha_host_wgmma.h), fed by the prep kernel run the same way (tests/host/prep_host.cpp).
What it checks without a GPU: the producer's decode and swizzled stores, the stage ring's phases
(fewer stages than steps: slots reused), the token blocks and the rows past M, the epilogue's
passes, scales and bias, and that block shapes change no bit. tests/test_gpu_gemm.py runs the same
kernels on an H100 / H200."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from escha_jit import reference as R
from escha_jit.kernels import gemm
from escha_jit.synth import random_layer
from host_kernel import aligned_parts, build, run_binary
from test_fused_host import TORCH_DTYPES as IN_DTYPES, run_prep

TORCH_DTYPES = {**IN_DTYPES, "f32": torch.float32}
OUT_BYTES = {"f16": 2, "bf16": 2, "f32": 4}
TOL = {"f16": 1e-3, "bf16": 2.5e-3, "f32": 1e-3}     # relative RMS per row, the GPU tests' bounds


@functools.cache
def gemm_binary(K: float, cb: str, dout: str, tokens: int, stages: int, share: int = 1) -> tuple[str, int, object]:
    spec = gemm.spec_for("sm_90", K, cb, dout, tokens=tokens, stages=stages, share=share)
    path = build(spec, gemm.render_extra(spec), "gemm_host.cpp", [f"ESCHA_K2={round(2 * K)}", "ESCHA_HOST_SM90"])
    return path, gemm.smem_bytes(spec), spec


def run_gemm_host(w: R.LinearWeights, x: torch.Tensor, dout: str, tokens: int, stages: int, share: int = 1,
                  ldy: int = 0) -> torch.Tensor:
    """y [M, out_features] as the GEMM wrote it, after the prep kernel; xh's rows past M hold NaN
    (on a GPU: stale rows of the reused buffer), which must reach no stored output. ``ldy``: the
    elements between y's rows (0: OC)."""
    M, IC, OC = x.shape[0], w.IC, w.OC
    binary, smem, spec = gemm_binary(w.K, w.codebook, dout, tokens, stages, share)
    xh, xh_exp = run_prep("sm90", w, x, False, 1)
    rows = gemm.padded_rows(spec, M)
    pad = np.full((rows - M) * IC, 0x7E00, np.uint16).tobytes()          # fp16 NaN
    hdr = [M, IC, OC, rows, w.logical_out, w.s_out is not None, w.bias is not None, smem, tokens, OUT_BYTES[dout],
           share, ldy]
    parts = [np.array(hdr + [0] * (16 - len(hdr)), np.int32).tobytes(), xh + pad,
             xh_exp.astype(np.int32).tobytes(), w.code.numpy().tobytes(), w.rout.numpy().tobytes()]
    if w.s_out is not None:
        parts.append(w.s_out.numpy().astype(np.float32).tobytes())
    if w.bias is not None:
        parts.append(w.bias.numpy().astype(np.float32).tobytes())
    raw = run_binary(binary, aligned_parts(parts))
    dt = {"f16": np.int16, "bf16": np.int16, "f32": np.int32}[dout]
    y = torch.from_numpy(raw.view(dt).reshape(M, ldy or OC).copy()).view(TORCH_DTYPES[dout])
    return y[:, :w.logical_out]


def problem(K, cb, din, M, IC, OC, seed, bias=False):
    w = random_layer(IC, OC, K, cb, seed=seed, escha_scales=True, bias=bias)
    x = torch.randn(M, w.logical_in, generator=torch.Generator().manual_seed(seed + 1)).to(TORCH_DTYPES[din])
    return w, x


def assert_close(y, x, w, dout):
    ref = R.forward(x, w, torch.float64, compute_dtype=torch.float64)
    assert torch.isfinite(y.float()).all()
    err = (y.double() - ref).norm(dim=1) / ref.norm(dim=1)
    assert float(err.max()) < TOL[dout], f"rows {torch.nonzero(err >= TOL[dout]).flatten().tolist()}: {err.max():.2e}"


@pytest.mark.parametrize("K,cb,din,dout,M,IC,OC,tokens,stages,bias", [
    (2.0, "mcg", "f16", "f16", 70, 512, 256, 64, 2, False),      # 2 token blocks, 8 steps through 2 slots
    (3.0, "mul1", "bf16", "bf16", 100, 256, 128, 128, 4, True),  # one block, 28 rows past M
    (4.0, "3inst", "f16", "f32", 33, 384, 128, 64, 3, True),     # 6 steps through 3 slots, f32 out
    (2.5, "mul1", "bf16", "bf16", 20, 256, 256, 256, 4, False),   # a half-bit rate, 256-token block
])
def test_gemm_on_host_matches_reference(K, cb, din, dout, M, IC, OC, tokens, stages, bias):
    w, x = problem(K, cb, din, M, IC, OC, seed=int(8 * K) + M, bias=bias)
    assert_close(run_gemm_host(w, x, dout, tokens, stages), x, w, dout)


def test_gemm_on_host_block_shapes_same_bits():
    # tokens per block and ring stages change which tokens share a block, how many epilogue passes
    # there are (2 stages of 256 tokens: 64 tokens a pass) and row steps per pass (192 tokens: 3 per
    # warp), not the sums: the same bits
    w, x = problem(2.0, "mcg", "f16", 150, 256, 128, seed=5)
    ys = [run_gemm_host(w, x, "f16", t, s) for t, s in ((256, 4), (64, 2), (128, 3), (256, 2), (192, 4))]
    assert_close(ys[0], x, w, "f16")
    for y in ys[1:]:
        assert torch.equal(y, ys[0])


@pytest.mark.parametrize("share", [2, 4])
def test_gemm_on_host_clusters_same_bits(share):
    # clusters of `share` token blocks: each block decodes 8 / share of a stage's column tiles and the
    # copy engine sends them into the other blocks' ring slots (their `full` counts the bytes, every
    # block's consumers release a slot for the whole cluster); 3 token blocks pad to whole clusters,
    # the padded blocks decode for the others and store nothing; 8 steps through 2 slots
    w, x = problem(2.5, "mul1", "bf16", 150, 512, 256, seed=7, bias=True)
    y = run_gemm_host(w, x, "bf16", 64, 2, share)
    assert_close(y, x, w, "bf16")
    assert torch.equal(y, run_gemm_host(w, x, "bf16", 64, 2))


@pytest.mark.parametrize("dout", ["bf16", "f32"])
def test_gemm_on_host_store_paths_same_bits(dout):
    # the epilogue stores a lane's 4 outputs with one vector store where all 4 are valid and aligned,
    # else one by one: 250 output features (the last lane of the second group has 2 valid) and rows
    # 257 apart (every other row's address unaligned) take the scalar path, the same bits
    w, x = problem(2.0, "mcg", "bf16", 70, 256, 250, seed=13, bias=True)
    y = run_gemm_host(w, x, dout, 64, 2)
    assert_close(y, x, w, dout)
    assert torch.equal(y, run_gemm_host(w, x, dout, 64, 2, ldy=257))


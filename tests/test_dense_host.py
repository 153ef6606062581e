"""The dense-weight kernel (templates/dense.hip.j2) run on the CPU: the rendered source is built
as host C++ (tests/host/dense_host.cpp: std::threads for the block's threads, a std::barrier for
__syncthreads, the matrix unit and shuffles emulated per wave by tests/host/escha_host_matunit.h in
NVIDIA's or gfx12's lane layouts) and compared with reference.dense_weight in float64, to one ulp of
the output dtype. Checks decode placement, the unit's layouts, swizzle, both transforms, scale order
and rounding without a GPU, for both vendors' code paths."""
import functools

import numpy as np
import pytest
import torch

from escha_jit import reference as R
from escha_jit.kernels import dense
from escha_jit.synth import random_layer
from conftest import ulps
from host_kernel import build, run_binary, scale_parts

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


@functools.cache
def host_binary(K: float, cb: str, dt: str, layout: str, amax: bool = False) -> str:
    spec = dense.spec_for({"nvidia": "sm_90", "amd": "gfx1201"}[layout], K, cb, dt, amax=amax)
    return build(spec, dense.render_extra(spec), "dense_host.cpp",
                 [f"ESCHA_K2={round(2 * K)}", *(["ESCHA_HOST_AMD"] if layout == "amd" else [])])


def run_host(w: R.LinearWeights, dt: str, layout: str, amax: bool = False) -> tuple[torch.Tensor, float]:
    """(W as the kernel rounds it, the float its amax_bits ends at: max |W|, or 0 without amax).
    Also checks the kernel's L2 prefetches (rows_ahead = 1): every lane of every block above the
    last block row prefetches once, inside the code; none without the prefetch (gfx12)."""
    IC, OC = w.IC, w.OC
    parts = [np.array([IC, OC, w.s_in is not None, w.s_out is not None], np.int32).tobytes(),
             w.code.numpy().tobytes(), *scale_parts(w)]
    raw = run_binary(host_binary(w.K, w.codebook, dt, layout, amax), b"".join(parts))
    bits = raw[:2 * IC * OC].view(np.int16).reshape(IC, OC)
    inside, outside = raw[2 * IC * OC + 4:].view(np.int64)
    spec = dense.spec_for({"nvidia": "sm_90", "amd": "gfx1201"}[layout], w.K, w.codebook, dt, amax=amax)
    blocks_below = (IC // 128 - 1) * (OC // 128) if spec.params.get("l2_prefetch") else 0
    assert (inside, outside) == (blocks_below * dense.THREADS, 0)
    return torch.from_numpy(bits.copy()).view(DTYPES[dt]), float(raw[2 * IC * OC:2 * IC * OC + 4].view(np.float32)[0])


@pytest.mark.parametrize("K,cb,IC,OC,escha,dt", [
    (2.0, "mcg", 256, 384, True, "f16"),
    (3.5, "mul1", 256, 128, True, "bf16"),
    (4.0, "3inst", 128, 256, False, "f16"),
    (2.5, "mul1", 128, 128, False, "bf16"),
])
@pytest.mark.parametrize("layout", ["nvidia", "amd"])
def test_dense_kernel_on_host_within_one_ulp(K, cb, IC, OC, escha, dt, layout):
    w = random_layer(IC, OC, K, cb, seed=int(2 * K), escha_scales=escha)
    got, amax = run_host(w, dt, layout)
    ref = R.dense_weight(w, torch.float64).to(DTYPES[dt])
    assert ulps(got, ref) <= 1
    assert amax == 0.0                                  # amax_bits untouched without `amax`


@pytest.mark.parametrize("layout", ["nvidia", "amd"])
def test_dense_kernel_amax_is_max_abs_weight(layout):
    # the variant the bf16 prefill path bounds its fp16 GEMM with: the same W, and exactly the
    # largest |W| of it (the packed fp16 max across the lanes, waves and blocks)
    w = random_layer(256, 256, 3.0, "mcg", seed=11, escha_scales=True)
    got, amax = run_host(w, "f16", layout, amax=True)
    assert ulps(got, R.dense_weight(w, torch.float64).to(torch.float16)) <= 1
    assert amax == float(got.float().abs().max()) > 0

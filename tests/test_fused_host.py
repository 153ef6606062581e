"""The fused decode kernel (templates/fused.hip.j2, include/escha/fused.h) run on the CPU.

The rendered source of a shipped specialization is built as host C++ (tests/host/fused_host.cpp:
the grid's blocks one after another, a block's threads as std::threads, __syncthreads as a
std::barrier; the matrix unit, ldmatrix and the shuffles per wave in NVIDIA's lane layouts or
gfx12's, tests/host/escha_host_matunit.h; shared memory, copies and the split-K atomic as on
gfx12, tests/host/escha_host_kernel_api.h) and its output is compared with the float64 reference,
row by row. Covered: the fp16 route with the in-kernel prologue, which both vendors compile (x's
rotation in batches of items, the fp16 overflow redo, the trellis ring and decode, split-K with its
self-resetting counters, K slices (16 waves), two m tiles, ragged input / output widths), and
NVIDIA's word routes for M <= 8: the swapped fp16 route (the weights' two-half words against the
tokens' {x, x} words, mul1's per-block sums of x) and the opt-in int8 route (its quantizing
prologue, hash bytes on the integer unit or, at M = 1, the dot unit; also in gfx12's layouts, with
its iu8 WMMA), the prep kernel's A operand (xh = 1: tests/host/prep_host.cpp runs the prep
kernel first, its rows split over blocks that agree on each row's exponent), and with sm_90's
cp.async groups (copies land at their wait), clusters, mbarriers, st.async and bulk copies emulated
("sm90"): the ring's wait discipline, the cluster prologue (the blocks of a cluster run together,
exchanging their rows and overflow flags) and xh = 1 in chunks. Not covered here: the memory model
beyond cp.async's groups, races between the blocks of different clusters (they run one after
another), the real units' accumulation order. The
GPU tests (tests/test_gpu_kernels.py) run the
same kernels on the device, with the vendor's real matrix unit and asynchronous copies; this file
is what CI can run of them."""
import dataclasses
import functools

import numpy as np
import pytest
import torch

from escha_jit import reference as R
from escha_jit import reference_int8 as Q
from escha_jit.kernels import fused, prep
from escha_jit.synth import random_layer
from conftest import rel_rms
from host_kernel import aligned_parts, build, run_binary, scale_parts

TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
ARCH = {"nvidia": "sm_90", "sm90": "sm_90", "amd": "gfx1201"}
# host builds: "nvidia" NVIDIA's lane layouts with gfx12's memory model (copies complete at once, no
# clusters or mbarriers), "sm90" the same layouts with sm_90's clusters, mbarriers, st.async and bulk
# copies emulated (the cluster prologue, xh = 1 in chunks), "amd" gfx12's lane layouts
HOST_DEFINES = {"nvidia": [], "sm90": ["ESCHA_HOST_SM90"], "amd": ["ESCHA_HOST_AMD"]}
TOL = {"f16": 1e-3, "bf16": 2.5e-3}     # relative RMS per row against float64, the GPU tests' bounds


@functools.cache
def host_binary(layout: str, K: float, cb: str, din: str, dout: str, cfg: fused.FusedConfig,
                act_quant: str | None = None) -> str:
    spec = fused.spec_for(ARCH[layout], K, cb, din, dout, cfg, act_quant)
    return build(spec, fused.render_extra(spec), "fused_host.cpp",
                 [f"ESCHA_K2={round(2 * K)}", f"ESCHA_THREADS={32 * cfg.warps}", *HOST_DEFINES[layout]])


@functools.cache
def prep_binary(layout: str, din: str, words: bool, groups: bool = False) -> str:
    spec = prep.spec_for(ARCH[layout], din, words, groups)
    return build(spec, prep.render_extra(spec), "prep_host.cpp", HOST_DEFINES[layout])


def padded(x: torch.Tensor, IC: int) -> torch.Tensor:
    """x [M, in_features] zero-filled to the layer's IC columns, as the harnesses read it"""
    xp = torch.zeros(x.shape[0], IC, dtype=x.dtype)
    xp[:, :x.shape[1]] = x
    return xp


def run_prep(layout: str, w: R.LinearWeights, x: torch.Tensor, words: bool, segments: int,
             groups: bool = False) -> tuple[bytes, np.ndarray]:
    """(the prep kernel's xh buffer, xh_exp [M]); asserts its per-row counters are back at zero"""
    M, IC = x.shape[0], w.IC
    nkb = IC // 128
    seg_blocks = -(-nkb // segments)
    out_bytes = 4 * prep.buffer_words(M, IC) if words else 2 * M * IC
    hdr = [M, IC, w.logical_in, -(-nkb // seg_blocks), seg_blocks, prep.threads_for(M), w.s_in is not None, 2, out_bytes]
    parts = [np.array(hdr + [0] * (16 - len(hdr)), np.int32).tobytes(),
             padded(x, IC).view(torch.int16).numpy().tobytes(), w.rin.numpy().tobytes()]
    if w.s_in is not None:
        parts.append(w.s_in.numpy().astype(np.float32).tobytes())
    din = {torch.float16: "f16", torch.bfloat16: "bf16"}[x.dtype]
    raw = run_binary(prep_binary(layout, din, words, groups), aligned_parts(parts)).tobytes()
    xh, rest = raw[:out_bytes], np.frombuffer(raw[out_bytes:], np.int32)
    assert (rest[M:] == 0).all()                # row_sync reset by each row's last block
    return xh, rest[:M].copy()


@pytest.mark.parametrize("din", ["f16", "bf16"])
@pytest.mark.parametrize("escha", [True, False])
def test_prep_groups_same_bits_on_host(din, escha):
    # The coded GEMM's prep kernel over many rows (groups: a wave rotates 8 blocks of 128 features
    # per step, 4 lanes each, strides 8 and 16 by shuffles) stores the one-block-per-wave kernel's
    # bits and exponents: 11 blocks a row (a whole step, then a row's last step of 3 blocks),
    # inputs past in_features (padding), s_in given or not, bf16 rows raised beyond fp16 (redone
    # scaled) - and within fp16 rounding of the reference rotation.
    M, IC = 260, 1408
    w = dataclasses.replace(random_layer(IC, 256, 2.0, "mcg", seed=9, escha_scales=escha), in_features=IC - 21)
    g = torch.Generator().manual_seed(9)
    x = torch.randn(M, w.logical_in, generator=g)
    if din == "bf16":
        x[3, 5], x[200, IC - 22] = 3e9, -8e10
    x = x.to(torch.float16 if din == "f16" else torch.bfloat16)
    lane_h, lane_e = run_prep("sm90", w, x, False, 1)
    grp_h, grp_e = run_prep("sm90", w, x, False, 1, groups=True)
    assert (grp_e == lane_e).all() and grp_h == lane_h
    assert sorted(np.nonzero(lane_e)[0].tolist()) == ([3, 200] if din == "bf16" else [])
    h = torch.frombuffer(bytearray(grp_h), dtype=torch.float16).view(M, IC).double()
    xs = padded(x, IC).float() * R.input_scale(w)
    ref = R.hadamard128(xs).double() * torch.exp2(-torch.from_numpy(lane_e).double())[:, None]
    assert rel_rms(h, ref) < 1e-3


def run_host(layout: str, w: R.LinearWeights, x: torch.Tensor, dout: str, cfg: fused.FusedConfig,
             splits: int, act_quant: str | None = None, segments: int = 1,
             x_chunks: int = 1) -> tuple[torch.Tensor, np.ndarray]:
    """(y [M, out_features] as the kernel wrote it, the split-K counters after the call); with
    cfg.xh the prep kernel runs first (its rows split over ``segments`` blocks), and on "sm90" the
    fused kernel takes its rows in ``x_chunks`` chunks"""
    M, IC, OC = x.shape[0], w.IC, w.OC
    din = {torch.float16: "f16", torch.bfloat16: "bf16"}[x.dtype]
    lay = fused.smem_layout(cfg, w.K, M, IC // splits, act_quant == "int8", splits)
    xh = run_prep(layout, w, x, bool(cfg.swap), segments) if cfg.xh else None
    hdr = [M, IC, OC, splits, w.logical_in, w.logical_out, w.s_in is not None, w.s_out is not None,
           w.bias is not None, lay.off_tr, lay.off_red, lay.off_exp, lay.total, 2, len(xh[0]) if xh else 0,
           x_chunks, cfg.cluster, cfg.split_cluster]
    parts = [np.array(hdr + [0] * (20 - len(hdr)), np.int32).tobytes(),
             padded(x, IC).view(torch.int16).numpy().tobytes(), w.code.numpy().tobytes(), *scale_parts(w)]
    if w.bias is not None:
        parts.append(w.bias.numpy().astype(np.float32).tobytes())
    if xh:
        parts += [xh[0], xh[1].astype(np.int32).tobytes()]
    raw = run_binary(host_binary(layout, w.K, w.codebook, din, dout, cfg, act_quant), aligned_parts(parts))
    y = torch.from_numpy(raw[:2 * M * OC].view(np.int16).reshape(M, OC).copy()).view(TORCH_DTYPES[dout])
    return y[:, :w.logical_out], raw[2 * M * OC:].view(np.int32)


def check(layout, K, cb, din, dout, cfg, splits, M, IC, OC, *, big_rows=(), escha=True, bias=False, seed=0,
          segments=1, x_chunks=1):
    w = random_layer(IC, OC, K, cb, seed=seed, escha_scales=escha, bias=bias)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(M, w.logical_in, generator=g)
    for r in big_rows:                      # rows whose rotation leaves fp16's range: the redo pass
        x[r] *= 3e5
        x[r, :128] *= 16                    # the row's first 128-block needs the largest exponent
    x = x.to(TORCH_DTYPES[din])
    y, counters = run_host(layout, w, x, dout, cfg, splits, segments=segments, x_chunks=x_chunks)
    ref = R.forward(x, w, torch.float64, compute_dtype=torch.float64)
    assert torch.isfinite(y.float()).all()
    err = ((y.double() - ref).norm(dim=1) / ref.norm(dim=1))
    tol = TOL[dout]
    assert float(err.max()) < tol, f"rows {torch.nonzero(err >= tol).flatten().tolist()}: rel RMS {err.max():.2e}"
    assert (counters == 0).all()            # the last block of each column group reset its counter


CFG8 = fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=2)


@pytest.mark.parametrize("layout", ["nvidia", "amd"])
@pytest.mark.parametrize("K,cb,din,dout,M,splits", [
    (2.0, "mcg", "f16", "f16", 1, 1),
    (3.0, "mul1", "bf16", "bf16", 5, 2),
    (4.0, "3inst", "f16", "bf16", 16, 1),      # 8 items per wave: two batches
])
def test_fused_kernel_on_host_matches_reference(layout, K, cb, din, dout, M, splits):
    check(layout, K, cb, din, dout, CFG8, splits, M, 512, 256, seed=int(4 * K) + M)


@pytest.mark.parametrize("layout", ["nvidia", "amd"])
def test_fused_kernel_on_host_redoes_rows_that_leave_fp16(layout):
    # bf16 rows ~1e5 rotate past 2^15: their items are redone scaled by a power of two (the rare
    # pass), the other rows keep the common pass's values
    check(layout, 2.5, "mul1", "bf16", "bf16", CFG8, 1, 9, 512, 256, big_rows=(0, 4, 8), seed=3)


@pytest.mark.parametrize("cfg,M", [
    (fused.FusedConfig(warps=16, m_tiles=1, rows_per_stage=4, stages=3, min_blocks=1), 16),   # K slices
    (fused.FusedConfig(warps=8, m_tiles=2, rows_per_stage=2, stages=3, min_blocks=1), 17),    # two m tiles
    (fused.FusedConfig(warps=4, m_tiles=1, rows_per_stage=8, stages=2, min_blocks=2), 3),     # 2 tile columns per wave
    # the epilogue stages up to 4 m tiles at once in the A operand's region: K slices adding theirs
    # to 4 tiles, the last block's one pass over 50 rows; 8 tiles: two passes
    (fused.FusedConfig(warps=16, m_tiles=4, rows_per_stage=4, stages=2, min_blocks=1), 50),
    (fused.FusedConfig(warps=8, m_tiles=8, rows_per_stage=2, stages=2, min_blocks=1), 100),
])
def test_fused_kernel_on_host_configurations(cfg, M):
    check("nvidia", 2.0, "mcg", "f16", "f16", cfg, 2, M, 1024, 256, bias=True, seed=M)


SWAP8 = fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=2, swap=1)


@pytest.mark.parametrize("K,cb,din,M,splits,big_rows", [
    (2.0, "mcg", "f16", 1, 2, ()),
    (3.0, "3inst", "bf16", 4, 1, ()),
    (4.0, "mul1", "f16", 8, 2, ()),
    (2.0, "mul1", "bf16", 7, 1, (2, 6)),      # mul1's per-block sums of x, and rows redone
])
def test_fused_swapped_route_on_host(K, cb, din, M, splits, big_rows):
    # NVIDIA's M <= 8 route: the weights' two-half words as the unit's 16-row operand against the
    # tokens' {x, x} words (the prologue stores them in mu::i8_slot order), accumulators transposed
    check("nvidia", K, cb, din, din, SWAP8, splits, M, 512, 256, big_rows=big_rows, seed=int(8 * K) + M)


@pytest.mark.parametrize("layout", ["nvidia", "amd"])
@pytest.mark.parametrize("K,din,M,splits,dot", [
    (2.0, "f16", 1, 2, 1),         # the dot route (gfx12's default at M = 1)
    (3.0, "f16", 1, 1, 0),
    (4.0, "bf16", 5, 2, 0),
    (2.5, "f16", 8, 1, 0),
])
def test_fused_int8_route_on_host(layout, K, din, M, splits, dot):
    # act_quant='int8' (mul1): x quantized per (token, 128-block), hash bytes x int8 tokens on the
    # integer unit (NVIDIA's swapped mma.m16n8k32, gfx12's iu8 WMMA) or the dot unit at M = 1, exact
    # int32 sums folded per 128 features. Judged as the GPU tests judge it: against the route's own
    # reference (reference_int8: the same quantization, float64 after it) and, loosely, against the
    # exact product
    cfg = fused.FusedConfig(warps=4, m_tiles=1, rows_per_stage=8, stages=3, min_blocks=2, dot=dot)
    w = random_layer(512, 256, K, "mul1", seed=int(4 * K) + M)
    x = torch.randn(M, 512, generator=torch.Generator().manual_seed(M)).to(TORCH_DTYPES[din])
    y, counters = run_host(layout, w, x, din, cfg, splits, act_quant="int8")
    route = Q.forward_int8(x, w, out_dtype=torch.float64)
    exact = R.forward(x, w, torch.float64, compute_dtype=torch.float64)
    route_err = (y.double() - route).norm(dim=1) / route.norm(dim=1)
    assert float(route_err.max()) < {"f16": 2e-3, "bf16": 5e-3}[din], route_err
    assert rel_rms(y, exact) < 2e-2
    assert (counters == 0).all()


@pytest.mark.parametrize("layout,swap,M,segments,big_rows", [
    ("nvidia", 0, 16, 1, ()),
    ("amd", 0, 9, 2, (3,)),
    ("nvidia", 0, 12, 2, (0, 11)),      # a row's blocks agree on its exponent (row_sync), then redo it
    ("nvidia", 1, 6, 2, (5,)),          # the words variant for the swapped route, with mul1's sums
])
def test_fused_kernel_on_host_with_prep_kernel(layout, swap, M, segments, big_rows):
    # xh = 1: the prep kernel rotates x once per call into a global buffer (fp16 rows with per-row
    # exponents, or the swapped route's words); the fused kernel copies its K range into shared memory
    cfg = fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=2, xh=1, swap=swap)
    check(layout, 3.0, "mul1" if swap else "mcg", "bf16", "bf16", cfg, 2, M, 1024, 256, big_rows=big_rows,
          seed=M, segments=segments)


@pytest.mark.parametrize("K,cb,din,M,splits,swap", [
    (2.0, "mcg", "f16", 1, 2, 0),
    (4.0, "3inst", "bf16", 16, 1, 0),
    (3.0, "mul1", "f16", 6, 2, 1),
])
def test_fused_kernel_on_host_sm90_paths(K, cb, din, M, splits, swap):
    # the code paths sm_90 compiles: asynchronous copies (the output factors staged in the ring)
    cfg = fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=2, swap=swap)
    check("sm90", K, cb, din, din, cfg, splits, M, 512, 256, bias=True, seed=M)


@pytest.mark.parametrize("swap,M,x_chunks,big_rows,m_tiles,splits,warps", [
    (0, 16, 3, (), 1, 2, 8), (0, 5, 8, (2,), 1, 2, 8), (1, 7, 1, (0,), 1, 2, 8),
    (0, 40, 3, (33,), 4, 1, 8),    # 3 m tiles staged at once, y stored from them (no split-K)
    (0, 12, 8, (), 1, 1, 16),      # K slices: each wave waits for every chunk up to its step
    (0, 21, 5, (3,), 2, 2, 16),    # chunks of 2 steps and one of 1, 2 m tiles
])
def test_fused_kernel_on_host_sm90_xh_chunks(swap, M, x_chunks, big_rows, m_tiles, splits, warps):
    # xh = 1 on sm_90: each row's K range arrives by bulk copies in chunks of whole steps, each
    # completing on its own mbarrier; the main loop waits for a chunk at its first step
    cfg = fused.FusedConfig(warps=warps, m_tiles=m_tiles, rows_per_stage=4, stages=2, min_blocks=2 if warps == 8 else 1,
                            xh=1, swap=swap)
    check("sm90", 3.0, "mul1", "bf16", "bf16", cfg, splits, M, 1024, 256, big_rows=big_rows, seed=M, segments=2,
          x_chunks=x_chunks)


@pytest.mark.parametrize("x_ring,warps,M,m_tiles,splits,big_rows,IC,rows", [
    (2, 8, 40, 4, 1, (33,), 1024, 4),   # 16 steps through 2 slots: 8 phases each, 3 m tiles staged in the ring's room
    (3, 8, 16, 1, 2, (), 1024, 4),      # 8 steps through 3 slots, split-K
    (4, 16, 21, 2, 1, (3,), 1024, 4),   # K slices: chunks of 2 steps, 8 chunks through 4 slots
    (3, 16, 7, 1, 2, (), 1024, 4),      # K slices, 4 chunks through 3 slots (the last ones not reused)
    (2, 16, 20, 2, 1, (), 768, 16),     # K slices, 3 steps: the last chunk one step (one K slice's)
])
def test_fused_kernel_on_host_sm90_x_ring(x_ring, warps, M, m_tiles, splits, big_rows, IC, rows):
    # x_ring: the prep kernel's A operand streamed through a ring of chunks (full / empty mbarriers
    # per slot, phases by lap), each wave sending its rows of a chunk ahead into the slot all
    # waves have left
    cfg = fused.FusedConfig(warps=warps, m_tiles=m_tiles, rows_per_stage=rows, stages=2, min_blocks=1, xh=1,
                            x_ring=x_ring)
    dt = "bf16" if big_rows else "f16"         # (the big rows' outputs leave fp16's range)
    check("sm90", 2.0, "mcg", dt, dt, cfg, splits, M, IC, 256, big_rows=big_rows, seed=M + x_ring, segments=2)


@pytest.mark.parametrize("cluster,warps,M,splits,OC,big_rows", [
    (2, 8, 9, 1, 256, ()),
    (2, 16, 16, 2, 256, ()),
    (4, 16, 12, 1, 512, (5,)),        # a block of the cluster overflows: every block redoes it alone
])
def test_fused_cluster_prologue_on_host(cluster, warps, M, splits, OC, big_rows):
    # clusters of column groups split the in-kernel prologue's rotation: each block sends its rows
    # into the others' shared memory by st.async, completing on their exchange mbarriers
    cfg = fused.FusedConfig(warps=warps, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=1, cluster=cluster)
    check("sm90", 2.0, "mcg", "bf16", "bf16", cfg, splits, M, 1024, OC, big_rows=big_rows, seed=M + cluster)


@pytest.mark.parametrize("K,cb,dt,M,splits,warps,xh,swap", [
    (2.0, "mcg", "f16", 1, 8, 8, 0, 1),       # the swapped route, its in-kernel prologue, 8 splits
    (4.0, "mul1", "bf16", 4, 4, 4, 1, 1),     # the swapped route's words from the prep kernel (mul1 sums)
    (3.0, "mcg", "f16", 16, 2, 16, 1, 0),     # the fp16 route, K slices, xh in chunks
    (2.0, "3inst", "bf16", 9, 4, 8, 0, 0),    # the fp16 route's in-kernel prologue
])
def test_fused_split_cluster_on_host_is_the_workspace_route_bit_for_bit(K, cb, dt, M, splits, warps, xh, swap):
    # split_cluster: the S blocks of a column group as one cluster, the partials sent by st.async into
    # split 0's shared memory (an mbarrier counts their bytes) and summed there in split order: the same
    # bits as the workspace route, no counter touched
    base = fused.FusedConfig(warps=warps, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=1 if warps == 16 else 2,
                             xh=xh, swap=swap)
    w = random_layer(1024, 256, K, cb, seed=M + splits, escha_scales=True, bias=True)
    x = torch.randn(M, w.logical_in, generator=torch.Generator().manual_seed(M)).to(TORCH_DTYPES[dt])
    y0, _ = run_host("sm90", w, x, dt, base, splits, segments=2)
    y1, counters = run_host("sm90", w, x, dt, dataclasses.replace(base, split_cluster=1), splits, segments=2)
    assert torch.equal(y0.view(torch.int16), y1.view(torch.int16))
    assert (counters == 0).all()
    ref = R.forward(x, w, torch.float64, compute_dtype=torch.float64)
    err = ((y1.double() - ref).norm(dim=1) / ref.norm(dim=1))
    assert float(err.max()) < TOL[dt]


@pytest.mark.parametrize("K,dt,cfg,M,splits", [
    # tuning/sm_90.json's 4096x14336 K3 mcg M = 16 f16 entry (session 53): clusters of 4 sharing the
    # in-kernel prologue, 16 tile rows per stage, 2 stages
    (3.0, "f16", fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, cluster=4), 16, 1),
    # its K4 mcg M = 4 entries: the prep kernel's rows, split clusters of 2, and the swapped twin
    (4.0, "f16", fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=1,
                                   split_cluster=1), 4, 2),
    (4.0, "bf16", fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=1,
                                    split_cluster=1, swap=1), 4, 2),
])
def test_fused_shipped_16_row_stages_on_host(K, dt, cfg, M, splits):
    # 16 tile rows per stage in 2 stages, with clusters or split clusters, as tuning/sm_90.json ships them
    # (the other host tests stage 2-8 rows)
    OC = 128 * max(cfg.cluster, 2)
    check("sm90", K, "mcg", dt, dt, cfg, splits, M, 1024, OC, seed=M + splits, segments=2)


def test_split_cluster_layout_and_its_limits():
    cfg = fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=4, stages=2, min_blocks=2, split_cluster=1)
    plain = fused.smem_layout(dataclasses.replace(cfg, split_cluster=0), 2.0, 4, 512, splits=8)
    lay = fused.smem_layout(cfg, 2.0, 4, 512, splits=8)
    assert lay.total == plain.total + 16 + 7 * 4 * 128 * 4       # its mbarrier, 7 splits' rows of 4 tokens
    assert lay.off_exp == plain.off_exp
    for arch, bad in (("gfx1201", cfg), ("sm_90", dataclasses.replace(cfg, m_tiles=2)),
                      ("sm_90", dataclasses.replace(cfg, cluster=2))):
        with pytest.raises(ValueError, match="split_cluster"):
            fused.spec_for(arch, 2.0, "mcg", "f16", "f16", bad)
    with pytest.raises(ValueError, match="split_cluster"):
        fused.spec_for("sm_90", 3.0, "mul1", "f16", "f16", dataclasses.replace(cfg, swap=1), act_quant="int8")


def test_fused_kernel_on_host_ragged_widths():
    # in_features % 128 != 0: x is read element by element with its tail zero-filled (the
    # non-vector loads); out_features % 128 != 0: the columns past it are not written
    check("nvidia", 3.0, "mcg", "f16", "f16", CFG8, 1, 4, 300, 200, escha=False, seed=5)

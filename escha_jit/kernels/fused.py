"""The fused coded linear for small and medium M (templates/fused.hip.j2, include/escha/fused.h):
specs, tile configurations, the shared-memory formula and the launch heuristic (torch-free).

Compile-time tile configuration (:class:`FusedConfig`): waves per block (16: two K slices per tile
column), m16 tiles, tile rows per pipeline stage, stages, minimum resident blocks. Run-time launch parameter (:class:`FusedLaunch`):
the split count S (grid.y); each block stages all KR = IC/S of its input features of the M rows
of x in shared memory.
The shared-memory layout has ONE formula, :func:`smem_layout`; its compile-time part (the trellis
stage bytes) is rendered into the kernel, which static_asserts it, and the host uses the whole to
size the launch and to filter tuning candidates.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Callable, Optional

from ..spec import KernelSpec, nvidia_sm, vendor_of
from ..trellis import tile_words
from . import DTYPE_CODES
from .limits import block_smem_limit, block_smem_reserved, sm_smem_limit

# (config, splits) -> how many thread block clusters of config.cluster blocks of that launch can be
# resident on the GPU at once (the driver's cuOccupancyMaxActiveClusters; ops/fused.py cluster_slots)
ClusterSlots = Callable[["FusedConfig", int], int]

COLS = 128
ARGS = ("ptr", "i64", "ptr", "i64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr",
        "i32", "i32", "i32", "i32", "i32", "i32", "ptr", "ptr", "i32", "i32", "i32", "ptr", "ptr", "i32")
MAX_M = 256
# Largest M that ops.linear routes to the fused kernel; above it the dense-weight path (the weight
# built once per call, then the vendor GEMM) is faster. NVIDIA: measured on the H200 (benchmarks/
# bench_crossover.py, RESULTS.md session 33): the untuned fused kernel takes 0.34-0.64x the dense
# path's time at M = 32-64 on the large shapes, but 1.05-1.4x at M = 128 and 3-4x at M = 256 (on
# 4096x4096 the paths tie at M = 64 and the fused one loses from M = 80). AMD gfx12: the m-tile
# limit (registry.AMD_FUSED_MAX_M_TILES, 64 KiB of LDS), not measured. fused_linear itself takes
# M <= MAX_M on either vendor.
ROUTE_MAX_M = {"nvidia": 64, "amd": 128}
# dynamic shared memory a launch may take: NVIDIA a Hopper SM's share for ~1 block; AMD gfx12 keeps
# blocks at <= 40 KiB so that 3 fit the 128 KiB of a WGP (the hardware limit is 64 KiB per block)
SMEM_BUDGET = {"nvidia": 200 * 1024, "amd": 40 * 1024}
NVIDIA_BLOCK_SMEM = block_smem_limit("sm_90")     # most shared memory one block may opt into on sm_90
XH_MIN_M = 9          # from this M on the input Hadamard runs once, in the prep kernel (H200 tuning)
ACT_QUANTS = (None, "int8")
I8_MAX_M = 8          # the int8-activation kernels serve decode batches (one n8 token group of the
                      # swapped int8 unit on NVIDIA); larger M use the exact fp16 route
I8_CODEBOOKS = ("mul1",)


def _check_field(owner: str, name: str, v, ok, want: str) -> None:
    """A launch-shaping field must be a plain integer (no bool) for which ``ok(v)`` holds."""
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not ok(v):
        raise ValueError(f"{owner}.{name}={v!r}: expected {want}")


@dataclasses.dataclass(frozen=True)
class FusedConfig:
    warps: int = 8            # waves per block (divides 8: each owns 8/warps tile columns; 16: two
                              # waves per tile column split the block's K steps, fp16 route only)
    m_tiles: int = 1          # m16 tiles: M <= 16 * m_tiles
    rows_per_stage: int = 4   # tile rows (16 input features each) per pipeline stage
    stages: int = 3
    min_blocks: int = 2       # __launch_bounds__ blocks per SM: caps registers at 65536 / (threads * this)
    xh: int = 0               # 1: the A operand comes precomputed from the prep kernel (one more launch,
                              #    but the input Hadamard is done once, not once per column group)
    diag: int = 0             # timing studies only: 1 no decode, 2 no matrix unit, 3 no x prologue,
                              # 4 per-block phase timestamps (benchmarks/trace_fused.py)
    dot: int = 0              # int8 route, M = 1 only: products on the integer dot unit (IDP4A /
                              # v_dot4_i32_iu8) instead of the matrix unit (the gfx12 default there)
    swap: int = 0             # NVIDIA, M <= 8: the swapped fp16 route (weights as the 16-row operand,
                              # two fp16 halves per weight fed to the unit); see swap_route
    cluster: int = 1          # NVIDIA sm_90, fp16 route with the in-kernel prologue (xh=0): blocks of
                              # `cluster` column groups launched as one thread block cluster, which
                              # split the prologue's rotation and share its result (OC/128 % cluster == 0)
    reg_level: int = -1       # NVIDIA: ptxas's --register-usage-level hint (0..10; -1: not passed, ptxas'
                              # default). The same code, allocated and scheduled differently: the same main
                              # loop ran -6 %..+6 % per kernel with ptxas's schedule alone (benchmarks/
                              # RESULTS.md sessions 29, 30), so the tuner tries levels on each winner
    x_ring: int = 0           # NVIDIA sm_90, xh=1, fp16 route: the A operand in a ring of this many chunks
                              # (2..4) of one step per K slice instead of the block's whole K range (0):
                              # less shared memory per block, so more blocks per SM at M = 32..64
    split_cluster: int = 0    # NVIDIA sm_90, S = 2..8 splits, one m tile: the S blocks of a column group
                              # run as one thread block cluster (the grid swapped: x = splits, y = groups)
                              # and send their partials into split 0's shared memory, which sums them
                              # and writes y: no workspace round trip, fence or counter (include/escha/
                              # fused.h SC)

    def __post_init__(self):
        # a bad value would otherwise surface as a static_assert of the kernel source at compile time
        flag = (lambda v: v in (0, 1), "0 or 1")
        for name, (ok, want) in (("warps", (lambda v: v in (1, 2, 4, 8, 16),
                                            "1, 2, 4, 8 (it divides the 8 tile columns) or 16 (2 K slices)")),
                                 ("m_tiles", (lambda v: v >= 1, ">= 1")), ("rows_per_stage", (lambda v: v >= 1, ">= 1")),
                                 ("stages", (lambda v: v >= 2, ">= 2 (the ring streams stages - 1 steps ahead)")),
                                 ("min_blocks", (lambda v: v >= 1, ">= 1")), ("xh", flag), ("dot", flag), ("swap", flag),
                                 ("cluster", (lambda v: v in (1, 2, 4, 8), "1, 2, 4 or 8")),
                                 ("reg_level", (lambda v: -1 <= v <= 10, "0..10, or -1 (ptxas' default)")),
                                 ("x_ring", (lambda v: v == 0 or 2 <= v <= 4, "0 (off) or 2..4 chunks")),
                                 ("diag", (lambda v: 0 <= v <= 4, "0..4")), ("split_cluster", flag)):
            _check_field("FusedConfig", name, getattr(self, name), ok, want)

    def tile(self) -> dict:
        d = dataclasses.asdict(self)
        for opt, off in (("diag", 0), ("dot", 0), ("swap", 0), ("cluster", 1), ("reg_level", -1),   # off: not part of the spec
                         ("x_ring", 0), ("split_cluster", 0)):
            if d[opt] == off:                                                 # (keys stay as they were)
                del d[opt]
        return d


@dataclasses.dataclass(frozen=True)
class FusedLaunch:
    splits: int               # S: blocks along the input features (KR = IC / S each)
    # NVIDIA: > 0 lets at most this many blocks share an SM (where the kernel would fit more, ops/fused.py
    # pads the launch's dynamic shared memory: occupancy_smem), the occupancy a table entry was timed at
    # (tune() records it; benchmarks/stamp_occupancy.py for older tables), so that a kernel change that
    # frees registers does not stack more blocks per SM than the entry assumes; 0: as many as fit
    blocks_per_sm: int = 0

    def __post_init__(self):
        _check_field("FusedLaunch", "splits", self.splits, lambda v: v >= 1, ">= 1")
        _check_field("FusedLaunch", "blocks_per_sm", self.blocks_per_sm, lambda v: v >= 0, ">= 0")


def occupancy_smem(smem: int, blocks_per_sm: int, arch: str) -> int:
    """Dynamic shared memory (bytes) for a launch whose blocks need ``smem`` each, padded so that at
    most ``blocks_per_sm`` of them fit one SM of ``arch`` (each also reserves the driver's per-block
    share); ``smem`` itself where that already holds them to it, at 0, and on AMD (not modelled)."""
    per_sm, reserved = sm_smem_limit(arch), block_smem_reserved(arch)
    if blocks_per_sm <= 0 or per_sm == 0 or per_sm // (smem + reserved) <= blocks_per_sm:
        return smem
    return min(block_smem_limit(arch), per_sm // blocks_per_sm - reserved)


@dataclasses.dataclass(frozen=True)
class SmemLayout:
    off_tr: int
    off_red: int
    off_exp: int
    total: int
    tr_bytes: int


def _align(n: int, a: int = 16) -> int:
    return -(-n // a) * a


# fused.h's FusedLinear::XCHUNKS and EM; the rendered kernel fails to compile where they disagree
XH_CHUNKS = 8          # most A chunks (xh=1, sm_90): smem_layout keeps a mbarrier for each
EPILOGUE_M_TILES = 4   # m tiles the epilogue stages at once: smem_layout sizes the staging region


def x_chunks(blocks: int, resident: int) -> int:
    """A chunks of an xh=1 launch (sm_90): in one wave (blocks <= resident slots) every block copies
    x at once and the main loop starts on the first chunk; with more waves a block's copy overlaps
    the other resident blocks' main loops in part, and two chunks measured fastest there (8192x28672
    M = 16, 64 KB of x per block: 2 chunks 0.981-0.992x the time of 1, 4 chunks 0.993-1.014x,
    8 chunks 1.064-1.070x; benchmarks/RESULTS.md sessions 12 and 28)."""
    return XH_CHUNKS if blocks <= resident else 2


def smem_layout(cfg: FusedConfig, K: float, M: int, kr: int, i8: bool = False, splits: int = 1) -> SmemLayout:
    """Bytes of dynamic shared memory: A operand [M][kr + 8] fp16 (x_ring: kr the ring's x_ring
    steps per K slice, where that is less; int8 route: [M][kr + 16] u32
    words, then two fp32 [16*m_tiles][kr/128] dequantisation tables; swapped route: [M][kr + 16]
    u32 half2 words, then one fp32 [16*m_tiles][kr/128] table of x sums; m_tiles > 1: at least
    [16*min(m_tiles, EPILOGUE_M_TILES)][COLS + 4] fp32, where the epilogue stages its m tiles), one
    trellis ring per wave [stages][rows_per_stage][8/warps tiles][W32] u32 (all waves:
    stages*rows*8*W32 words), one m
    tile of partial sums [16][132] fp32, per-row exponents [16*m_tiles] + flag, rows_per_stage x 64
    zero bytes (the A operand of rows >= M), XH_CHUNKS mbarriers (8 bytes each: the prep kernel's
    A operand in chunks, sm_90); split_cluster: an mbarrier (16 bytes) and [splits - 1][M][COLS]
    fp32 partial rows."""
    mp = 16 * cfg.m_tiles
    w32 = tile_words(K) // 2
    red = 16 * (COLS + 4) * 4                              # one m tile of fp32 sums
    kw = max(1, cfg.warps // 8)                            # K slices (waves per tile column)
    if i8:
        xs = _align(M * (kr + 16) * 4) + _align(2 * mp * (kr // 128) * 4)
    elif cfg.swap:
        xs = _align(M * (kr + 16) * 4) + _align(mp * (kr // 128) * 4)   # half2 {x, x} words, mul1's x sums
    else:
        if cfg.x_ring:                       # a ring of x_ring chunks of one step per K slice
            kr = min(kr, cfg.x_ring * kw * 16 * cfg.rows_per_stage)
        xs = _align(M * (kr + 8) * 2)
        if cfg.m_tiles > 1:                  # the epilogue stages its m tiles here
            xs = max(xs, min(cfg.m_tiles, EPILOGUE_M_TILES) * red)
    tr = cfg.stages * cfg.rows_per_stage * 8 * kw * w32 * 4    # warps x private rings of (8*kw/warps) tile columns
    ex = exchange_bytes(cfg)
    # split_cluster: split 0 receives the other splits' partial rows (after its mbarrier, 16 bytes)
    recv = 16 + (splits - 1) * M * COLS * 4 if cfg.split_cluster else 0
    return SmemLayout(xs, xs + tr, xs + tr + red, xs + tr + red + ex + recv, tr)


def exchange_bytes(cfg: FusedConfig) -> int:
    """The exchange region (row exponents, flags, zero rows, the A chunks' mbarriers), bytes."""
    return _align((16 * cfg.m_tiles + 4) * 4 + 64 * cfg.rows_per_stage + 8 * XH_CHUNKS)


def check_act_quant(act_quant: Optional[str], codebook: str) -> None:
    """Raise a clear error for an unknown activation quantization or one the codebook lacks."""
    if act_quant not in ACT_QUANTS:
        raise ValueError(f"act_quant={act_quant!r}: expected one of {ACT_QUANTS}")
    if act_quant == "int8" and codebook not in I8_CODEBOOKS:
        raise ValueError(f"act_quant='int8' needs the mul1 codebook (its weights are affine in the bytes of a "
                         f"32-bit hash, which feed the int8 matrix unit exactly); this layer uses {codebook!r}")


def spec_for(arch: str, K: float, codebook: str, in_dtype: str, out_dtype: str, cfg: FusedConfig,
             act_quant: Optional[str] = None) -> KernelSpec:
    """The fused kernel ("fused"), or with act_quant='int8' its int8-activation twin ("fused_i8")."""
    check_act_quant(act_quant, codebook)
    if cfg.warps > 8 and (act_quant or cfg.swap):
        raise ValueError(f"config {cfg}: warps=16 (two K slices per tile column) is the fp16 route's; "
                         f"act_quant={act_quant}, swap={cfg.swap}")
    if cfg.dot and act_quant != "int8":
        raise ValueError(f"config {cfg}: dot=1 is a variant of the int8-activation kernels (act_quant='int8')")
    if cfg.cluster > 1 and (not has_clusters(arch) or cfg.xh or cfg.swap or act_quant):
        raise ValueError(f"config {cfg}: cluster={cfg.cluster} shares the fp16 route's in-kernel prologue "
                         f"(NVIDIA sm_90+, xh=0, swap=0, fp16/bf16 activations); got {arch}, act_quant={act_quant}")
    if cfg.swap and not swap_allowed(cfg, vendor_of(arch), codebook, act_quant):
        raise ValueError(f"config {cfg}: swap=1 needs NVIDIA, a codebook in {SWAP_CODEBOOKS}, one m tile "
                         f"and fp16/bf16 activations; got {arch}, {codebook}, act_quant={act_quant}")
    if cfg.x_ring and (not has_clusters(arch) or not cfg.xh or cfg.swap or act_quant):
        raise ValueError(f"config {cfg}: x_ring={cfg.x_ring} streams the prep kernel's A operand through bulk "
                         f"copies and mbarriers (NVIDIA sm_90+, xh=1, swap=0, fp16/bf16 activations); got {arch}, "
                         f"act_quant={act_quant}")
    if cfg.split_cluster and (not has_clusters(arch) or cfg.cluster > 1 or cfg.m_tiles > 1 or act_quant):
        raise ValueError(f"config {cfg}: split_cluster=1 sends the split-K partials between the blocks of a "
                         f"thread block cluster (NVIDIA sm_90+, cluster=1, one m tile, fp16/bf16 activations); "
                         f"got {arch}, act_quant={act_quant}")
    if cfg.reg_level >= 0 and vendor_of(arch) != "nvidia":
        raise ValueError(f"config {cfg}: reg_level={cfg.reg_level} is a hint to NVIDIA's ptxas; got {arch}")
    op = "fused_i8" if act_quant == "int8" else "fused"
    return KernelSpec.make(op, arch, K=K, codebook=codebook, in_dtype=in_dtype, out_dtype=out_dtype,
                           tile=cfg.tile())


def has_clusters(arch: str) -> bool:
    """Thread block clusters (FusedConfig.cluster): NVIDIA sm_90 and later."""
    return nvidia_sm(arch) >= 90


SWAP_CODEBOOKS = ("mcg", "3inst", "mul1")
# M = 9..16 would take the unit's second n8 token group (4 instructions per trellis tile instead of
# the fp16 route's 2): measured 1.1-1.6x slower than the fp16 route on the H200 (every PERF.md shape,
# benchmarks/RESULTS.md session 4) and again, with the A side bulk-copied from the words prep kernel,
# 1.0-1.27x (the best swapped candidate of each of 24 M = 16 problems, session 28;
# docs/experiments/s28-swap-two-token-groups.diff): the unit bounds it, so those M keep the fp16 route
SWAP_MAX_M = 8


def swap_allowed(cfg: FusedConfig, vendor: str, codebook: str, act_quant: Optional[str] = None) -> bool:
    return (vendor == "nvidia" and codebook in SWAP_CODEBOOKS and act_quant is None and cfg.m_tiles == 1
            and not cfg.dot and cfg.warps <= 8 and cfg.cluster == 1)


def swap_route(cfg: FusedConfig, vendor: str, codebook: str, M: int, act_quant: Optional[str] = None) -> FusedConfig:
    """The configuration a call runs: on NVIDIA, calls with M <= 8 (A side from the in-kernel
    prologue, or with xh=1 bulk-copied from the words prep kernel) take the swapped fp16 route (include/escha/matunit_mma.h, mma_sw): each weight is a 32-bit word of
    two fp16 halves that the unit sums in fp32 against the token's half2 {x, x} (LCG codebooks: the
    codebook's own halves, no PRMT / HADD2 per weight; mul1: {1024 + B, -1534} from one IDP4A, the
    affine map to the weight applied once in the epilogue, no PRMT / HFMA2), the weights fill the
    unit's 16-row side and the tokens its n8 side. Everything else keeps ``cfg``."""
    want = int(M <= SWAP_MAX_M and swap_allowed(cfg, vendor, codebook, act_quant))
    return cfg if cfg.swap == want else dataclasses.replace(cfg, swap=want)


def is_i8(spec: KernelSpec) -> bool:
    return spec.op == "fused_i8"


def render_extra(spec: KernelSpec) -> dict:
    cfg = FusedConfig(**spec.params)
    return {"in_code": DTYPE_CODES[spec.in_dtype], "out_code": DTYPE_CODES[spec.out_dtype],
            "tr_bytes": smem_layout(cfg, spec.K, 1, 128).tr_bytes, "diag": cfg.diag, "xh": cfg.xh,
            "i8": is_i8(spec), "dot": cfg.dot, "swap": cfg.swap, "cluster": cfg.cluster,
            # what smem_layout sized for them; the kernel checks both (fused.hip.j2 static_asserts)
            "epilogue_m_tiles": min(cfg.m_tiles, EPILOGUE_M_TILES), "xh_chunks": XH_CHUNKS, "x_ring": cfg.x_ring,
            "ex_bytes": exchange_bytes(cfg), "split_cluster": cfg.split_cluster}


def _m_tiles(M: int) -> int:
    mt = 1
    while 16 * mt < M:
        mt *= 2
    return mt


def default_config_i8(M: int, vendor: str = "nvidia") -> FusedConfig:
    """The int8 route's configuration (not tuned yet): its own prologue (no prep kernel), one m
    tile, 4 waves, 8 tile rows per stage (one 128-feature block: the int32 sums fold into fp32
    once per stage); the stage count of the vendor's fp16 default."""
    if not 0 < M <= I8_MAX_M:
        raise ValueError(f"the int8-activation kernels take 1 <= M <= {I8_MAX_M}, got M={M}")
    # gfx12 at M = 1: the dot route (1 VALU cycle per weight against ~4 of the iu8 WMMA, which
    # does not co-execute with VALU; docs/AMD_ESTIMATE.md section 7). NVIDIA: the swapped mma.
    dot = 1 if vendor == "amd" and M == 1 else 0
    return FusedConfig(warps=4, m_tiles=1, rows_per_stage=8, stages=2 if vendor == "amd" else 3, min_blocks=2, xh=0,
                       dot=dot)


def default_config(M: int, vendor: str = "nvidia") -> FusedConfig:
    """The shape-free default configuration for M rows: AMD's, NVIDIA's above M = 16, and NVIDIA's
    fallback at M <= 16 where :func:`default_config_for`'s 16-row stages do not tile the input.

    NVIDIA (from the H200 sweeps, benchmarks/results): 4 waves x 2 tile columns up to M = 8,
    8 waves above; 8 tile rows per stage, 3 stages; the prep kernel from M = 9.
    AMD gfx12: see :func:`_amd_default_config`.
    """
    if vendor == "amd":
        return _amd_default_config(M)
    mt = _m_tiles(M)
    # 8+ m tiles keep 64+ fp32 accumulators per lane: give them the whole register file
    # and hold fewer decoded tiles at once (rows_per_stage 4)
    return FusedConfig(warps=4 if M <= 8 else 8, m_tiles=mt, rows_per_stage=8 if mt <= 4 else 4, stages=3,
                       min_blocks=1 if mt >= 8 else 2, xh=1 if M >= XH_MIN_M else 0)


# NVIDIA's untuned configurations for M <= 16, read off the H200's tuned table (tuning/sm_90.json:
# 16 tile rows per stage and 2 stages win most of its problems). M <= 8 (the swapped route): 8 waves
# with the in-kernel prologue, or, once M x column groups reaches 3 per SM, 4 waves fed by the prep
# kernel (the in-kernel prologue's work is repeated by every column group). M = 9..16 (the fp16
# route): 16 waves (two K slices) at one block per SM, or 8 waves at two.
_SMALL_M = {
    "w8": FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=2, xh=0),
    "w8x": FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=2, xh=1),
    "w4": FusedConfig(warps=4, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=2, xh=1),
}
# M <= 8: the prep kernel (xh=1) from this many 128-feature rotations of x over all column groups
# (the in-kernel prologue repeats each row's rotations per column group; the prep kernel's are one
# launch's). H200 table after session 27 (the swapped route's A side by bulk copy): 1024-3584 (4096x4096
# M <= 4, 14336x4096 / 4096x14336 M = 1) rotate in the kernel, 14336 and more (14336x4096 /
# 4096x14336 M = 4, 8192x28672) take the prep kernel.
XH_SWAP_MIN_ROTATIONS = 8192
_MID_M = {
    "w8": FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=2, xh=1),
    "w16": FusedConfig(warps=16, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=0),
    "w16x": FusedConfig(warps=16, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=1),
    "w16c2": FusedConfig(warps=16, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=0, cluster=2),
    "w16c4": FusedConfig(warps=16, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=0, cluster=4),
}
# the fp16 route rotates x in the kernel while a wave has at most this many (row, 128-feature) items
# (one batch of fused.h's rotated_items); past that the prep kernel is cheaper (H200 table:
# 4096x4096 M = 16 at 8 items per wave rotates in the kernel, 14336x4096 at 28 does not)
XH_MAX_ITEMS_PER_WAVE = 8
# Clusters of CL 16-wave blocks split those items CL ways (fused.h rotated_items; FusedConfig.cluster).
# They pay from 8 items per wave at CL = 1, and only while every cluster of the launch is resident at
# once (the driver's count: 66 of 2 and 30 of 4 on the H200; 14336x4096 and 8192x8192 at 32
# clusters of 4 took 1.6-1.8x). Against the prep kernel with split rows (b3a96ec), H200, f16, times
# relative to the clusters (benchmarks/RESULTS.md session 19): at most 4 items per wave of a cluster
# (4096x4096 8 / 2: the prep kernel 1.056x; 3072x6144 and 6144x3072 12 / 4: CL 2 1.04-1.05x, the
# prep kernel 1.02-1.09x), beyond that the prep kernel (13824x5120 36 / 4: 0.93-0.97x; 5120x13824
# 40 / 4: 0.95-0.99x; 4096x8192 and 2048x16384 16 / 2: 0.95-0.99x). Where 16 waves fed by the prep
# kernel spill (_W16X_MUL1_SPILLS) the alternative is 8 waves, which clusters beat up to 10 items
# per wave (5120x13824 K3 mul1: 8 waves 1.08x; sessions 16-17).
XH_CLUSTER_MIN_ITEMS = 8
XH_CLUSTER_MAX_ITEMS = 4
XH_CLUSTER_MAX_ITEMS_VS_W8 = 10


def default_configs(M: int, vendor: str = "nvidia", codebook: Optional[str] = None,
                    K: Optional[float] = None) -> list[FusedConfig]:
    """Every configuration the untuned choice (:func:`default_config_for`) may give M rows of a
    codebook's layers at rate K (None: any codebook / rate): what kernels/registry.py ships and CI
    compiles."""
    if vendor == "amd":
        return [default_config(M, vendor)]
    if M > 16:                               # the ring's only where the arch has it (registry.fused_fits)
        ring = _RING.get(_m_tiles(M))
        return [default_config(M, vendor)] + ([ring] if ring is not None and _default_allowed(ring, codebook, K) else [])
    table = _SMALL_M if M <= 8 else _MID_M
    out = [c for c in table.values() if codebook is None or _default_allowed(c, codebook, K)] + [default_config(M, vendor)]
    if M <= SWAP_MAX_M:                      # their routed split-cluster twins (sm_90: registry.fused_fits)
        out += [twin for c in out if (twin := split_cluster_twin(swap_route(c, vendor, codebook or "mcg", M), M)) is not None]
    return out


# Split clusters for the untuned choice (FusedConfig.split_cluster: the S split blocks of a column
# group as one cluster that sums the partials in split 0's shared memory, NVIDIA sm_90). Where the
# driver holds every cluster of the launch at once (ops/fused.py untuned_split_cluster asks it) they
# shorten the split-K tail; where it does not, clusters packing whole into a GPC hold fewer blocks
# than single blocks and the last ones run a second round. H100, session 48 (benchmarks/RESULTS.md:
# bench_variants.py of the untuned choice against its twins, 7 shapes outside the tuned table, M = 1 / 4,
# K 2 / 4, mcg / mul1, f16; the driver's counts from cluster_residency.py --untuned): at the untuned
# split count, all resident 0.78-0.83x the time (3584x3584, 196 blocks of 224), 0.86-0.89x (5120x5120,
# 200 of 235), 0.93x (5120x13824 M = 4, 432 of 496; the tuned 4096x14336 entries alike, sessions
# 46-47); not all 1.28-1.50x (13824x5120 240 of 234, 8192x8192 256 of 248), 0.98-1.11x where single
# blocks take several rounds too (4096x6144, 5120x13824 M = 1, 3584x18944 M = 4). At another split
# count whose clusters are all resident: 4096x6144 at 4 instead of 8 splits 0.79-0.92x, 5120x13824
# M = 1 at 4 instead of 8 0.94-0.99x, but fewer blocks lose where the SM-balance model says they
# should (8192x8192 at 2: 128 blocks, 1.40-1.59x; 3584x18944 M = 1 at 2, 1.19-1.29x). So the untuned
# call takes the split count whose all-resident twin the model (_modeled_time) rates fastest at
# SPLIT_CLUSTER_GAIN of its time, where that beats its own split count without clusters: every
# measured choice above, none of the losses. Measured at M = 1 and 4, the swapped route; taken up to
# its M (SWAP_MAX_M), where the driver's count of the twin (its larger shared memory included) decides.
SPLIT_CLUSTER_GAIN = 0.85


def split_cluster_twin(cfg: FusedConfig, M: int) -> Optional[FusedConfig]:
    """The split-cluster twin of the routed untuned configuration ``cfg`` for M rows where the
    untuned choice may take it: M <= SWAP_MAX_M, one m tile, no column-group clusters or A ring;
    else None. Whether the arch has clusters is the caller's (:func:`has_clusters`,
    registry.fused_fits)."""
    if M > SWAP_MAX_M or cfg.m_tiles != 1 or cfg.cluster != 1 or cfg.x_ring or cfg.split_cluster or cfg.dot:
        return None
    return dataclasses.replace(cfg, split_cluster=1)


def split_fits(cfg: FusedConfig, K: float, IC: int, M: int, S: int, cap: int) -> bool:
    """Whether ``cfg`` at S splits of IC input features tiles them (each split's kr = IC / S a multiple
    of the 128-feature Hadamard block and of a stage's 16 x rows_per_stage) and its ``min_blocks``
    blocks fit ``cap`` bytes of shared memory (:func:`smem_layout`, split clusters' receive buffer
    included)."""
    kr = IC // S
    return (IC % (128 * S) == 0 and kr % (16 * cfg.rows_per_stage) == 0
            and smem_layout(cfg, K, M, kr, splits=S).total * cfg.min_blocks <= cap)


def split_cluster_counts(twin: FusedConfig, K: float, IC: int, M: int, arch: str) -> list[int]:
    """The split counts ``twin`` (a split-cluster configuration) can launch M rows of IC features at
    on ``arch``: one cluster of 2..8 blocks, K ranges that tile (:func:`split_fits`), one block's
    shared memory (the receive buffer included) within the arch's limit."""
    return [S for S in range(2, 9) if split_fits(twin, K, IC, M, S, block_smem_limit(arch) * twin.min_blocks)]


def split_cluster_splits(cfg: FusedConfig, K: float, IC: int, OC: int, M: int, sms: int, splits: int,
                         resident: dict[int, int]) -> Optional[int]:
    """The split count an untuned call runs the split-cluster twin of ``cfg`` (its routed
    configuration, untuned at ``splits``) at, or None to keep ``cfg`` at ``splits``. ``resident``:
    split count -> clusters of the twin the driver holds at once (the caller's query). Of the counts
    whose clusters are all resident, the one the SM-balance model rates fastest at
    :data:`SPLIT_CLUSTER_GAIN` of its time, where that beats ``splits`` without clusters."""
    groups = OC // COLS
    best_t, best_s = _modeled_time(cfg, K, IC, OC, M, splits, sms), None
    for S in sorted(resident):
        if groups <= resident[S]:
            t = SPLIT_CLUSTER_GAIN * _modeled_time(cfg, K, IC, OC, M, S, sms)
            if t < best_t:
                best_t, best_s = t, S
    return best_s


def driver_probe_configs(K: float, codebook: str, IC: int, OC: int, M: int, sms: int,
                         arch: str) -> list[FusedConfig]:
    """The configurations whose kernels an untuned plan of one problem on ``arch`` loads to ask the
    driver how many of its clusters are resident (ops/fused.py cluster_slots at M = 9..16,
    untuned_split_cluster at M <= SWAP_MAX_M), whether or not it then runs them: tune() compiles
    them in its pool instead of one by one. Exact: default_config_for is asked with a count that
    takes no cluster, so every configuration it could ask about is asked."""
    if not has_clusters(arch):
        return []
    asked: list[FusedConfig] = []

    def record(cfg: FusedConfig, splits: int) -> int:
        asked.append(cfg)
        return 0
    cfg = default_config_for(K, codebook, IC, OC, M, sms, arch, record)
    twin = split_cluster_twin(swap_route(cfg, vendor_of(arch), codebook, M), M)
    if twin is not None and split_cluster_counts(twin, K, IC, M, arch):
        asked.append(twin)
    return list(dict.fromkeys(asked))


# 16 waves fed by the prep kernel spill 8-32 bytes on mul1 at these rates under NVRTC 13.5 (its x
# sums; 128 registers at 512 threads; K = 2.5 since session 29's staged output factors moved
# ptxas' allocation), and CI rejects spills: those layers take 8 waves instead
_W16X_MUL1_SPILLS = (1.5, 2.5, 3.0, 5.0, 6.0, 7.0)


# NVIDIA sm_90, M = 17..64: the A operand streamed through a ring of 3 one-step chunks (x_ring) lets a
# block hold its whole K range, so one split needs no partials and no finishing block (the whole A
# operand does not fit: 64 rows x 4096 fp16 is 512 KB). Where one split's blocks fill their last
# round of SMs to RING_MIN_FILL or more, that beats split-K: 4096x14336 (112 column groups, 0.85 of
# 132 SMs) 0.67-0.86x and 8192x28672 (224 groups, two rounds 0.85 full) 0.66-1.00x the time of the
# tuned split-K entries at M = 32 / 64, themselves at most the untuned time (H100, session 42; the H200
# the same, session 43: 0.769x the split-K default on 5120x13824 / 2048x14336, benchmarks/RESULTS.md);
# with 32 groups (4096x4096, 14336x4096) the same kernels ran 1.08-1.49x the tuned time at 2 splits:
# those shapes need splits for parallelism.
_RING = {2: FusedConfig(warps=16, m_tiles=2, rows_per_stage=16, stages=2, min_blocks=1, xh=1, x_ring=3),
         4: FusedConfig(warps=16, m_tiles=4, rows_per_stage=8, stages=3, min_blocks=1, xh=1, x_ring=3)}
RING_MIN_FILL = 0.8
RING_MIN_IC = 2048        # measured at IC = 4096 and 8192; a shorter K range is a few ring laps


# 16 waves at 2 m tiles spill 8-208 bytes on mul1 at these rates (its x sums, 128 registers at 512
# threads; NVRTC 13.5 and 13.0), and CI rejects spills: those layers keep the split-K default
_RING_MT2_MUL1_SPILLS = (1.5, 2.5, 3.5, 5.0, 6.0, 7.0, 8.0)
# the untuned configurations whose kernels spill on mul1, and at which rates (_default_allowed)
_MUL1_SPILLS = {_MID_M["w16x"]: _W16X_MUL1_SPILLS, _RING[2]: _RING_MT2_MUL1_SPILLS}


def _ring_fills(K: float, codebook: str, IC: int, OC: int, M: int, sms: int, smem_cap: int) -> Optional[FusedConfig]:
    """The one-split ring configuration for M rows where its blocks fill the SMs (above) and one split
    fits ``smem_cap`` (as :func:`default_launch` asks; not e.g. the 2-m-tile ring at M = 32 from K = 6
    on, its trellis rings growing with K: at more splits it was never measured to win), else None.
    Each of its two K slices takes whole steps of 16 x rows_per_stage features."""
    cfg = _RING.get(_m_tiles(M))                       # None at one m tile (M <= 16) and above 4
    groups = OC // COLS
    if (cfg is None or not _default_allowed(cfg, codebook, K) or IC < RING_MIN_IC or IC % (2 * 16 * cfg.rows_per_stage)
            or groups == 0 or 1 not in _fitting_splits(cfg, K, IC, M, smem_cap)):
        return None
    return cfg if groups / (math.ceil(groups / sms) * sms) >= RING_MIN_FILL else None


def _default_allowed(cfg: FusedConfig, codebook: Optional[str], K: Optional[float] = None) -> bool:
    """Whether the untuned configuration ``cfg`` keeps to registers for a codebook's layers at rate K
    (None: any rate): not where :data:`_MUL1_SPILLS` lists it."""
    rates = _MUL1_SPILLS.get(cfg, ())
    return not (rates and codebook == "mul1" and (K is None or K in rates))


def default_config_for(K: float, codebook: str, IC: int, OC: int, M: int, sms: int, arch: str,
                       cluster_slots: Optional[ClusterSlots] = None) -> FusedConfig:
    """The untuned configuration of one problem (the tuned table overrides it).

    NVIDIA, M <= 16: of :data:`_SMALL_M` / :data:`_MID_M` and :func:`default_config`, the one whose
    launch (:func:`default_launch`) the SM-balance model (:func:`_modeled_time`) rates fastest;
    at M = 9..16 with 16 waves the x source of :func:`_w16_prologue` (clusters only where
    ``cluster_slots`` says how many are resident at once: None, e.g. without a GPU, means none).
    NVIDIA M = 17..64 where ``arch`` streams the A operand (:func:`has_clusters`): the one-split
    A operand ring where its blocks fill the SMs (:func:`_ring_fills`; :func:`default_launch` runs it
    at one split). AMD, M > 16, and where IC admits no 16-row stages: :func:`default_config`.
    Splits are sized for ``arch``'s shared memory (:func:`smem_caps`)."""
    vendor = vendor_of(arch)
    fallback = default_config(M, vendor)
    smem_cap, block_smem = smem_caps(arch)
    if vendor != "nvidia" or M > 16:
        ring = _ring_fills(K, codebook, IC, OC, M, sms, smem_cap) if has_clusters(arch) else None
        return ring or fallback
    # the shape-free default (8 rows x 3 stages) is an option too, where its A-operand source agrees:
    # it wins where blocks are short and many (e.g. 18944x3584 at M <= 4: 37 splits of 512 features)
    if M <= 8 and M * (OC // COLS) >= 3 * sms:
        options = [_SMALL_M["w4"]]
    elif M <= 8 and (OC // COLS) * M * (IC // 128) >= XH_SWAP_MIN_ROTATIONS:
        options = [_SMALL_M["w8x"], _SMALL_M["w4"]]
    elif M <= 8:
        options = [_SMALL_M["w8"], fallback]
    else:
        options = [_MID_M["w8"], _MID_M["w16"], fallback]     # ties (several rounds of blocks): 8 waves
    best = None
    for cfg in options:
        split = _balanced_splits(swap_route(cfg, vendor, codebook, M), K, IC, OC, M, sms, smem_cap, block_smem)
        if split is not None and (best is None or split[0] < 0.999 * best[0]):
            best = (split[0], cfg, split[1])
    if best is None:
        return fallback
    _, cfg, S = best
    return _w16_prologue(K, codebook, IC, OC, M, S, cluster_slots) if cfg.warps == 16 else cfg


def _w16_prologue(K: float, codebook: str, IC: int, OC: int, M: int, S: int,
                  cluster_slots: Optional[ClusterSlots]) -> FusedConfig:
    """The 16-wave M = 9..16 configuration at S splits by where its x comes from: the in-kernel
    prologue split over clusters of 2 or 4 blocks (the smallest that leaves a wave at most
    :data:`XH_CLUSTER_MAX_ITEMS` items (:data:`XH_CLUSTER_MAX_ITEMS_VS_W8` where the prep kernel's
    16 waves would spill), from :data:`XH_CLUSTER_MIN_ITEMS` at CL = 1, where every
    cluster of the launch is resident at once), else the in-kernel prologue of one block (at most
    :data:`XH_MAX_ITEMS_PER_WAVE` items per wave), else the prep kernel."""
    items = M * (IC // S // 128) / 16                    # Hadamard items per wave of one block
    groups = OC // COLS
    prep_w16 = _default_allowed(_MID_M["w16x"], codebook, K)
    max_items = XH_CLUSTER_MAX_ITEMS if prep_w16 else XH_CLUSTER_MAX_ITEMS_VS_W8
    if cluster_slots is not None and items >= XH_CLUSTER_MIN_ITEMS:
        for cfg in (_MID_M["w16c2"], _MID_M["w16c4"]):
            cl = cfg.cluster
            if groups % cl == 0 and items / cl <= max_items and groups * S <= cl * cluster_slots(cfg, S):
                return cfg
    if items <= XH_MAX_ITEMS_PER_WAVE:
        return _MID_M["w16"]
    return _MID_M["w16x"] if prep_w16 else _MID_M["w8"]


def _amd_default_config(M: int) -> FusedConfig:
    """gfx12 (RDNA4) from first principles, until a table measured on the hardware exists
    (docs/AMD_ESTIMATE.md has the numbers):

    * LDS limits occupancy (64 KiB per workgroup, 128 KiB per WGP of 2 CUs x 2 SIMD32; the M = 1
      kernel needs ~144 VGPRs, i.e. 10 waves per SIMD, so registers do not), hence 2 stages: the
      global -> LDS copies are synchronous on gfx12 (no cp.async), so a third stage buys no
      latency hiding, only LDS, and 2 stages let 3 blocks share a WGP;
    * 4 waves x 2 tile columns up to M = 8 (one wave per SIMD... per block), 8 waves above, as on
      NVIDIA (the A operand is shared by all waves of a block);
    * at most 8 m tiles (M <= 128): 16 m tiles do not fit 64 KiB with the A operand; larger M
      goes to the dense-weight GEMM path (ops/linear.py);
    * the prep kernel from M = 9, as on NVIDIA (the in-block Hadamard is repeated per column
      group; its cost grows with M while the prep launch is fixed).
    """
    mt = min(_m_tiles(M), 8)
    return FusedConfig(warps=4 if M <= 8 else 8, m_tiles=mt, rows_per_stage=8 if mt <= 2 else 4, stages=2,
                       min_blocks=2 if mt <= 2 else 1, xh=1 if M >= XH_MIN_M else 0)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


SM_SMEM = sm_smem_limit("sm_90")       # shared memory of one H100 / H200 SM, which _modeled_time is fitted to


def smem_caps(arch: str) -> tuple[int, int]:
    """(budget, block) in bytes for the untuned launch on ``arch``: the shared memory a block that
    shares its SM may take (:data:`SMEM_BUDGET`, at most the block limit) and what a block alone on
    its SM (min_blocks 1) may take (kernels.limits.block_smem_limit: 227 KiB on sm_90, 99 KiB on
    sm_86 / sm_89 / sm_120, so no default plan asks a GPU for more than it has)."""
    block = block_smem_limit(arch)
    return min(SMEM_BUDGET[vendor_of(arch)], block), block


def _fitting_splits(cfg: FusedConfig, K: float, IC: int, M: int, smem_cap: int, i8: bool = False) -> list[int]:
    return [d for d in _divisors(IC // 128)
            if IC // d % (16 * cfg.rows_per_stage) == 0 and smem_layout(cfg, K, M, IC // d, i8).total <= smem_cap]


def _modeled_time(cfg: FusedConfig, K: float, IC: int, OC: int, M: int, S: int, sms: int) -> float:
    """Relative time of a launch on an NVIDIA GPU, from how its blocks spread over the SMs (fitted to
    the H200's tuned table and to tuner runs on shapes outside it, benchmarks/bench_heuristic.py).

    The busiest SM runs ceil(blocks / SMs) blocks of IC/S features each, plus a fixed cost per block
    worth 512 features (prologue, pipeline fill, epilogue) that the SM's other resident blocks hide
    in proportion to their number. The kernels take ~110 registers, so ~16 waves fit an SM whatever
    the block size, and an SM with fewer resident waves issues proportionally slower (the decode is
    bound by integer issue, ~4 waves per scheduler). Each doubling of S costs 2 % (4 % at M > 8,
    where the partials are larger): the split-K publication and the last block's sum."""
    blocks = (OC // COLS) * S
    per_sm = -(-blocks // sms)
    smem = smem_layout(cfg, K, M, IC // S).total
    slots = max(1, min(max(cfg.min_blocks, 16 // cfg.warps), SM_SMEM // (smem + block_smem_reserved("sm_90"))))
    resident = min(per_sm, slots)
    issue = min(1.0, resident * cfg.warps / 16)
    return per_sm * (IC // S + 512 / resident) / issue * (1 + 0.02 * math.log2(S) * (2 if M > 8 else 1))


def _balanced_splits(cfg: FusedConfig, K: float, IC: int, OC: int, M: int, sms: int,
                     smem_cap: int, block_smem: int) -> Optional[tuple[float, int]]:
    """(modeled time, split) of the split the model rates fastest (ties: the fewest splits); None if
    none fits. A block alone on its SM (min_blocks 1) may take all a block can (``block_smem``)."""
    best = None
    for S in _fitting_splits(cfg, K, IC, M, smem_cap if cfg.min_blocks > 1 else max(smem_cap, block_smem)):
        t = _modeled_time(cfg, K, IC, OC, M, S, sms)
        if best is None or t < 0.999 * best[0]:
            best = (t, S)
    return best


def default_launch(cfg: FusedConfig, K: float, IC: int, OC: int, M: int, sms: int,
                   arch: str = "sm_90", i8: bool = False) -> FusedLaunch:
    """The untuned split count of ``cfg`` (the routed config the call runs) on a GPU of ``sms``
    SMs / CUs of ``arch``. NVIDIA, M <= 16, fp16 activations: the split the SM-balance model
    (:func:`_modeled_time`) rates fastest. An A operand ring (x_ring) above one m tile: one split,
    the whole K range per block (:func:`default_config_for` picks it where that fills the SMs).
    Elsewhere: the fewest splits that give 3.5+ blocks per SM. Every split fits the arch's
    shared memory (:func:`smem_caps`)."""
    vendor = vendor_of(arch)
    smem_cap, block_smem = smem_caps(arch)
    if cfg.x_ring and cfg.m_tiles > 1 and 1 in _fitting_splits(cfg, K, IC, M, smem_cap, i8):
        return FusedLaunch(1)
    modeled = vendor == "nvidia" and M <= 16 and not i8
    split = _balanced_splits(cfg, K, IC, OC, M, sms, smem_cap, block_smem) if modeled else None
    fitting = [] if modeled else _fitting_splits(cfg, K, IC, M, smem_cap, i8)
    if split is None and not fitting:
        raise ValueError(f"no split of IC={IC} fits shared memory for M={M} with {cfg}")
    if split is not None:
        return FusedLaunch(split[1])
    groups = OC // COLS
    for d in fitting:
        if 2 * groups * d >= 7 * sms:
            return FusedLaunch(d)
    return FusedLaunch(fitting[-1])

"""The fused coded linear for small and medium M (templates/fused.hip.j2, include/escha/fused.h).

Compile-time tile configuration (:class:`FusedConfig`): waves per block, m16 tiles, tile rows per
pipeline stage, stages. Run-time launch parameters (:class:`FusedLaunch`): the split count S
(grid.y) and the chunk of input features staged in shared memory at a time (kc).
The shared-memory layout has ONE formula, :func:`smem_layout`; its compile-time part (the trellis
stage bytes) is rendered into the kernel, which static_asserts it, and the host uses the whole to
size the launch and to filter tuning candidates.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Optional

import torch

from ..reference import LinearWeights
from ..spec import KernelSpec
from ..trellis import check_rate_codebook, tile_words
from .common import DTYPE_CODES, DTYPE_NAMES, arch_of, check_tensor, kernel_for

COLS = 128
ARGS = ("ptr", "i64", "ptr", "i64", "ptr", "ptr", "ptr", "ptr", "ptr", "ptr",
        "i32", "i32", "i32", "i32", "i32", "i32", "i32", "ptr", "ptr", "i32", "i32", "i32")
MAX_M = 256


@dataclasses.dataclass(frozen=True)
class FusedConfig:
    warps: int = 8            # waves per block (divides 8: each owns 8/warps tile columns)
    m_tiles: int = 1          # m16 tiles: M <= 16 * m_tiles
    rows_per_stage: int = 4   # tile rows (16 input features each) per pipeline stage
    stages: int = 3

    def tile(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class FusedLaunch:
    splits: int               # S: blocks along the input features
    kc: int                   # input features staged in shared memory at a time


@dataclasses.dataclass(frozen=True)
class SmemLayout:
    off_tr: int
    off_red: int
    off_exp: int
    total: int
    tr_bytes: int


def _align(n: int, a: int = 16) -> int:
    return -(-n // a) * a


def smem_layout(cfg: FusedConfig, K: float, kc: int) -> SmemLayout:
    """Bytes of dynamic shared memory: A operand [16*m_tiles][kc + 8] fp16, trellis stages
    [stages][rows_per_stage][8 tiles][W32] u32, partial sums [16*m_tiles][132] fp32, exponents."""
    mp = 16 * cfg.m_tiles
    w32 = tile_words(K) // 2
    xs = _align(mp * (kc + 8) * 2)
    tr = cfg.stages * cfg.rows_per_stage * 8 * w32 * 4
    red = mp * (COLS + 4) * 4
    ex = _align((2 * mp + 1) * 4)
    return SmemLayout(xs, xs + tr, xs + tr + red, xs + tr + red + ex, tr)


def spec_for(arch: str, K: float, codebook: str, in_dtype: str, out_dtype: str, cfg: FusedConfig) -> KernelSpec:
    return KernelSpec.make("fused", arch, K=K, codebook=codebook, in_dtype=in_dtype, out_dtype=out_dtype,
                           tile=cfg.tile())


def render_extra(spec: KernelSpec) -> dict:
    cfg = FusedConfig(**spec.params)
    return {"in_code": DTYPE_CODES[spec.in_dtype], "out_code": DTYPE_CODES[spec.out_dtype],
            "tr_bytes": smem_layout(cfg, spec.K, 128).tr_bytes}


def default_config(M: int) -> FusedConfig:
    mt = 1
    while 16 * mt < M:
        mt *= 2
    return FusedConfig(warps=8, m_tiles=mt, rows_per_stage=4, stages=3)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def default_launch(cfg: FusedConfig, K: float, IC: int, OC: int, sms: int, smem_cap: int = 200 * 1024) -> FusedLaunch:
    """Heuristic: enough blocks to fill the GPU about twice, chunks as large as shared memory
    allows up to 1024 features (fewer prologue passes)."""
    groups = OC // COLS
    blocks128 = IC // 128
    splits = blocks128
    for d in _divisors(blocks128):
        if groups * d >= 2 * sms:
            splits = d
            break
    kr = IC // splits
    kc = 128
    for c in range(128, min(kr, 1024) + 1, 128):
        if kr % c == 0 and c % (16 * cfg.rows_per_stage) == 0 and smem_layout(cfg, K, c).total <= smem_cap:
            kc = c
    return FusedLaunch(splits, kc)


class _Scratch:
    """Per (device, stream) split-K workspace and self-resetting counters; grown, never shrunk,
    allocated outside CUDA-graph capture (first call of a shape, or warm-up)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._bufs: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, device: torch.device, stream: int, ws_floats: int, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
        key = (device.index, stream)
        with self._lock:
            ws, cnt = self._bufs.get(key, (None, None))
            if ws is None or ws.numel() < ws_floats or cnt.numel() < groups:
                if torch.cuda.is_current_stream_capturing():
                    raise RuntimeError("escha_jit: split-K scratch must grow inside CUDA-graph capture; "
                                       "run each layer once with the largest M before capturing")
                ws = torch.empty(max(ws_floats, ws.numel() if ws is not None else 0, 1), dtype=torch.float32,
                                 device=device)
                cnt = torch.zeros(max(groups, cnt.numel() if cnt is not None else 0, 1), dtype=torch.int32,
                                  device=device)
                self._bufs[key] = (ws, cnt)
            return ws, cnt


scratch = _Scratch()
_SMS: dict[int, int] = {}


def _sms(device: torch.device) -> int:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx]


def fused_linear(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
                 out_dtype: Optional[torch.dtype] = None, cfg: Optional[FusedConfig] = None,
                 launch: Optional[FusedLaunch] = None, bias32: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W in one launch (M <= 256).

    x fp16/bf16/fp32 with unit last stride; ``out`` an optional [M, out_features] view with unit
    last stride (e.g. a column slice of a merged projection's output); ``bias32`` the layer's bias
    as fp32 (pass it precomputed to avoid a conversion per call).
    """
    check_rate_codebook(w.K, w.codebook)
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, in_features], got shape {list(x.shape)}")
    dev = x.device
    check_tensor("x", x, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(None, w.logical_in), contiguous=False)
    if x.stride(1) != 1:
        raise ValueError(f"x must have unit stride in its last dim, got strides {x.stride()}")
    M = x.shape[0]
    if M > MAX_M:
        raise ValueError(f"fused_linear handles M <= {MAX_M}, got {M}")
    check_tensor("code", w.code, dtypes=(torch.int16,), device=dev, shape=(None, None, tile_words(w.K)))
    IC, OC = w.IC, w.OC
    check_tensor("rin", w.rin, dtypes=(torch.float16,), device=dev, shape=(IC,))
    check_tensor("rout", w.rout, dtypes=(torch.float16,), device=dev, shape=(OC,))
    check_tensor("s_in", w.s_in, dtypes=(torch.float32,), device=dev, shape=(IC,), optional=True)
    check_tensor("s_out", w.s_out, dtypes=(torch.float32,), device=dev, shape=(OC,), optional=True)
    if bias32 is None and w.bias is not None:
        bias32 = w.bias.to(torch.float32)
    check_tensor("bias", bias32, dtypes=(torch.float32,), device=dev, shape=(OC,), optional=True)
    if out is None:
        out = torch.empty(M, w.logical_out, dtype=out_dtype or x.dtype, device=dev)
    else:
        check_tensor("out", out, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(M, w.logical_out), contiguous=False)
        if out.stride(1) != 1:
            raise ValueError(f"out must have unit stride in its last dim, got strides {out.stride()}")
    if M == 0:
        return out
    cfg = cfg or default_config(M)
    if 16 * cfg.m_tiles < M:
        raise ValueError(f"config {cfg} covers M <= {16 * cfg.m_tiles}, got M={M}")
    launch = launch or default_launch(cfg, w.K, IC, OC, _sms(dev))
    kr = IC // launch.splits
    if IC % launch.splits or kr % launch.kc or launch.kc % 128 or launch.kc % (16 * cfg.rows_per_stage):
        raise ValueError(f"launch {launch} does not tile IC={IC} (needs kc | IC/S, 128 | kc, "
                         f"16*rows_per_stage | kc)")
    lay = smem_layout(cfg, w.K, launch.kc)
    spec = spec_for(arch_of(dev), w.K, w.codebook, DTYPE_NAMES[x.dtype], DTYPE_NAMES[out.dtype], cfg)
    k = kernel_for(spec, dev, ARGS, render_extra(spec))
    groups = OC // COLS
    stream = torch.cuda.current_stream(dev).cuda_stream
    if launch.splits > 1:
        ws, cnt = scratch.get(dev, stream, launch.splits * M * OC, groups)
    else:
        ws = cnt = None
    k.launch((groups, launch.splits), (32 * cfg.warps,),
             (x, x.stride(0), out, out.stride(0), w.code, w.rin, w.s_in, w.rout, w.s_out, bias32,
              M, IC, OC, kr, launch.kc, w.logical_in, w.logical_out, ws, cnt, lay.off_tr, lay.off_red, lay.off_exp),
             smem=lay.total, stream=stream)
    return out

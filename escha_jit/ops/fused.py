"""The fused coded linear, torch entry point (the kernel side lives in escha_jit.kernels.fused)."""
from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from typing import Optional

import torch

from ..kernels import prep
from ..kernels.fused import (ARGS, COLS, I8_MAX_M, MAX_M, ROUTE_MAX_M, SWAP_MAX_M, ClusterSlots, FusedConfig, FusedLaunch,
                             check_act_quant, occupancy_smem, default_config, default_config_for, default_config_i8, default_launch, has_clusters, render_extra, smem_caps, smem_layout, spec_for,
                             split_cluster_counts, split_cluster_splits, split_cluster_twin, swap_route, x_chunks)
from ..kernels.registry import check_fused_smem, fused_fits
from ..spec import nvidia_sm, vendor_of
from .. import env
from ..reference import LinearWeights
from ..autotune.table import Entry, TableError, entry_key, tables
from ..errors import EschaError
from ..jit import compile_spec
from .common import DTYPE_NAMES, NotWarmedUp, arch_of, check_call, kernel_for

log = logging.getLogger(__name__)

__all__ = ["FusedConfig", "FusedLaunch", "MAX_M", "fused_linear", "prep_kernel", "run_prep", "scratch"]


def _capturing(device: torch.device) -> bool:
    """Whether the current stream of a GPU ``device`` is being captured into a CUDA graph."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


class _Scratch:
    """Per-device buffers of the fused calls: the prep kernel's rows and exponents, its per-row
    counters, the split-K workspace and its self-resetting counters. Grown, never shrunk, only
    outside CUDA-graph capture (first call of a shape, or warm-up); a grown buffer's predecessor is
    kept alive, since graphs captured before still point at it.

    One buffer per device means coded linears of one device must not run concurrently on two
    streams (every engine we target runs a model on one stream; graphs replay in order)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._bufs: dict[tuple, tuple[torch.Tensor, ...]] = {}
        self._retired: list[tuple[torch.Tensor, ...]] = []

    def _grown(self, name: str, device: torch.device, what: str,
               wanted: tuple[tuple[int, torch.dtype, bool], ...]) -> tuple[torch.Tensor, ...]:
        """The device's buffers ``name``, each at least (elements, dtype, zero-filled) of ``wanted``."""
        key = (name, device.index if device.index is not None else torch.cuda.current_device())
        with self._lock:
            bufs = self._bufs.get(key)
            if bufs is None or any(b.numel() < n for b, (n, _, _) in zip(bufs, wanted)):
                if _capturing(device):
                    raise RuntimeError(f"escha_jit: {what} must grow inside CUDA-graph capture; "
                                       "run each layer once with the largest M before capturing")
                if bufs is not None:
                    self._retired.append(bufs)
                bufs = self._bufs[key] = tuple(
                    (torch.zeros if zero else torch.empty)(max(n, bufs[i].numel() if bufs else 0, 1), dtype=dt,
                                                           device=device)
                    for i, (n, dt, zero) in enumerate(wanted))
            return bufs

    def _prep(self, device: torch.device, M: int, IC: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The prep kernel's output bytes and int32 [M] exponents: one buffer for both layouts, grown
        by a call of M rows to what either layout needs at up to M rows (the words layout at most
        SWAP_MAX_M), so that warming a layer up at its largest M also covers its swapped calls."""
        need = max(2 * M * IC, 4 * prep.buffer_words(min(M, SWAP_MAX_M), IC))
        return self._grown("xh", device, "the prep buffer", ((need, torch.uint8, False), (M, torch.int32, False)))

    def xh(self, device: torch.device, M: int, IC: int) -> tuple[torch.Tensor, torch.Tensor]:
        """fp16 [M*IC] view and int32 [M] exponents for the prep kernel's output."""
        buf, exp = self._prep(device, M, IC)
        return buf[:2 * M * IC].view(torch.float16), exp

    def xw(self, device: torch.device, M: int, IC: int) -> tuple[torch.Tensor, torch.Tensor]:
        """int32 view of kernels.prep.buffer_words(M, IC) and int32 [M] exponents for the words
        prep kernel's output (the swapped route's A side)."""
        buf, exp = self._prep(device, M, IC)
        return buf[:4 * prep.buffer_words(M, IC)].view(torch.int32), exp

    def prep_sync(self, device: torch.device, M: int) -> torch.Tensor:
        """int32 [2*M] of zeros: per row, the prep kernel's exponent need and block count when a row
        is split over several blocks (kernels.prep.segments); the last block of a row resets both."""
        return self._grown("prep_sync", device, "the prep buffer", ((2 * M, torch.int32, True),))[0]

    def get(self, device: torch.device, ws_floats: int, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 split-K workspace of >= ws_floats and int32 [groups] counters of zeros (reset by the
        last block of each column group)."""
        return self._grown("split_k", device, "split-K scratch",
                           ((ws_floats, torch.float32, False), (groups, torch.int32, True)))


scratch = _Scratch()
_SMS: dict[int, int] = {}


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything a call of one (layer shape, dtypes, M) needs, resolved once: config, launch,
    shared-memory layout and the loaded kernels. Later calls are one dictionary lookup."""
    cfg: FusedConfig
    launch: FusedLaunch
    layout: object
    smem: int                      # the launch's dynamic shared memory: layout.total, padded to the launch's
                                   # blocks_per_sm where the kernel would fit more (kernels.fused.occupancy_smem)
    kernel: object
    prep: object
    pdl: bool                      # launched as programmatic dependents (NVIDIA sm_90+, see pdl_supported)
    source: str                    # "table" or "heuristic" or "explicit"
    x_chunks: int                  # chunks of the xh A operand (kernels.fused.x_chunks; used by xh=1 on sm_90;
                                   # the swapped route takes it in one)


_PLANS: dict[tuple, Plan] = {}


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors (NVIDIA) / compute units (AMD) of a GPU, cached per device index."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx]


def _fits_smem(cfg: FusedConfig, launch: FusedLaunch, K: float, IC: int, M: int, budget: int) -> bool:
    return IC % launch.splits == 0 and smem_layout(cfg, K, M, IC // launch.splits,
                                                   splits=launch.splits).total <= budget


def _fits(cfg: FusedConfig, launch: FusedLaunch, IC: int, M: int) -> bool:
    kr = IC // launch.splits
    return (16 * cfg.m_tiles >= M and IC % launch.splits == 0 and kr % 128 == 0
            and kr % (16 * cfg.rows_per_stage) == 0)


def plan_for(dev: torch.device, K: float, codebook: str, IC: int, OC: int, in_dt: str, out_dt: str, M: int,
             cfg: Optional[FusedConfig] = None, launch: Optional[FusedLaunch] = None,
             act_quant: Optional[str] = None) -> Plan:
    """The plan of a call: explicit config/launch, else the tuned table's entry for the M bucket,
    else the heuristic. Compiles / loads kernels on first use (never inside graph capture).
    ``act_quant='int8'``: the int8-activation kernels (heuristic only; not in the tuned tables)."""
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    key = (idx, K, codebook, IC, OC, in_dt, out_dt, M, cfg, launch, act_quant)
    p = _PLANS.get(key)
    if p is not None:
        return p
    check_act_quant(act_quant, codebook)
    i8 = act_quant == "int8"
    arch = arch_of(dev)
    source = "explicit"
    if i8:
        if cfg is not None and cfg.xh:
            raise ValueError(f"config {cfg}: the int8-activation kernels quantize in their own prologue (xh=0)")
        if cfg is None:
            cfg, source = default_config_i8(M, vendor_of(arch)), "heuristic"
    elif cfg is None and launch is None:
        key_name = entry_key("fused", K, codebook, IC, OC, in_dt, M)
        e = tables().lookup(arch, key_name)
        chosen = table_choice(arch, K, codebook, IC, in_dt, out_dt, M, e, key_name) if e is not None else None
        if chosen is not None:
            cfg, launch, source = chosen
        else:
            source = "heuristic"
    vendor = vendor_of(arch)
    budget, _ = smem_caps(arch)
    if cfg is None:
        slots = cluster_slots(dev, K, codebook, in_dt, out_dt, M, IC) if launch is None else None
        cfg = default_config_for(K, codebook, IC, OC, M, sm_count(dev), arch, slots)
    if 16 * cfg.m_tiles < M:
        raise ValueError(f"config {cfg} covers M <= {16 * cfg.m_tiles}, got M={M}")
    cfg = _routed(cfg, launch, vendor, codebook, K, IC, M, act_quant, budget)
    if cfg.dot and M != 1:
        raise ValueError(f"config {cfg}: the dot route takes M = 1, got M={M}")
    if (OC // COLS) % cfg.cluster:
        raise ValueError(f"config {cfg}: clusters of {cfg.cluster} column groups do not tile OC={OC} "
                         f"({OC // COLS} groups of {COLS})")
    launch = launch or default_launch(cfg, K, IC, OC, M, sm_count(dev), arch, i8=i8)
    if source == "heuristic" and not i8 and has_clusters(arch):
        cfg, launch = untuned_split_cluster(dev, K, codebook, in_dt, out_dt, M, IC, OC, cfg, launch)
    if not _fits(cfg, launch, IC, M):
        raise ValueError(f"launch {launch} does not tile IC={IC}: IC/S must be a multiple of 128 and of "
                         f"16*rows_per_stage={16 * cfg.rows_per_stage}")
    if cfg.split_cluster and not 2 <= launch.splits <= 8:
        raise ValueError(f"config {cfg}: split_cluster=1 launches the splits of a column group as one cluster "
                         f"of 2..8 blocks; got splits={launch.splits}")
    layout = smem_layout(cfg, K, M, IC // launch.splits, i8, launch.splits)
    check_fused_smem(arch, cfg, layout.total)        # before compiling: the driver would refuse the launch
    spec = spec_for(arch, K, codebook, in_dt, out_dt, cfg, act_quant)
    k = kernel_for(spec, dev, ARGS, render_extra(spec))
    smem = layout.total
    if launch.blocks_per_sm and k.max_active_blocks(32 * cfg.warps, smem) > launch.blocks_per_sm:
        smem = occupancy_smem(smem, launch.blocks_per_sm, arch)   # only where the kernel would exceed its pin
    pk = None
    if cfg.xh:
        pk = prep_kernel(dev, in_dt, words=bool(cfg.swap))
    p = _PLANS[key] = Plan(cfg, launch, layout, smem, k, pk,
                           pdl_supported(arch), source,
                           1 if cfg.swap else x_chunks((OC // COLS) * launch.splits, sm_count(dev) * cfg.min_blocks))
    return p


def _routed(cfg: FusedConfig, launch: Optional[FusedLaunch], vendor: str, codebook: str, K: float, IC: int, M: int,
            act_quant: Optional[str], budget: int) -> FusedConfig:
    """The configuration a call of M rows runs (kernels.fused.swap_route), where its launch still fits."""
    routed = swap_route(cfg, vendor, codebook, M, act_quant)
    if routed != cfg and (launch is None or _fits_smem(routed, launch, K, IC, M, budget)):
        return routed
    return cfg


def _entry_candidates(e: Entry) -> list[tuple[FusedConfig, FusedLaunch, str]]:
    """A tuned entry's winner, then its runner-up where the tuner recorded one."""
    out = [(e.cfg, e.launch, "table")]
    try:
        ru = e.runner_up()
    except TableError as err:
        log.warning("ignoring the runner-up of a tuned entry: %s", err)
    else:
        if ru is not None:
            out.append((ru.cfg, ru.launch, "table runner-up"))
    return out


def local_memory_bytes(arch: str, K: float, codebook: str, in_dt: str, out_dt: str, cfg: FusedConfig) -> int:
    """Spill / stack bytes of the fused kernel of ``cfg`` as this machine's compiler builds it
    (compiled, or loaded from the disk cache; 0 when the compiler reports no resources)."""
    spec = spec_for(arch, K, codebook, in_dt, out_dt, cfg)
    res = compile_spec(spec, render_extra(spec)).code.resources.get(spec.kernel_name(), {})
    return max(res.get("spill_bytes") or 0, res.get("stack_bytes") or 0)


def table_choice(arch: str, K: float, codebook: str, IC: int, in_dt: str, out_dt: str, M: int, e: Entry,
                 key_name: str = "") -> Optional[tuple[FusedConfig, FusedLaunch, str]]:
    """(config, launch, source) a call takes from its tuned entry ``e``: the tuner's winner, else its
    runner-up, each only where it tiles the call and its kernel keeps to registers under this
    machine's compiler (one that fails to compile here, or is not in a prebuilt cache where
    compiling is off, is passed over too); None: the heuristic. The tuner rejected spilling kernels
    under the compiler it ran with, but another compiler version can allocate the same source
    differently (three of the H200 table's winners spill 80-136 bytes under NVRTC 13.5 and none
    under 13.0: benchmarks/RESULTS.md session 35), and a spilling kernel runs from local memory."""
    vendor = vendor_of(arch)
    budget, _ = smem_caps(arch)
    for cfg, launch, source in _entry_candidates(e):
        if not _fits(cfg, launch, IC, M):
            continue
        what = f"tuned {key_name or 'entry'} {source} ({cfg}, splits {launch.splits})"
        try:
            spilled = local_memory_bytes(arch, K, codebook, in_dt, out_dt,
                                         _routed(cfg, launch, vendor, codebook, K, IC, M, None, budget))
        except EschaError as err:        # fails to compile here, or not prebuilt where compiling is off
            log.warning("%s: not taken: %s", what, err)
            continue
        if not spilled:
            return cfg, launch, source
        log.warning("%s uses %d bytes of local memory (spills) under this machine's compiler: not taken",
                    what, spilled)
    return None


def untuned_split_cluster(dev: torch.device, K: float, codebook: str, in_dt: str, out_dt: str, M: int, IC: int,
                          OC: int, cfg: FusedConfig, launch: FusedLaunch) -> tuple[FusedConfig, FusedLaunch]:
    """The untuned call's (configuration, launch): the split-cluster twin of ``cfg`` (the routed untuned
    choice at ``launch``; kernels.fused.split_cluster_twin) at the split count
    kernels.fused.split_cluster_splits picks from the driver's counts of resident clusters, where its
    kernel keeps to registers; else ``cfg`` and ``launch``. Loads the twin's kernel to ask the driver
    (a compile the call may not use; shipped, so a prebuilt cache has it)."""
    twin = split_cluster_twin(cfg, M)
    arch = arch_of(dev)
    counts = split_cluster_counts(twin, K, IC, M, arch) if twin is not None else []
    if not counts:
        return cfg, launch
    try:
        if local_memory_bytes(arch, K, codebook, in_dt, out_dt, twin):
            return cfg, launch
        spec = spec_for(arch, K, codebook, in_dt, out_dt, twin)
        k = kernel_for(spec, dev, ARGS, render_extra(spec))
        resident = {S: k.max_active_clusters((32 * twin.warps,), smem_layout(twin, K, M, IC // S, splits=S).total, S)
                    for S in counts}
    except NotWarmedUp:
        raise
    except RuntimeError as e:              # not prebuilt where compiling is off, a driver refusal
        log.warning("no split clusters for this untuned call: %s is not usable (%s)", twin, e)
        return cfg, launch
    S = split_cluster_splits(cfg, K, IC, OC, M, sm_count(dev), launch.splits, resident)
    return (cfg, launch) if S is None else (twin, FusedLaunch(S))


def cluster_slots(dev: torch.device, K: float, codebook: str, in_dt: str, out_dt: str, M: int,
                  IC: int) -> Optional[ClusterSlots]:
    """The heuristic's count of resident clusters (kernels.fused.ClusterSlots) for one problem's
    fused kernels on ``dev``, from the driver (loads the cluster kernel asked about: one compile
    the heuristic may not use); None where there are no clusters (AMD, NVIDIA before sm_90)."""
    arch = arch_of(dev)
    if not has_clusters(arch):
        return None

    def slots(cfg: FusedConfig, splits: int) -> int:
        spec = spec_for(arch, K, codebook, in_dt, out_dt, cfg)
        try:
            k = kernel_for(spec, dev, ARGS, render_extra(spec))
            return k.max_active_clusters((32 * cfg.warps,), smem_layout(cfg, K, M, IC // splits).total, cfg.cluster)
        except NotWarmedUp:
            raise
        except RuntimeError as e:       # a cache without it under ESCHA_JIT_NO_COMPILE, a driver refusal:
            log.warning("no clusters for this untuned call: %s is not usable (%s)", spec, e)
            return 0                    # the heuristic's choice without clusters, which is shipped too
    return slots


def prep_kernel(dev: torch.device, in_dtype: str, words: bool = False, groups: bool = False):
    """The loaded prep kernel (kernels.prep) of activations ``in_dtype`` ('f16', 'bf16', 'f32') on
    dev; ``words``: the swapped route's variant, ``groups``: the coded GEMM's over more than
    kernels.prep.MANY_ROWS rows (kernels.prep.spec_for)."""
    s = prep.spec_for(arch_of(dev), in_dtype, words, groups)
    return kernel_for(s, dev, prep.ARGS, prep.render_extra(s))


def run_prep(kernel, x: torch.Tensor, w: LinearWeights, xh: torch.Tensor, xh_exp: torch.Tensor, stream: int,
             pdl: bool = False, segments: Optional[int] = None) -> None:
    """Launch the prep kernel (kernels.prep) over the rows of x: xh[m, :IC] = the rotated, scaled
    row as fp16 (times 2^-xh_exp[m]); xh a flat fp16 buffer of >= M * IC (the words variant: an
    int32 buffer of >= kernels.prep.buffer_words(M, IC), laid out as it says). Each row is split over
    ``segments`` blocks (default kernels.prep.segments: several for decode's few rows)."""
    M = x.shape[0]
    P, seg_blocks = prep.segments(M, w.IC, sm_count(x.device), segments)
    sync = scratch.prep_sync(x.device, M)
    kernel.launch((M, P), (prep.threads_for(M),),
                  (x, x.stride(0), w.rin, w.s_in, xh, xh_exp, w.IC, w.logical_in, seg_blocks, sync),
                  stream=stream, pdl=pdl)


def pdl_supported(arch: str) -> bool:
    """Whether fused calls on ``arch`` launch their kernels as programmatic dependents: NVIDIA
    sm_90 and later (griddepcontrol), unless ESCHA_JIT_NO_PDL=1. Each kernel then streams its
    first weight stages while the previous kernel of the stream finishes, and waits for it
    in-kernel before touching activations or writing anything (include/escha/fused.h). The fused
    kernel in turn lets the next programmatic dependent be scheduled before it ends (at block
    start, or after its main loop when it takes the prep kernel's rows); kernels launched
    normally after it are not affected.

    Consequence: a layer's trellis ``code`` must not be written by a kernel that may still be
    running when one of its calls is launched on the same stream (with the early scheduling that
    can be two kernels back; weights are constants in inference; after an in-place weight update,
    synchronize the stream first or set ESCHA_JIT_NO_PDL=1)."""
    return not env.no_pdl() and nvidia_sm(arch) >= 90


def fused_handles(dev: torch.device, K: float, M: int, act_quant: Optional[str] = None) -> bool:
    """Whether ops.linear sends a call of M rows on this device to the fused kernel (else the
    dense-weight GEMM path of ops/linear.py): M <= ROUTE_MAX_M of the vendor (NVIDIA 64: above it
    the dense path was faster on the H200; int8 activations: M <= 8) where the untuned
    configuration for M fits one block's shared memory (kernels.registry.fused_fits)."""
    arch = arch_of(dev)
    if not 0 < M <= (I8_MAX_M if act_quant == "int8" else ROUTE_MAX_M[vendor_of(arch)]):
        return False
    if act_quant == "int8":
        return fused_fits(arch, default_config_i8(M, vendor_of(arch)), K, i8=True, M=M)
    return fused_fits_call(dev, K, M)


def fused_fits_call(dev: torch.device, K: float, M: int) -> bool:
    """Whether the fused kernel can serve a call of M rows on this device at all (M <= MAX_M and
    the untuned configuration for M fits one block's shared memory), whatever the route rule."""
    return 0 < M <= MAX_M and _fused_fits_call(arch_of(dev), K, M)


@functools.lru_cache(maxsize=None)           # asked on every call; a few (arch, K, M <= 256) in a process
def _fused_fits_call(arch: str, K: float, M: int) -> bool:
    cfg = default_config(M, vendor_of(arch))
    return 16 * cfg.m_tiles >= M and fused_fits(arch, cfg, K, M=M)


def fused_linear(x: torch.Tensor, w: LinearWeights, out: Optional[torch.Tensor] = None,
                 out_dtype: Optional[torch.dtype] = None, cfg: Optional[FusedConfig] = None,
                 launch: Optional[FusedLaunch] = None, bias32: Optional[torch.Tensor] = None,
                 act_quant: Optional[str] = None) -> torch.Tensor:
    """y [M, out_features] = x [M, in_features] @ W in one launch (M <= 256).

    x fp16/bf16/fp32 with unit last stride; ``out`` an optional [M, out_features] view with unit
    last stride (e.g. a column slice of a merged projection's output); ``bias32`` the layer's bias
    as fp32 (pass it precomputed to avoid a conversion per call).

    ``act_quant='int8'`` (opt-in, mul1 layers, M <= 8): the rotated activations are quantized to
    int8 with one scale per (token, 128-feature block) and multiplied on the int8 matrix unit by
    the exact mul1 weights (the codebook's value before its final fp16 rounding). Error: ~0.5-1 %
    relative RMS of the output (benchmarks/RESULTS.md), against <= 0.1 % for the default path.
    """
    check_act_quant(act_quant, w.codebook)
    dev = w.code.device
    if dev.type != "cuda":
        raise ValueError(f"fused_linear needs the layer on a CUDA/ROCm device; its code is on {dev}")
    out, bias32 = check_call(x, w, out, bias32, out_dtype)
    M, IC, OC = x.shape[0], w.IC, w.OC
    if M > MAX_M:
        raise ValueError(f"fused_linear handles M <= {MAX_M}, got {M}")
    if act_quant == "int8" and M > I8_MAX_M:
        raise ValueError(f"act_quant='int8' handles M <= {I8_MAX_M}, got {M}")
    if M == 0:
        return out
    plan = plan_for(dev, w.K, w.codebook, IC, OC, DTYPE_NAMES[x.dtype], DTYPE_NAMES[out.dtype], M, cfg, launch,
                    act_quant)
    cfg, launch, lay = plan.cfg, plan.launch, plan.layout
    kr = IC // launch.splits
    groups = OC // COLS
    stream = torch.cuda.current_stream(dev).cuda_stream
    xh = xh_exp = None
    if cfg.xh:
        xh, xh_exp = (scratch.xw if cfg.swap else scratch.xh)(dev, M, IC)
        run_prep(plan.prep, x, w, xh, xh_exp, stream, pdl=plan.pdl)
    if launch.splits > 1 and not cfg.split_cluster:
        ws, cnt = scratch.get(dev, launch.splits * M * OC, groups)
    else:
        ws = cnt = None
    # split_cluster: the splits of a column group along x, one cluster (include/escha/fused.h SC)
    grid, cluster = ((launch.splits, groups), launch.splits) if cfg.split_cluster else ((groups, launch.splits),
                                                                                          cfg.cluster)
    plan.kernel.launch(grid, (32 * cfg.warps,),
             (x, x.stride(0), out, out.stride(0), w.code, w.rin, w.s_in, w.rout, w.s_out, bias32,
              M, IC, OC, kr, w.logical_in, w.logical_out, ws, cnt, lay.off_tr, lay.off_red, lay.off_exp,
              xh, xh_exp, plan.x_chunks),
             smem=plan.smem, stream=stream, pdl=plan.pdl, cluster=cluster)
    return out

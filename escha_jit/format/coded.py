"""One coded linear inside a checkpoint: tensor names, the checks of FORMAT.md section 6, loading.

Both checkpoint kinds map onto :class:`escha_jit.reference.LinearWeights`:
escha ``escha_code/rin/s_in/rout/s_out`` (stored bias NOT applied) and EXL3
``trellis/suh/svh[/bias]`` (or legacy packed sign bits ``su``/``sv``; bias applied).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

import torch

from ..errors import CheckpointError
from ..reference import LinearWeights
from ..trellis import HAD_BLOCK, TILE, codebook_id, is_half_rate, rate_from_words, rate_id
from .quant_config import LayerMeta

ESCHA_ROLES = ("escha_code", "escha_rin", "escha_s_in", "escha_rout", "escha_s_out", "escha_config")
ESCHA_DTYPES = {"escha_code": torch.int16, "escha_rin": torch.float16, "escha_s_in": torch.float32,
                "escha_rout": torch.float16, "escha_s_out": torch.float32, "escha_config": torch.int32}
EXL3_MARKERS = ("mcg", "mul1")
EXL3_ROLES = ("trellis", "suh", "svh", "su", "sv") + EXL3_MARKERS
ROW_PARALLEL = ("o_proj", "down_proj", "out_proj")   # tensor parallelism splits their input dim
ESCHA_FORMAT_VERSION = 1


class TensorIndex(Protocol):
    def has(self, name: str) -> bool: ...
    def dtype(self, name: str) -> torch.dtype: ...
    def shape(self, name: str) -> tuple[int, ...]: ...
    def get(self, name: str) -> torch.Tensor: ...


@dataclass(frozen=True)
class CodedLayer:
    """A validated coded projection: where its tensors are and what they mean (no data held)."""
    prefix: str
    kind: str                       # "escha" | "exl3"
    K: float
    codebook: str
    IC: int
    OC: int
    in_features: int
    out_features: int
    names: dict = field(default_factory=dict)   # role -> tensor name


def _fail(msg: str, name: str) -> CheckpointError:
    return CheckpointError(f"tensor {name!r}: {msg}", name)


def _expect_dtype(ix: TensorIndex, name: str, *dtypes: torch.dtype) -> None:
    if ix.dtype(name) not in dtypes:
        want = " or ".join(str(d).replace("torch.", "") for d in dtypes)
        raise _fail(f"dtype {str(ix.dtype(name)).replace('torch.', '')}, expected {want}", name)


def _expect_len(ix: TensorIndex, name: str, n: int, what: str) -> None:
    shape = ix.shape(name)
    if shape != (n,):
        raise _fail(f"shape {list(shape)}, expected [{n}] ({what})", name)


def _check_finite(t: torch.Tensor, name: str) -> None:
    bad = ~torch.isfinite(t.to(torch.float32))
    if bad.any():
        i = int(bad.nonzero()[0, 0])
        raise _fail(f"{int(bad.sum())} non-finite value(s), first at index {i} ({float(t[i])})", name)


def _check_code(ix: TensorIndex, name: str) -> tuple[float, int, int]:
    """dtype and shape of a code/trellis tensor -> (K, IC, OC)."""
    _expect_dtype(ix, name, torch.int16)
    shape = ix.shape(name)
    if len(shape) != 3:
        raise _fail(f"shape {list(shape)}, expected [IC/16, OC/16, W]", name)
    try:
        K = rate_from_words(shape[2])
    except ValueError as e:
        raise _fail(f"last dim W={shape[2]} is not a valid tile width: {e}", name) from None
    IC, OC = shape[0] * TILE, shape[1] * TILE
    for dim, v in (("IC", IC), ("OC", OC)):
        if v % HAD_BLOCK:
            raise _fail(f"{dim}={v} is not a multiple of {HAD_BLOCK} (pad the model's dims to 128)", name)
    return K, IC, OC


def _check_tp(prefix: str, IC: int, OC: int, tp_size: int, name: str) -> None:
    if tp_size <= 1:
        return
    leaf = prefix.rsplit(".", 1)[-1]
    dim, n = ("IC", IC) if leaf in ROW_PARALLEL else ("OC", OC)
    if n % tp_size or (n // tp_size) % HAD_BLOCK:
        raise _fail(f"{dim}={n} split over tensor-parallel size {tp_size} gives shards that are not "
                    f"multiples of {HAD_BLOCK}", name)


def _check_bias(ix: TensorIndex, prefix: str, OC: int) -> Optional[str]:
    """The layer's bias tensor name after checking dtype and length, or None when it has none."""
    bias = f"{prefix}.bias"
    if not ix.has(bias):
        return None
    _expect_dtype(ix, bias, torch.float16, torch.float32)
    _expect_len(ix, bias, OC, "OC")
    return bias


def check_escha_layer(ix: TensorIndex, prefix: str, meta: LayerMeta, tp_size: int = 1) -> CodedLayer:
    names = {r: f"{prefix}.{r}" for r in ESCHA_ROLES}
    missing = [n for n in names.values() if not ix.has(n)]
    if missing:
        raise CheckpointError(f"coded layer {prefix!r} (in layer_meta) is incomplete: missing "
                              f"{', '.join(repr(m) for m in missing)}", missing[0])
    for role, n in names.items():
        _expect_dtype(ix, n, ESCHA_DTYPES[role])
    code = names["escha_code"]
    K, IC, OC = _check_code(ix, code)
    if K != meta.K:
        raise _fail(f"W={ix.shape(code)[2]} words per tile means K={K}, but layer_meta says K={meta.K}", code)
    if meta.IC != IC or meta.OC != OC:
        raise _fail(f"holds a [{IC}, {OC}] weight but layer_meta says in_features={meta.in_features}, "
                    f"out_features={meta.out_features} (padded: [{meta.IC}, {meta.OC}])", code)
    _expect_len(ix, names["escha_rin"], IC, "IC = code.shape[0]*16")
    _expect_len(ix, names["escha_s_in"], IC, "IC = code.shape[0]*16")
    _expect_len(ix, names["escha_rout"], OC, "OC = code.shape[1]*16")
    _expect_len(ix, names["escha_s_out"], OC, "OC = code.shape[1]*16")
    _expect_len(ix, names["escha_config"], 4, "[format_version, round(2K), codebook_id, flags]")
    cfg = [int(v) for v in ix.get(names["escha_config"])]
    want = [ESCHA_FORMAT_VERSION, rate_id(meta.K), codebook_id(meta.codebook), 0]
    if cfg != want:
        raise _fail(f"escha_config {cfg} disagrees with layer_meta (K={meta.K}, codebook={meta.codebook}): "
                    f"expected {want}", names["escha_config"])
    for role in ("escha_rin", "escha_s_in", "escha_rout", "escha_s_out"):
        _check_finite(ix.get(names[role]), names[role])
    bias = _check_bias(ix, prefix, OC)
    if bias:
        names["stored_bias"] = bias
    _check_tp(prefix, IC, OC, tp_size, code)
    return CodedLayer(prefix, "escha", K, meta.codebook, IC, OC, meta.in_features, meta.out_features, names)


def check_exl3_layer(ix: TensorIndex, prefix: str, tp_size: int = 1) -> CodedLayer:
    code = f"{prefix}.trellis"
    K, IC, OC = _check_code(ix, code)
    names = {"trellis": code}
    present = [m for m in EXL3_MARKERS if ix.has(f"{prefix}.{m}")]
    if len(present) > 1:
        raise CheckpointError(f"coded layer {prefix!r}: both codebook markers 'mcg' and 'mul1' are present",
                              f"{prefix}.mul1")
    for m in present:
        _expect_dtype(ix, f"{prefix}.{m}", torch.int32)
    codebook = present[0] if present else "3inst"
    if is_half_rate(K) and codebook != "mul1":
        raise _fail(f"half-integer K={K} (W={ix.shape(code)[2]}) needs the mul1 codebook, found {codebook}", code)
    for side, n, legacy in (("in", IC, "su"), ("out", OC, "sv")):
        full, packed = f"{prefix}.{legacy}h", f"{prefix}.{legacy}"
        if ix.has(full):
            _expect_dtype(ix, full, torch.float16)
            _expect_len(ix, full, n, f"{'IC' if side == 'in' else 'OC'} = trellis dim * 16")
            _check_finite(ix.get(full), full)
            names[legacy + "h"] = full
        elif ix.has(packed):
            _expect_dtype(ix, packed, torch.int16)
            _expect_len(ix, packed, n // 16, "packed sign bits, 16 per word")
            names[legacy] = packed
        else:
            raise CheckpointError(f"coded layer {prefix!r} is incomplete: neither {full!r} nor {packed!r}", full)
    bias = _check_bias(ix, prefix, OC)
    if bias:
        names["bias"] = bias
    _check_tp(prefix, IC, OC, tp_size, code)
    return CodedLayer(prefix, "exl3", K, codebook, IC, OC, IC, OC, names)


def unpack_sign_bits(words: torch.Tensor) -> torch.Tensor:
    """Legacy su/sv: int16 [n/16] -> fp16 [n] of +-1; element 16*j + i is bit i of word j, set = -1."""
    w = words.to(torch.int32) & 0xFFFF
    bits = (w[:, None] >> torch.arange(16, dtype=torch.int32)) & 1
    return (1 - 2 * bits).reshape(-1).to(torch.float16)


def pack_sign_bits(signs: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`unpack_sign_bits` (negative -> bit set)."""
    bits = (signs.reshape(-1, 16) < 0).to(torch.int32)
    w = (bits << torch.arange(16, dtype=torch.int32)).sum(-1)
    return torch.where(w >= 32768, w - 65536, w).to(torch.int16)


def load_layer(ix: TensorIndex, layer: CodedLayer) -> LinearWeights:
    """Read a validated layer's tensors into a :class:`LinearWeights` (CPU)."""
    n = layer.names
    get: Callable[[str], torch.Tensor] = ix.get
    if layer.kind == "escha":
        return LinearWeights(get(n["escha_code"]), layer.K, layer.codebook, get(n["escha_rin"]),
                             get(n["escha_rout"]), get(n["escha_s_in"]), get(n["escha_s_out"]), None,
                             layer.in_features, layer.out_features)
    rin = get(n["suh"]) if "suh" in n else unpack_sign_bits(get(n["su"]))
    rout = get(n["svh"]) if "svh" in n else unpack_sign_bits(get(n["sv"]))
    bias: Optional[torch.Tensor] = get(n["bias"]) if "bias" in n else None
    return LinearWeights(get(n["trellis"]), layer.K, layer.codebook, rin, rout, None, None, bias,
                         layer.in_features, layer.out_features)


def layer_tensors(prefix: str, w: LinearWeights, kind: str, stored_bias: Optional[torch.Tensor] = None,
                  legacy_signs: bool = False) -> dict[str, torch.Tensor]:
    """The tensors one coded linear writes into a checkpoint of ``kind`` ('escha' or 'exl3')."""
    if kind == "escha":
        ones_in = torch.ones(w.IC, dtype=torch.float32)
        ones_out = torch.ones(w.OC, dtype=torch.float32)
        t = {f"{prefix}.escha_code": w.code, f"{prefix}.escha_rin": w.rin.to(torch.float16),
             f"{prefix}.escha_s_in": (w.s_in if w.s_in is not None else ones_in).to(torch.float32),
             f"{prefix}.escha_rout": w.rout.to(torch.float16),
             f"{prefix}.escha_s_out": (w.s_out if w.s_out is not None else ones_out).to(torch.float32),
             f"{prefix}.escha_config": torch.tensor([ESCHA_FORMAT_VERSION, rate_id(w.K), codebook_id(w.codebook), 0],
                                                    dtype=torch.int32)}
        if stored_bias is not None:
            t[f"{prefix}.bias"] = stored_bias
        return t
    if kind != "exl3":
        raise ValueError(f"checkpoint kind must be 'escha' or 'exl3', got {kind!r}")
    if w.s_in is not None or w.s_out is not None:
        raise ValueError(f"{prefix}: EXL3 has no s_in/s_out; fold them into suh/svh first")
    t = {f"{prefix}.trellis": w.code}
    if legacy_signs:
        t[f"{prefix}.su"] = pack_sign_bits(w.rin)
        t[f"{prefix}.sv"] = pack_sign_bits(w.rout)
    else:
        t[f"{prefix}.suh"] = w.rin.to(torch.float16)
        t[f"{prefix}.svh"] = w.rout.to(torch.float16)
    if w.codebook != "3inst":
        t[f"{prefix}.{w.codebook}"] = torch.tensor(0, dtype=torch.int32)
    if w.bias is not None:
        t[f"{prefix}.bias"] = w.bias
    return t

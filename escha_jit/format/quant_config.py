"""``quantization_config`` of config.json: which method, and for escha the per-layer ``layer_meta``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..errors import CheckpointError
from ..trellis import CODEBOOKS, HAD_BLOCK, RATES, is_half_rate

METHODS = ("escha", "exl3")


def round_up(n: int, m: int = HAD_BLOCK) -> int:
    return -(-int(n) // m) * m


@dataclass(frozen=True)
class LayerMeta:
    """One coded projection as ``layer_meta`` describes it. in/out_features are the logical dims;
    the stored tensors are padded up to multiples of 128."""
    K: float
    in_features: int
    out_features: int
    codebook: str

    @property
    def IC(self) -> int:
        return round_up(self.in_features)

    @property
    def OC(self) -> int:
        return round_up(self.out_features)

    def to_json(self) -> dict[str, Any]:
        k: Any = int(self.K) if self.K == int(self.K) else self.K
        return {"K": k, "in_features": self.in_features, "out_features": self.out_features, "codebook": self.codebook}


@dataclass(frozen=True)
class QuantConfig:
    method: str
    codebook: Optional[str] = None                       # escha: the default codebook
    layer_meta: Mapping[str, LayerMeta] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"quant_method": self.method}
        if self.method == "escha":
            d["codebook"] = self.codebook
            d["layer_meta"] = {k: v.to_json() for k, v in self.layer_meta.items()}
        return d


def _entry(prefix: str, e: Any, default_cb: Optional[str]) -> LayerMeta:
    where = f"quantization_config.layer_meta[{prefix!r}]"
    if not isinstance(e, dict):
        raise CheckpointError(f"{where} must be an object, got {type(e).__name__}", prefix)
    missing = [k for k in ("K", "in_features", "out_features") if k not in e]
    if missing:
        raise CheckpointError(f"{where} lacks {', '.join(missing)}", prefix)
    try:
        K = float(e["K"])
    except (TypeError, ValueError):
        raise CheckpointError(f"{where}: K={e['K']!r} is not a number", prefix) from None
    if K not in RATES:
        raise CheckpointError(f"{where}: K={e['K']!r} is not a valid bit rate {RATES}", prefix)
    cb = e.get("codebook", default_cb)
    if cb not in CODEBOOKS:
        raise CheckpointError(f"{where}: codebook {cb!r} is not one of {CODEBOOKS}", prefix)
    if is_half_rate(K) and cb != "mul1":
        raise CheckpointError(f"{where}: half-integer K={K} needs the mul1 codebook, not {cb!r}", prefix)
    dims = []
    for key in ("in_features", "out_features"):
        v = e[key]
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise CheckpointError(f"{where}: {key}={v!r} must be a positive integer", prefix)
        dims.append(v)
    return LayerMeta(K, dims[0], dims[1], cb)


def parse_quant_config(config: Mapping[str, Any]) -> QuantConfig:
    """Parse config.json's ``quantization_config``; raises CheckpointError naming the bad field."""
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        raise CheckpointError("config.json has no quantization_config object")
    method = qc.get("quant_method")
    if method not in METHODS:
        raise CheckpointError(f"quantization_config.quant_method={method!r}; escha_jit reads {METHODS}")
    if method == "exl3":
        return QuantConfig("exl3")
    cb = qc.get("codebook")
    if cb is not None and cb not in CODEBOOKS:
        raise CheckpointError(f"quantization_config.codebook={cb!r} is not one of {CODEBOOKS}")
    lm = qc.get("layer_meta")
    if not isinstance(lm, dict) or not lm:
        raise CheckpointError("quantization_config.layer_meta must be a non-empty object (quant_method escha)")
    return QuantConfig("escha", cb, {p: _entry(p, e, cb) for p, e in lm.items()})

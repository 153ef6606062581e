"""KernelSpec: every compile-time parameter of one kernel specialization (torch-free).

What is compile-time here changes the instruction stream: the op, K, codebook, dtypes, tile
configuration and target arch. Shapes (IC/OC) are run-time arguments of every kernel so far
(shape-generic kernels); a spec carries them only where an op specializes on them, and the
tuner keys its tables on shapes separately.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any, Mapping, Optional

from .trellis import check_rate, check_rate_codebook, rate_name

DTYPES = ("f16", "bf16", "f32")
NVIDIA_PREFIX = "sm_"
AMD_PREFIX = "gfx"


def vendor_of(arch: str) -> str:
    if arch.startswith(NVIDIA_PREFIX):
        return "nvidia"
    if arch.startswith(AMD_PREFIX):
        return "amd"
    raise ValueError(f"unknown target arch {arch!r}: expected sm_XX (NVIDIA) or gfxNNNN (AMD)")


def nvidia_sm(arch: str) -> int:
    """The compute capability of an NVIDIA arch as a number (90 for sm_90 and sm_90a); 0 for AMD.
    sm_90 and later have griddepcontrol (programmatic dependent launch, include/escha/platform_cuda.h)."""
    if vendor_of(arch) != "nvidia":
        return 0
    digits = re.match(r"\d+", arch[len(NVIDIA_PREFIX):])
    return int(digits.group()) if digits else 0


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """One specialization. ``tile`` holds op-specific tile parameters as sorted (name, value)
    pairs so the spec stays hashable; use :meth:`make` to build one from keyword arguments."""
    op: str                              # template name: "reconstruct", "hadamard", "fused", ...
    arch: str                            # "sm_90", "gfx1201"
    K: Optional[float] = None
    codebook: Optional[str] = None
    in_dtype: Optional[str] = None       # activation dtype
    out_dtype: Optional[str] = None
    IC: Optional[int] = None             # only when the op specializes on shape
    OC: Optional[int] = None
    tile: tuple = ()                     # ((name, value), ...), sorted by name

    def __post_init__(self):
        vendor_of(self.arch)
        if self.K is not None:
            object.__setattr__(self, "K", check_rate(self.K))
        if self.codebook is not None:
            if self.K is None:
                raise ValueError("a spec with a codebook needs K")
            check_rate_codebook(self.K, self.codebook)
        for name in ("in_dtype", "out_dtype"):
            v = getattr(self, name)
            if v is not None and v not in DTYPES:
                raise ValueError(f"{name}={v!r}: expected one of {DTYPES}")
        object.__setattr__(self, "tile", tuple(sorted(tuple(self.tile))))

    @classmethod
    def make(cls, op: str, arch: str, tile: Optional[Mapping[str, Any]] = None, **kw) -> "KernelSpec":
        return cls(op=op, arch=arch, tile=tuple(sorted((tile or {}).items())), **kw)

    @property
    def vendor(self) -> str:
        return vendor_of(self.arch)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.tile)

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in dataclasses.asdict(self).items() if v is not None and k != "tile"}
        d["tile"] = dict(self.tile)
        return d

    def key(self) -> str:
        """Stable identity of the spec (not of its binary: the cache key adds source and compiler)."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:24]

    def kernel_name(self) -> str:
        """A C identifier naming this specialization, readable in profiles and logs."""
        parts = ["escha", self.op]
        if self.K is not None:
            parts.append("k" + rate_name(self.K))
        if self.codebook:
            parts.append(self.codebook)
        if self.in_dtype:
            parts.append(self.in_dtype + (f"_{self.out_dtype}" if self.out_dtype and self.out_dtype != self.in_dtype else ""))
        elif self.out_dtype:
            parts.append(self.out_dtype)
        parts += [f"{k}{v}" for k, v in self.tile]
        if self.IC:
            parts.append(f"{self.IC}x{self.OC}")
        return "_".join(str(p) for p in parts).replace(".", "p").replace("-", "m")

    def __str__(self) -> str:
        return f"{self.kernel_name()}@{self.arch}"

"""``EschaLinear``: an nn.Module holding one coded projection.

Layouts: ``code`` int16 [IC/16, OC/16, W]; ``rin`` fp16 [IC]; ``rout`` fp16 [OC]; ``s_in`` fp32
[IC]; ``s_out`` fp32 [OC]; ``bias`` [OC] (EXL3 layers only; escha never applies its stored bias).
Input ``x``: [..., in_features] fp16 / bf16 / fp32; output [..., out_features], x's dtype.

``act_quant='int8'`` (opt-in, mul1 layers): decode-sized calls (<= 8 tokens) on the GPU quantize the
rotated activations to int8 per (token, 128-feature block) and run on the int8 units (~0.6 %
relative RMS error instead of <= 0.1 %); larger calls and the reference backend stay exact.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch
from torch import nn

from . import reference
from .reference import LinearWeights
from .kernels.fused import check_act_quant
from .trellis import check_rate_codebook

log = logging.getLogger(__name__)
BACKENDS = ("auto", "jit", "reference")


class EschaLinear(nn.Module):
    def __init__(self, weights: LinearWeights, backend: str = "auto", act_quant: Optional[str] = None):
        super().__init__()
        check_rate_codebook(weights.K, weights.codebook)
        check_act_quant(act_quant, weights.codebook)
        self.act_quant = act_quant
        self.K = float(weights.K)
        self.codebook = weights.codebook
        self.in_features = weights.logical_in
        self.out_features = weights.logical_out
        self.backend = backend
        self.register_buffer("code", weights.code)
        self.register_buffer("rin", weights.rin)
        self.register_buffer("rout", weights.rout)
        self.register_buffer("s_in", weights.s_in)
        self.register_buffer("s_out", weights.s_out)
        self.register_buffer("bias", weights.bias)
        # the decoded rotated-basis weight, kept for the reference backend once computed
        self.register_buffer("_what", None, persistent=False)
        self.register_buffer("_bias32", None, persistent=False)    # bias as the kernels take it

    @classmethod
    def from_checkpoint(cls, ckpt, prefix: str, backend: str = "auto",
                        act_quant: Optional[str] = None) -> "EschaLinear":
        """Build from an opened :class:`escha_jit.format.Checkpoint` and a coded layer prefix."""
        return cls(ckpt.layer(prefix), backend, act_quant)

    @property
    def weights(self) -> LinearWeights:
        return LinearWeights(self.code, self.K, self.codebook, self.rin, self.rout, self.s_in, self.s_out,
                             self.bias, self.in_features if self.in_features != self.code.shape[0] * 16 else None,
                             self.out_features if self.out_features != self.code.shape[1] * 16 else None)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, K={self.K:g}, "
                f"codebook={self.codebook}, bias={self.bias is not None}, backend={self.backend}"
                + (f", act_quant={self.act_quant}" if self.act_quant else ""))

    def resolved_backend(self, x: torch.Tensor) -> str:
        """The backend a call with ``x`` uses: 'jit' (generated kernels) on a GPU, 'reference'
        (torch math) on the CPU or when asked for."""
        if self.backend not in BACKENDS:
            raise ValueError(f"EschaLinear.backend={self.backend!r}; expected one of {BACKENDS}")
        if self.backend == "auto":
            return "jit" if x.device.type == "cuda" else "reference"
        if self.backend == "jit" and x.device.type != "cuda":
            raise ValueError("EschaLinear.backend='jit' needs a CUDA/ROCm device; x is on the CPU")
        return self.backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"EschaLinear: x has {x.shape[-1]} features (shape {tuple(x.shape)}), "
                             f"expected {self.in_features}")
        if x.device != self.code.device:
            raise ValueError(f"EschaLinear: x is on {x.device} but the layer's tensors are on {self.code.device}")
        if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError(f"EschaLinear: x must be fp16, bf16 or fp32, got {x.dtype}")
        if self.resolved_backend(x) == "jit":
            from .ops.linear import linear
            lead = x.shape[:-1]
            x2 = x.reshape(-1, x.shape[-1])
            if self._bias32 is None and self.bias is not None:
                self._bias32 = self.bias.to(torch.float32)
            y = linear(x2 if x2.stride(-1) == 1 else x2.contiguous(), self.weights, bias32=self._bias32,
                       act_quant=self.act_quant)
            return y.reshape(*lead, self.out_features)
        if self._what is None:
            self._what = reference.reconstruct(self.code, self.K, self.codebook)
        return reference.forward(x, self.weights, weight=self._what)

"""Trellis -> fp16 rotated-basis weight What on the GPU (see templates/reconstruct.hip.j2)."""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels.reconstruct import ARGS, WARPS, spec_for
from ..trellis import check_rate_codebook, tile_words
from .common import arch_of, check_tensor, kernel_for


def reconstruct(code: torch.Tensor, K: float, codebook: str, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """fp16 What [IC, OC] from ``code`` int16 [IC/16, OC/16, 16K] (contiguous, on the GPU).

    ``out`` may be a preallocated [IC, OC] fp16 view with unit column stride and a row stride
    that is a multiple of 8 elements (16-byte aligned rows), e.g. reused across calls.
    """
    check_rate_codebook(K, codebook)
    dev = code.device
    check_tensor("code", code, dtypes=(torch.int16,), device=dev, shape=(None, None, tile_words(K)))
    IC, OC = code.shape[0] * 16, code.shape[1] * 16
    if out is None:
        out = torch.empty(IC, OC, dtype=torch.float16, device=dev)
    else:
        check_tensor("out", out, dtypes=(torch.float16,), device=dev, shape=(IC, OC), contiguous=False)
        if out.stride(1) != 1 or out.stride(0) % 8 or out.data_ptr() % 16:
            raise ValueError(f"out needs unit column stride, a row stride that is a multiple of 8 and 16-byte "
                             f"alignment; got strides {out.stride()}")
    if IC == 0 or OC == 0:
        return out
    spec = spec_for(arch_of(dev), K, codebook)
    k = kernel_for(spec, dev, ARGS)
    grid = ((OC // 16 + WARPS - 1) // WARPS, IC // 16)
    k.launch(grid, (WARPS * 32,), (code, out, IC, OC, out.stride(0)))
    return out

"""128-block Hadamard with optional pre/post scales, on the GPU (see templates/hadamard.hip.j2)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from ..kernels.hadamard import ARGS, THREADS, render_extra, spec_for
from ..reference import HAD_SCALE_F32
from .common import DTYPE_NAMES, arch_of, check_tensor, kernel_for


def hadamard128(x: torch.Tensor, r_pre: Optional[torch.Tensor] = None, s_pre: Optional[torch.Tensor] = None,
                r_post: Optional[torch.Tensor] = None, s_post: Optional[torch.Tensor] = None,
                out_dtype: Optional[torch.dtype] = None, out: Optional[torch.Tensor] = None,
                out_scale: float = 1.0) -> torch.Tensor:
    """y = H128(x * s_pre * r_pre) * r_post * s_post over the last dim of a 2-D ``x`` [rows, n].

    ``x`` fp16/bf16/fp32 with unit stride in the last dim (rows may be strided); r_* fp16 [n],
    s_* fp32 [n]; ``out`` (optional) a [rows, n] view with unit last stride, e.g. a column slice.
    """
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [rows, n], got shape {list(x.shape)}")
    dev = x.device
    check_tensor("x", x, dtypes=tuple(DTYPE_NAMES), device=dev, contiguous=False)
    rows, n = x.shape
    if n % 128:
        raise ValueError(f"x's last dim {n} is not a multiple of 128")
    if x.stride(1) != 1:
        raise ValueError(f"x must have unit stride in its last dim, got strides {x.stride()}")
    for name, t, dt in (("r_pre", r_pre, torch.float16), ("s_pre", s_pre, torch.float32),
                        ("r_post", r_post, torch.float16), ("s_post", s_post, torch.float32)):
        check_tensor(name, t, dtypes=(dt,), device=dev, shape=(n,), optional=True)
    if out is None:
        out = torch.empty(rows, n, dtype=out_dtype or x.dtype, device=dev)
    else:
        check_tensor("out", out, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(rows, n), contiguous=False)
        if out.stride(1) != 1:
            raise ValueError(f"out must have unit stride in its last dim, got strides {out.stride()}")
    if rows == 0:
        return out
    spec = spec_for(arch_of(dev), DTYPE_NAMES[x.dtype], DTYPE_NAMES[out.dtype])
    k = kernel_for(spec, dev, ARGS, render_extra(spec))
    waves = rows * (n // 128)
    grid = (waves + THREADS // 32 - 1) // (THREADS // 32)
    scale = float(np.float32(HAD_SCALE_F32 * out_scale))
    k.launch((grid,), (THREADS,), (x, out, r_pre, s_pre, r_post, s_post, rows, n, x.stride(0), out.stride(0), scale))
    return out

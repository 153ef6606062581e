"""Trellis -> dense original-basis weight W on the GPU (see templates/dense.hip.j2)."""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels.dense import ARGS, BLOCK, THREADS, dynamic_smem, render_extra, spec_for
from ..reference import LinearWeights
from ..trellis import check_rate_codebook, tile_words
from .common import DTYPE_NAMES, arch_of, check_tensor, kernel_for
from .fused import sm_count

_RESIDENT: dict[tuple, int] = {}


def rows_ahead(k, spec, dev: torch.device, IC: int, OC: int) -> int:
    """The kernel's ``rows_ahead``: how many block rows (of OC / 128 blocks of W) below its own
    block each block fetches trellis words into L2 for. Blocks start in index order as others end
    and the GPU holds SMs x (blocks per SM) at once, so the block that many indices on starts about
    when this one ends. IC / 128 (nothing to fetch) where the kernel has no prefetch (AMD: no L2
    prefetch instruction; kernels.dense.l2_prefetch)."""
    if not spec.params.get("l2_prefetch"):
        return IC // BLOCK
    key = (spec, dev.index)
    if key not in _RESIDENT:
        _RESIDENT[key] = sm_count(dev) * max(1, k.max_active_blocks(THREADS, dynamic_smem(spec)))
    return max(1, round(_RESIDENT[key] / (OC // BLOCK)))


def dense_weight(w: LinearWeights, dtype: torch.dtype = torch.float16,
                 out: Optional[torch.Tensor] = None, amax: Optional[torch.Tensor] = None) -> torch.Tensor:
    """W = diag(s_in*rin) . Hb . What . Hb . diag(rout*s_out), [IC, OC] (row = input feature),
    computed in fp32 and rounded once to ``dtype`` (fp16 or bf16), so ``y = x @ W``.

    IC and OC must be multiples of 128 (the Hadamard block). ``out`` may be a preallocated
    [IC, OC] view of ``dtype`` with unit column stride, a row stride that is a multiple of 4
    elements and 8-byte alignment (e.g. a column slice of a wider buffer). ``amax`` (fp16 only), an
    optional int32 [1] tensor on the layer's device, is raised (atomic max, in stream order) to the
    fp32 bit pattern of max |W| of the fp16 W: pass zeros to read it back as
    ``amax.view(torch.float32)``.
    """
    check_rate_codebook(w.K, w.codebook)
    dev = w.code.device
    if dev.type != "cuda":
        raise ValueError(f"dense_weight needs the layer on a CUDA/ROCm device; its code is on {dev}")
    if dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"dtype must be float16 or bfloat16, got {str(dtype).replace('torch.', '')}")
    check_tensor("code", w.code, dtypes=(torch.int16,), device=dev, shape=(None, None, tile_words(w.K)))
    IC, OC = w.IC, w.OC
    if IC % BLOCK or OC % BLOCK:
        raise ValueError(f"code has shape {list(w.code.shape)}: IC={IC} and OC={OC} must be multiples of {BLOCK}")
    check_tensor("rin", w.rin, dtypes=(torch.float16,), device=dev, shape=(IC,))
    check_tensor("rout", w.rout, dtypes=(torch.float16,), device=dev, shape=(OC,))
    check_tensor("s_in", w.s_in, dtypes=(torch.float32,), device=dev, shape=(IC,), optional=True)
    check_tensor("s_out", w.s_out, dtypes=(torch.float32,), device=dev, shape=(OC,), optional=True)
    if out is None:
        out = torch.empty(IC, OC, dtype=dtype, device=dev)
    else:
        check_tensor("out", out, dtypes=(dtype,), device=dev, shape=(IC, OC), contiguous=False)
        if out.stride(1) != 1 or out.stride(0) % 4 or out.data_ptr() % 8:
            raise ValueError(f"out needs unit column stride, a row stride that is a multiple of 4 and 8-byte "
                             f"alignment; got strides {out.stride()}")
    check_tensor("amax", amax, dtypes=(torch.int32,), device=dev, shape=(1,), optional=True)
    if amax is not None and dtype != torch.float16:
        raise TypeError("amax reports max |W| of an fp16 weight: dtype must be float16")
    if IC == 0 or OC == 0:
        return out
    spec = spec_for(arch_of(dev), w.K, w.codebook, DTYPE_NAMES[dtype], amax=amax is not None)
    k = kernel_for(spec, dev, ARGS, render_extra(spec))
    k.launch((OC // BLOCK, IC // BLOCK), (THREADS,),
             (w.code, w.rin, w.s_in, w.rout, w.s_out, out, IC, OC, out.stride(0), amax,
              rows_ahead(k, spec, dev, IC, OC)), smem=dynamic_smem(spec))
    return out

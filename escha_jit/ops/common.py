"""What every op shares: spec -> loaded kernel (once per device), and input checks."""
from __future__ import annotations

import threading
from typing import Any, Mapping, Optional, Sequence

import torch

from ..errors import EschaError
from ..jit import compile_spec
from ..runtime import Kernel, device_arch, runtime_for
from ..spec import KernelSpec
from ..trellis import check_rate_codebook, tile_words

DTYPE_NAMES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}

_loaded: dict[tuple[KernelSpec, int], Kernel] = {}
_lock = threading.Lock()


class NotWarmedUp(EschaError, RuntimeError):
    """A kernel was needed for the first time inside CUDA-graph capture."""


def arch_of(device: torch.device) -> str:
    return _arch_cached(device.index if device.index is not None else torch.cuda.current_device())


_ARCH: dict[int, str] = {}


def _arch_cached(idx: int) -> str:
    a = _ARCH.get(idx)
    if a is None:
        a = _ARCH[idx] = device_arch(torch.device("cuda", idx))
    return a


def kernel_for(spec: KernelSpec, device: torch.device, arg_kinds: Sequence[str],
               extra: Optional[Mapping[str, Any]] = None) -> Kernel:
    """The loaded kernel of ``spec`` on ``device``: one dict lookup once warm; compiles (or loads
    from the disk cache) on first use, never inside CUDA-graph capture."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    k = _loaded.get((spec, idx))
    if k is not None:
        return k
    if torch.cuda.is_current_stream_capturing():
        raise NotWarmedUp(f"kernel {spec} is first needed inside CUDA-graph capture; run the layer once "
                          f"(or escha_jit.warmup) before capturing")
    with _lock:
        k = _loaded.get((spec, idx))
        if k is None:
            entry = compile_spec(spec, extra)
            mod = runtime_for(device).load(torch.device("cuda", idx), entry.key, entry.code.binary)
            k = _loaded[(spec, idx)] = mod.function(spec.kernel_name(), arg_kinds)
    return k


def check_tensor(name: str, t: Optional[torch.Tensor], *, dtypes: Sequence[torch.dtype], device: torch.device,
                 shape: Optional[Sequence[Optional[int]]] = None, contiguous: bool = True,
                 optional: bool = False) -> None:
    """Raise a clear error naming ``name`` when ``t`` has the wrong dtype, device, shape or layout."""
    if t is None:
        if optional:
            return
        raise ValueError(f"{name} is required")
    if t.dtype not in dtypes:
        raise TypeError(f"{name} must be {' or '.join(str(d).replace('torch.', '') for d in dtypes)}, "
                        f"got {str(t.dtype).replace('torch.', '')}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}, expected {device}")
    if shape is not None and (t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape))):
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} has shape {list(t.shape)}, expected {want}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (got strides {t.stride()}); call .contiguous() first")


def check_call(x: torch.Tensor, w, out: Optional[torch.Tensor], bias32: Optional[torch.Tensor],
               out_dtype: Optional[torch.dtype] = None) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The checks every linear entry point makes on one call of layer ``w`` (a LinearWeights on a
    GPU): x is 2-D [M, in_features], fp16 / bf16 / fp32 with unit last stride; the layer's tensors
    have their dtypes and shapes; ``bias32`` (default: the layer's bias in fp32) is fp32 [OC];
    ``out`` (allocated as [M, out_features] of ``out_dtype`` or x's dtype when None) is a
    [M, out_features] view with unit last stride. Returns (out, bias32)."""
    check_rate_codebook(w.K, w.codebook)
    dev = w.code.device
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, in_features], got shape {list(x.shape)}")
    check_tensor("x", x, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(None, w.logical_in), contiguous=False)
    if x.stride(1) != 1:
        raise ValueError(f"x must have unit stride in its last dim, got strides {x.stride()}")
    check_tensor("code", w.code, dtypes=(torch.int16,), device=dev, shape=(None, None, tile_words(w.K)))
    check_tensor("rin", w.rin, dtypes=(torch.float16,), device=dev, shape=(w.IC,))
    check_tensor("rout", w.rout, dtypes=(torch.float16,), device=dev, shape=(w.OC,))
    check_tensor("s_in", w.s_in, dtypes=(torch.float32,), device=dev, shape=(w.IC,), optional=True)
    check_tensor("s_out", w.s_out, dtypes=(torch.float32,), device=dev, shape=(w.OC,), optional=True)
    if bias32 is None and w.bias is not None:
        bias32 = w.bias.to(torch.float32)
    check_tensor("bias", bias32, dtypes=(torch.float32,), device=dev, shape=(w.OC,), optional=True)
    M = x.shape[0]
    if out is None:
        out = torch.empty(M, w.logical_out, dtype=out_dtype or x.dtype, device=dev)
    else:
        check_tensor("out", out, dtypes=tuple(DTYPE_NAMES), device=dev, shape=(M, w.logical_out), contiguous=False)
        if out.stride(1) != 1:
            raise ValueError(f"out must have unit stride in its last dim, got strides {out.stride()}")
    return out, bias32

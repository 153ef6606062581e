"""What every op shares: spec -> loaded kernel (once per device), and input checks."""
from __future__ import annotations

import threading
from typing import Any, Mapping, Optional, Sequence

import torch

from ..errors import EschaError
from ..jit import compile_spec
from ..runtime import Kernel, device_arch, runtime_for
from ..spec import KernelSpec

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

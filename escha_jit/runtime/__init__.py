"""Load code objects on a GPU and launch their kernels on torch's current stream.

One runtime per vendor with the same small surface (tinygrad-style): ``load(binary) -> module``,
``module.function(name) -> Kernel``, ``Kernel.launch(grid, block, args, smem)``. Modules are
loaded once per (device, cache key) and kept for the life of the process.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Sequence

import torch

# "tmap": an NVIDIA tensor map (CudaRuntime.tensor_map_2d), passed by value: cuda-bindings copies
# the 128 bytes behind the object's getPtr() when its ctype is None
ARG_TYPES = {"ptr": ctypes.c_void_p, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
             "f32": ctypes.c_float, "tmap": None}


def arg_value(kind: str, v: Any) -> Any:
    """A launch argument as the runtime wants it: tensors and None become device pointers."""
    if kind == "ptr":
        if v is None:
            return 0
        if isinstance(v, torch.Tensor):
            return v.data_ptr()
        return int(v)
    return v


_runtimes: dict[str, Any] = {}
_lock = threading.Lock()


def runtime_for(device: torch.device):
    """The CUDA or HIP runtime for a torch device (by how torch was built)."""
    if device.type != "cuda":
        raise ValueError(f"GPU kernels need a CUDA/ROCm device, got {device}")
    name = "hip" if torch.version.hip else "cuda"
    with _lock:
        if name not in _runtimes:
            if name == "hip":
                from .hip import HipRuntime
                _runtimes[name] = HipRuntime()
            else:
                from .cuda import CudaRuntime
                _runtimes[name] = CudaRuntime()
        return _runtimes[name]


def device_arch(device: torch.device) -> str:
    """'sm_90' / 'gfx1201' for a torch device."""
    p = torch.cuda.get_device_properties(device)
    if torch.version.hip:
        return p.gcnArchName.split(":")[0]
    return f"sm_{p.major}{p.minor}"


def check(res, what: str):
    """Vendor bindings return (status, *values): raise on a non-zero status, else the value(s)."""
    status, *vals = res if isinstance(res, tuple) else (res,)
    if int(getattr(status, "value", status)) != 0:
        raise RuntimeError(f"{what} failed: {status!r}")
    return vals[0] if len(vals) == 1 else (vals or None)


class Module:
    """A loaded code object; kernel functions looked up once by name."""

    def __init__(self, runtime, handle):
        self.runtime, self.handle = runtime, handle
        self._functions: dict[str, Any] = {}

    def function(self, name: str, arg_kinds: Sequence[str]) -> "Kernel":
        if name not in self._functions:
            self._functions[name] = self.runtime.get_function(self.handle, name)
        return Kernel(self.runtime, self._functions[name], name, arg_kinds)


class VendorRuntime:
    """What both vendor runtimes share: one module per (device, cache key), loaded under a lock.
    Subclasses provide load_binary, get_function, set_max_dynamic_smem and launch (NVIDIA also
    launch_ex)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._modules: dict[tuple[int, str], Module] = {}

    def load(self, device: torch.device, key: str, binary: bytes) -> Module:
        idx = device.index if device.index is not None else torch.cuda.current_device()
        with self._lock:
            mod = self._modules.get((idx, key))
            if mod is None:
                with torch.cuda.device(idx):
                    handle = self.load_binary(idx, binary)
                mod = self._modules[(idx, key)] = Module(self, handle)
            return mod

    def launch_ex(self, fn, grid, block, smem, stream, vals, types, name, pdl: bool, cluster: int) -> None:
        raise NotImplementedError(f"{name}: programmatic dependent launch and thread block clusters are "
                                  f"NVIDIA sm_90 features")

    def max_active_clusters(self, fn, block, smem: int, cluster: int, name: str) -> int:
        raise NotImplementedError(f"{name}: thread block clusters are an NVIDIA sm_90 feature")


def _dim3(v: Sequence[int]) -> tuple:
    """A grid or block size of 1-3 dimensions as the 3-tuple the drivers take."""
    return tuple(v) + (1,) * (3 - len(v))


class Kernel:
    """A loaded kernel function with its argument kinds (a list of ARG_TYPES keys)."""

    def __init__(self, runtime, handle, name: str, arg_kinds: Sequence[str]):
        self.runtime, self.handle, self.name = runtime, handle, name
        self.arg_kinds = tuple(arg_kinds)
        self._ctypes = tuple(ARG_TYPES[k] for k in self.arg_kinds)
        self._max_smem = 0

    def launch(self, grid: Sequence[int], block: Sequence[int], args: Sequence[Any], smem: int = 0,
               stream: int | None = None, pdl: bool = False, cluster: int = 1) -> None:
        """Launch on ``stream`` (default: torch's current stream). ``pdl``: as a programmatic
        dependent launch (NVIDIA sm_90; the kernel must call grid_dependency_wait, platform_cuda.h).
        ``cluster`` > 1: as thread block clusters of that many blocks along grid x (NVIDIA sm_90;
        grid x a multiple of it)."""
        if len(args) != len(self.arg_kinds):
            raise TypeError(f"{self.name} takes {len(self.arg_kinds)} arguments, got {len(args)}")
        self._allow_smem(smem)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        vals = tuple(arg_value(k, a) for k, a in zip(self.arg_kinds, args))
        g, b = _dim3(grid), _dim3(block)
        if pdl or cluster > 1:
            self.runtime.launch_ex(self.handle, g, b, smem, stream, vals, self._ctypes, self.name, pdl, cluster)
        else:
            self.runtime.launch(self.handle, g, b, smem, stream, vals, self._ctypes, self.name)

    def max_active_blocks(self, threads: int, smem: int) -> int:
        """How many blocks of ``threads`` threads with ``smem`` bytes of dynamic shared memory each one
        SM / CU holds at once (the driver's count: registers, shared memory, warps)."""
        self._allow_smem(smem)
        return self.runtime.max_active_blocks(self.handle, threads, smem, self.name)

    def max_active_clusters(self, block: Sequence[int], smem: int, cluster: int) -> int:
        """How many thread block clusters of ``cluster`` blocks (``block`` threads, ``smem`` bytes of
        dynamic shared memory each) the GPU can hold at once (NVIDIA sm_90; the driver's count)."""
        self._allow_smem(smem)
        return self.runtime.max_active_clusters(self.handle, _dim3(block), smem, cluster, self.name)

    def _allow_smem(self, smem: int) -> None:
        if smem > 48 * 1024 and smem > self._max_smem:
            self.runtime.set_max_dynamic_smem(self.handle, smem)   # once per size increase
            self._max_smem = smem

"""CUDA driver runtime through cuda.bindings: load cubins into torch's context, launch kernels."""
from __future__ import annotations

import threading
from typing import Any, Sequence

import torch

from ..errors import ToolchainUnavailable


def _ok(res, what: str):
    status, *vals = res if isinstance(res, tuple) else (res,)
    if int(status) != 0:
        raise RuntimeError(f"CUDA driver {what} failed: {status!r}")
    return vals[0] if len(vals) == 1 else (vals or None)


class CudaModule:
    def __init__(self, runtime: "CudaRuntime", handle):
        self.runtime, self.handle = runtime, handle
        self._functions: dict[str, Any] = {}

    def function(self, name: str, arg_kinds: Sequence[str]):
        from . import Kernel
        if name not in self._functions:
            self._functions[name] = _ok(self.runtime.drv.cuModuleGetFunction(self.handle, name.encode()),
                                        f"cuModuleGetFunction({name})")
        return Kernel(self.runtime, self._functions[name], name, arg_kinds)


class CudaRuntime:
    def __init__(self):
        try:
            from cuda.bindings import driver
        except Exception as e:  # noqa: BLE001
            raise ToolchainUnavailable(f"cuda-bindings is not importable ({e}); pip install 'escha_jit[cuda]'") from e
        self.drv = driver
        self._lock = threading.Lock()
        self._modules: dict[tuple[int, str], CudaModule] = {}

    def _make_current(self, device: torch.device) -> None:
        """Make torch's primary context of ``device`` current on this thread."""
        idx = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.init()
        ctx = _ok(self.drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        dev = _ok(self.drv.cuDeviceGet(idx), "cuDeviceGet")
        if int(ctx) != 0 and int(_ok(self.drv.cuCtxGetDevice(), "cuCtxGetDevice")) == idx:
            return
        primary = _ok(self.drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _ok(self.drv.cuCtxSetCurrent(primary), "cuCtxSetCurrent")

    def load(self, device: torch.device, key: str, binary: bytes) -> CudaModule:
        idx = device.index if device.index is not None else torch.cuda.current_device()
        with self._lock:
            mod = self._modules.get((idx, key))
            if mod is None:
                with torch.cuda.device(idx):
                    self._make_current(torch.device("cuda", idx))
                    handle = _ok(self.drv.cuModuleLoadData(binary), "cuModuleLoadData")
                mod = self._modules[(idx, key)] = CudaModule(self, handle)
            return mod

    def set_max_dynamic_smem(self, fn, nbytes: int) -> None:
        attr = self.drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _ok(self.drv.cuFuncSetAttribute(fn, attr, nbytes), "cuFuncSetAttribute(max dynamic smem)")

    def function_attributes(self, fn) -> dict[str, int]:
        A = self.drv.CUfunction_attribute
        return {name: int(_ok(self.drv.cuFuncGetAttribute(a, fn), name)) for name, a in (
            ("registers", A.CU_FUNC_ATTRIBUTE_NUM_REGS), ("local_bytes", A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            ("shared_bytes", A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            ("max_threads", A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK))}

    def launch(self, fn, grid, block, smem, stream, vals, types, name) -> None:
        res = self.drv.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream,
                                      (vals, types), 0)
        status = res[0] if isinstance(res, tuple) else res
        if int(status) != 0:
            raise RuntimeError(f"launching {name} (grid {grid}, block {block}, smem {smem}) failed: {status!r}")

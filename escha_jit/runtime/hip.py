"""HIP runtime through hip-python: load hsaco code objects, launch on torch's current stream."""
from __future__ import annotations

import threading
from typing import Any, Sequence

import torch

from ..errors import ToolchainUnavailable


def _ok(res, what: str):
    status, *vals = res if isinstance(res, tuple) else (res,)
    if int(getattr(status, "value", status)) != 0:
        raise RuntimeError(f"HIP {what} failed: {status!r}")
    return vals[0] if len(vals) == 1 else (vals or None)


class HipModule:
    def __init__(self, runtime: "HipRuntime", handle):
        self.runtime, self.handle = runtime, handle
        self._functions: dict[str, Any] = {}

    def function(self, name: str, arg_kinds: Sequence[str]):
        from . import Kernel
        if name not in self._functions:
            self._functions[name] = _ok(self.runtime.hip.hipModuleGetFunction(self.handle, name.encode()),
                                        f"hipModuleGetFunction({name})")
        return Kernel(self.runtime, self._functions[name], name, arg_kinds)


class HipRuntime:
    def __init__(self):
        try:
            from hip import hip
        except Exception as e:  # noqa: BLE001
            raise ToolchainUnavailable(f"hip-python is not importable ({e}); pip install 'escha_jit[rocm]'") from e
        self.hip = hip
        self._lock = threading.Lock()
        self._modules: dict[tuple[int, str], HipModule] = {}

    def load(self, device: torch.device, key: str, binary: bytes) -> HipModule:
        idx = device.index if device.index is not None else torch.cuda.current_device()
        with self._lock:
            mod = self._modules.get((idx, key))
            if mod is None:
                with torch.cuda.device(idx):
                    torch.cuda.init()
                    _ok(self.hip.hipSetDevice(idx), "hipSetDevice")
                    handle = _ok(self.hip.hipModuleLoadData(binary), "hipModuleLoadData")
                mod = self._modules[(idx, key)] = HipModule(self, handle)
            return mod

    def set_max_dynamic_smem(self, fn, nbytes: int) -> None:
        attr = self.hip.hipFunction_attribute.HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _ok(self.hip.hipFuncSetAttribute(fn, attr, nbytes), "hipFuncSetAttribute(max dynamic smem)")

    def launch(self, fn, grid, block, smem, stream, vals, types, name) -> None:
        # hip-python's `extra` takes ctypes scalars packed with natural alignment
        extra = tuple(t(v) for v, t in zip(vals, types))
        res = self.hip.hipModuleLaunchKernel(fn, *grid, *block, smem, stream, None, extra)
        status = res[0] if isinstance(res, tuple) else res
        if int(getattr(status, "value", status)) != 0:
            raise RuntimeError(f"launching {name} (grid {grid}, block {block}, smem {smem}) failed: {status!r}")

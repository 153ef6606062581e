"""HIP runtime through hip-python: load hsaco code objects, launch on torch's current stream."""
from __future__ import annotations

import torch

from ..errors import ToolchainUnavailable
from . import VendorRuntime, check


class HipRuntime(VendorRuntime):
    def __init__(self):
        try:
            from hip import hip
        except Exception as e:  # noqa: BLE001
            raise ToolchainUnavailable(f"hip-python is not importable ({e}); pip install 'escha_jit[rocm]'") from e
        super().__init__()
        self.hip = hip

    def load_binary(self, idx: int, binary: bytes):
        torch.cuda.init()
        check(self.hip.hipSetDevice(idx), "hipSetDevice")
        return check(self.hip.hipModuleLoadData(binary), "hipModuleLoadData")

    def get_function(self, handle, name: str):
        return check(self.hip.hipModuleGetFunction(handle, name.encode()), f"hipModuleGetFunction({name})")

    def set_max_dynamic_smem(self, fn, nbytes: int) -> None:
        attr = self.hip.hipFunction_attribute.HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(self.hip.hipFuncSetAttribute(fn, attr, nbytes), "hipFuncSetAttribute(max dynamic smem)")

    def max_active_blocks(self, fn, threads: int, smem: int, name: str) -> int:
        """hipModuleOccupancyMaxActiveBlocksPerMultiprocessor: blocks of ``fn`` one CU holds at once."""
        return int(check(self.hip.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, smem),
                         f"hipModuleOccupancyMaxActiveBlocksPerMultiprocessor({name})"))

    def launch(self, fn, grid, block, smem, stream, vals, types, name) -> None:
        # hip-python's `extra` takes ctypes scalars packed with natural alignment
        extra = tuple(t(v) for v, t in zip(vals, types))
        check(self.hip.hipModuleLaunchKernel(fn, *grid, *block, smem, stream, None, extra),
              f"launching {name} (grid {grid}, block {block}, smem {smem})")

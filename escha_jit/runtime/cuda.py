"""CUDA driver runtime through cuda.bindings: load cubins into torch's context, launch kernels."""
from __future__ import annotations

import torch

from ..errors import ToolchainUnavailable
from . import VendorRuntime, check


class CudaRuntime(VendorRuntime):
    def __init__(self):
        try:
            from cuda.bindings import driver
        except Exception as e:  # noqa: BLE001
            raise ToolchainUnavailable(f"cuda-bindings is not importable ({e}); pip install 'escha_jit[cuda]'") from e
        super().__init__()
        self.drv = driver
        # the programmatic-serialization attribute of launch_ex, built once: building it per launch
        # cost ~2 us of Python per call (a 10 us decode call launches one or two kernels)
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        self._pdl_attr = attr
        self._attrs: dict[tuple[bool, int], list] = {}       # (pdl, cluster) -> launch attributes

    def tensor_map_2d(self, ptr: int, rows: int, cols: int, box_rows: int, box_cols: int):
        """A TMA descriptor of the row-major fp16 matrix [rows][cols] at device address ``ptr``
        (16-byte aligned, cols * 2 a multiple of 16), copied in boxes [box_rows][box_cols] with the
        128-byte swizzle (box_cols * 2 <= 128): the K-major layout wgmma reads (wgmma.h)."""
        d = self.drv
        if box_cols * 2 > 128 or (cols * 2) % 16 or ptr % 16:
            raise ValueError(f"tensor map [{rows}][{cols}] fp16 at {ptr:#x}, box [{box_rows}][{box_cols}]: needs a "
                             f"16-byte aligned base and row pitch and a box row of at most 128 bytes")
        return check(d.cuTensorMapEncodeTiled(
            d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, ptr,
            [d.cuuint64_t(cols), d.cuuint64_t(rows)], [d.cuuint64_t(cols * 2)],
            [d.cuuint32_t(box_cols), d.cuuint32_t(box_rows)], [d.cuuint32_t(1), d.cuuint32_t(1)],
            d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            f"cuTensorMapEncodeTiled([{rows}][{cols}] fp16, box [{box_rows}][{box_cols}])")

    def _make_current(self, idx: int) -> None:
        """Make torch's primary context of device ``idx`` current on this thread."""
        torch.cuda.init()
        ctx = check(self.drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
        dev = check(self.drv.cuDeviceGet(idx), "cuDeviceGet")
        if int(ctx) != 0 and int(check(self.drv.cuCtxGetDevice(), "cuCtxGetDevice")) == idx:
            return
        primary = check(self.drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(self.drv.cuCtxSetCurrent(primary), "cuCtxSetCurrent")

    def load_binary(self, idx: int, binary: bytes):
        self._make_current(idx)
        return check(self.drv.cuModuleLoadData(binary), "cuModuleLoadData")

    def get_function(self, handle, name: str):
        return check(self.drv.cuModuleGetFunction(handle, name.encode()), f"cuModuleGetFunction({name})")

    def set_max_dynamic_smem(self, fn, nbytes: int) -> None:
        attr = self.drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(self.drv.cuFuncSetAttribute(fn, attr, nbytes), "cuFuncSetAttribute(max dynamic smem)")

    def function_attributes(self, fn) -> dict[str, int]:
        A = self.drv.CUfunction_attribute
        return {name: int(check(self.drv.cuFuncGetAttribute(a, fn), name)) for name, a in (
            ("registers", A.CU_FUNC_ATTRIBUTE_NUM_REGS), ("local_bytes", A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            ("shared_bytes", A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            ("max_threads", A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK))}

    def launch(self, fn, grid, block, smem, stream, vals, types, name) -> None:
        check(self.drv.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream,
                                      (vals, types), 0),
              f"launching {name} (grid {grid}, block {block}, smem {smem})")

    def _launch_attrs(self, pdl: bool, cluster: int) -> list:
        attrs = self._attrs.get((pdl, cluster))
        if attrs is None:
            attrs = [self._pdl_attr] if pdl else []
            if cluster > 1:
                a = self.drv.CUlaunchAttribute()
                a.id = self.drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster, 1, 1
                attrs.append(a)
            self._attrs[(pdl, cluster)] = attrs
        return attrs

    def _launch_config(self, grid, block, smem: int, stream, pdl: bool, cluster: int):
        """The CUlaunchConfig of cuLaunchKernelEx / cuOccupancyMaxActiveClusters (grid, block: 3-tuples)."""
        cfg = self.drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = smem
        cfg.hStream = stream
        cfg.attrs = self._launch_attrs(pdl, cluster)
        cfg.numAttrs = len(cfg.attrs)
        return cfg

    def max_active_clusters(self, fn, block, smem: int, cluster: int, name: str) -> int:
        """cuOccupancyMaxActiveClusters: how many clusters of ``cluster`` blocks of ``fn`` (``block``
        threads, ``smem`` bytes of dynamic shared memory each) the GPU holds at once. Clusters must
        sit in one GPC, so this is below SMs / blocks-per-SM / cluster where GPCs' SM counts are
        not multiples of it (H200, 16-wave fused blocks: 30 clusters of 4 on 132 SMs)."""
        cfg = self._launch_config((cluster, 1, 1), block, smem, 0, False, cluster)
        return int(check(self.drv.cuOccupancyMaxActiveClusters(fn, cfg),
                         f"cuOccupancyMaxActiveClusters({name}, block {block}, smem {smem}, clusters of {cluster})"))

    def max_active_blocks(self, fn, threads: int, smem: int, name: str) -> int:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor: how many blocks of ``fn`` (``threads`` threads,
        ``smem`` bytes of dynamic shared memory each) one SM holds at once."""
        return int(check(self.drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, smem),
                         f"cuOccupancyMaxActiveBlocksPerMultiprocessor({name}, {threads} threads, smem {smem})"))

    def launch_ex(self, fn, grid, block, smem, stream, vals, types, name, pdl: bool, cluster: int) -> None:
        """cuLaunchKernelEx. ``pdl``: with programmatic stream serialization (the kernel may begin
        before the previous kernel of the stream has finished; it waits in-kernel with
        griddepcontrol.wait). ``cluster`` > 1: thread block clusters of that many blocks along x."""
        if cluster > 1 and grid[0] % cluster:
            raise ValueError(f"launching {name}: grid x {grid[0]} is not a multiple of the cluster size {cluster}")
        cfg = self._launch_config(grid, block, smem, stream, pdl, cluster)
        what = ", ".join(w for w, on in (("programmatic dependent", pdl), (f"clusters of {cluster}", cluster > 1)) if on)
        check(self.drv.cuLaunchKernelEx(cfg, fn, (vals, types), 0),
              f"launching {name} (grid {grid}, block {block}, smem {smem}, {what})")

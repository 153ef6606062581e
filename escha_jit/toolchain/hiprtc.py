"""hipRTC through hip-python: what users' processes compile with on ROCm (torch-free).

hip-python is bindings only: ``from hip import hiprtc`` imports anywhere and the first call
dlopens ``libhiprtc.so`` (RuntimeError when absent). Every call returns ``(status, *outputs)``
and never raises on a hipRTC error, so each status is checked here. A program handle that is
None segfaults hipRTC 6.4 when passed back in, so handles are checked before every use.
``hiprtcVersion`` reports a fixed NVRTC-compatible 9.0 on ROCm 6.4, so the real ROCm version
comes from ``hipRuntimeGetVersion`` (works without a GPU) when libamdhip64 loads.
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from typing import Any, Optional, Sequence

from .. import env
from ..errors import CompileError, ToolchainUnavailable
from . import amd_elf
from .base import CodeObject, Toolchain
from .clang_amd import FINGERPRINT_ARCH, FINGERPRINT_SOURCE, GFX_ARCH, first_error_line

log = logging.getLogger(__name__)
_FINGERPRINT: Optional[str] = None   # per process: one libhiprtc per process


def _hiprtc() -> Any:
    from hip import hiprtc  # noqa: PLC0415 - optional dependency, imported on use
    return hiprtc


def _ok(status: Any) -> bool:
    return int(status) == 0   # HIPRTC_SUCCESS / hipSuccess


def _name(status: Any) -> str:
    return str(getattr(status, "name", status))


def rocm_include_dir() -> Optional[str]:
    """``<rocm>/include`` holding ``hip/hip_fp16.h`` (ROCM_PATH, /opt/rocm, /usr), or None."""
    for root in env.rocm_roots():
        if root and os.path.isfile(os.path.join(root, "include", "hip", "hip_fp16.h")):
            return os.path.join(root, "include")
    return None


class HipRTCToolchain(Toolchain):
    name = "hiprtc"
    vendor = "amd"

    def available(self) -> bool:
        try:
            status, _major, _minor = _hiprtc().hiprtcVersion()
            return _ok(status)
        except Exception:  # noqa: BLE001 - missing hip-python or libhiprtc: just "no"
            return False

    def _require(self) -> Any:
        try:
            hiprtc = _hiprtc()
            status, _, _ = hiprtc.hiprtcVersion()
        except Exception as e:  # noqa: BLE001
            raise ToolchainUnavailable(f"hipRTC unavailable ({type(e).__name__}: {e}); "
                                       "pip install 'escha_jit[rocm]' and install ROCm's libhiprtc") from e
        if not _ok(status):
            raise ToolchainUnavailable(f"hiprtcVersion failed: {_name(status)}")
        return hiprtc

    def version(self) -> str:
        hiprtc = self._require()
        _, major, minor = hiprtc.hiprtcVersion()
        text = f"hipRTC (hiprtcVersion {major}.{minor})"
        try:
            from hip import hip  # noqa: PLC0415
            status, v = hip.hipRuntimeGetVersion()
            if _ok(status):   # HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch
                text = f"hipRTC {v // 10_000_000}.{v // 100_000 % 100}.{v % 100_000} (hiprtcVersion {major}.{minor})"
        except Exception:  # noqa: BLE001 - libamdhip64 missing: the hipRTC version is all we have
            pass
        return text

    def fingerprint(self) -> str:
        global _FINGERPRINT
        if _FINGERPRINT is None:
            binary, _, _ = self._build(FINGERPRINT_SOURCE, FINGERPRINT_ARCH, (), "fingerprint.hip", ())
            _FINGERPRINT = f"{self.name}|{self.version()}|obj={hashlib.sha256(binary).hexdigest()[:16]}"
        return _FINGERPRINT

    def options(self, arch: str, options: Sequence[str] = (), include_dirs: Sequence[str] = ()) -> list[str]:
        """hipRTC options: explicit arch (no GPU to default to), C++17 (hipRTC defaults to 14), -O3,
        the caller's include dirs, then ROCm's include dir for hip_fp16.h."""
        rocm_inc = rocm_include_dir()
        return [f"--offload-arch={arch}", "-std=c++17", "-O3", *[f"-I{d}" for d in include_dirs],
                *([f"-I{rocm_inc}"] if rocm_inc else []), *options]

    def _build(self, source: str, arch: str, options: Sequence[str], name: str,
               include_dirs: Sequence[str]) -> tuple[bytes, str, float]:
        if not GFX_ARCH.match(arch):
            raise ValueError(f"hipRTC compiles for AMD gfx targets, not {arch!r}")
        hiprtc = self._require()
        opts = [o.encode() for o in self.options(arch, options, include_dirs)]
        t0 = time.perf_counter()
        status, prog = hiprtc.hiprtcCreateProgram(source.encode(), os.path.basename(name).encode(), 0, [], [])
        if not _ok(status) or prog is None:
            raise CompileError(f"hiprtcCreateProgram failed: {_name(status)}", "", _keep_source(source, name))
        try:
            status, = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
            log_text = _program_log(hiprtc, prog)
            if not _ok(status):
                raise CompileError(f"hipRTC: {name} for {arch} failed ({_name(status)}): {first_error_line(log_text)}",
                                   log_text, _keep_source(source, name))
            status, size = hiprtc.hiprtcGetCodeSize(prog)
            if not _ok(status) or not size:
                raise CompileError(f"hiprtcGetCodeSize failed: {_name(status)}", log_text, _keep_source(source, name))
            code = bytearray(size)
            status, = hiprtc.hiprtcGetCode(prog, code)
            if not _ok(status):
                raise CompileError(f"hiprtcGetCode failed: {_name(status)}", log_text, _keep_source(source, name))
        finally:
            hiprtc.hiprtcDestroyProgram(prog.createRef())
        return bytes(code), log_text, time.perf_counter() - t0

    def compile(self, source: str, arch: str, options: Sequence[str] = (), name: str = "kernel.hip",
                include_dirs: Sequence[str] = ()) -> CodeObject:
        binary, log_text, seconds = self._build(source, arch, options, name, include_dirs)
        resources: dict = {}
        readelf = amd_elf.find_llvm_tool("llvm-readelf")
        if readelf:   # absent where only ROCm's runtime is installed: resources stay unknown
            try:
                resources = amd_elf.kernel_resources(binary, readelf)
            except Exception as e:  # noqa: BLE001 - inspection is informative, never fatal
                log.warning("hipRTC: could not read kernel metadata with %s: %s", readelf, e)
        log.debug("hipRTC: %s for %s in %.2f s", name, arch, seconds)
        return CodeObject(binary=binary, arch=arch, toolchain=self.fingerprint(), log=log_text,
                          resources=resources, compile_seconds=seconds)


def _program_log(hiprtc: Any, prog: Any) -> str:
    status, size = hiprtc.hiprtcGetProgramLogSize(prog)
    if not _ok(status) or not size:
        return ""
    buf = bytearray(size)
    status, = hiprtc.hiprtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b"\0").decode(errors="replace") if _ok(status) else ""


def _keep_source(source: str, name: str) -> str:
    """Write a failed source where the user can open it; its path goes into the CompileError."""
    path = os.path.join(tempfile.mkdtemp(prefix="escha_jit_hiprtc_"), os.path.basename(name) or "kernel.hip")
    with open(path, "w") as f:
        f.write(source)
    return path

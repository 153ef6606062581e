"""NVRTC through cuda-bindings: HIP-dialect source -> cubin for sm_XX, no GPU or driver needed."""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
import time
from typing import Sequence

from .. import env
from ..errors import CompileError, ToolchainUnavailable
from .base import CodeObject, Resources, Toolchain, parse_ptxas_log
from .cubin_info import cubin_resources

log = logging.getLogger(__name__)

_EMPTY = 'extern "C" __global__ void escha_probe(int *p) { if (p) *p = 1; }\n'


def _check(res, what: str):
    """cuda-bindings calls return (status, *values); raise on a non-zero status."""
    status, *vals = res
    if int(status) != 0:
        raise ToolchainUnavailable(f"NVRTC {what} failed: {status}")
    return vals[0] if len(vals) == 1 else vals


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> str | None:
    """Directory holding cuda_fp16.h / cuda_bf16.h (the nvidia-cuda-runtime wheel, or CUDA_HOME)."""
    try:
        from cuda import pathfinder
        d = pathfinder.find_nvidia_header_directory("cudart")
        if d and os.path.exists(os.path.join(d, "cuda_fp16.h")):
            return d
    except Exception:  # noqa: BLE001 - fall through to CUDA_HOME
        pass
    for home in env.cuda_homes():
        if os.path.exists(os.path.join(home, "include", "cuda_fp16.h")):
            return os.path.join(home, "include")
    return None


class NVRTCToolchain(Toolchain):
    name = "nvrtc"
    vendor = "nvidia"

    def _nvrtc(self):
        try:
            from cuda.bindings import nvrtc
        except Exception as e:  # noqa: BLE001
            raise ToolchainUnavailable(f"cuda-bindings is not importable ({e}); pip install 'escha_jit[cuda]'") from e
        return nvrtc

    def available(self) -> bool:
        try:
            _check(self._nvrtc().nvrtcVersion(), "version")
            return cuda_include_dir() is not None
        except Exception:  # noqa: BLE001 - a missing library means "not available"
            return False

    def version(self) -> str:
        major, minor = _check(self._nvrtc().nvrtcVersion(), "version")
        return f"NVRTC {major}.{minor}"

    @functools.lru_cache(maxsize=None)
    def fingerprint(self) -> str:
        # the version alone misses same-version rebuilds: hash what it emits for a fixed program
        probe = self.compile(_EMPTY, "sm_90", name="probe.cu", _probe=True)
        inc = cuda_include_dir() or ""
        hdr = hashlib.sha256()
        for h in ("cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp"):
            p = os.path.join(inc, h)
            if os.path.exists(p):
                hdr.update(open(p, "rb").read())
        return (f"{self.version()};probe={hashlib.sha256(probe.binary).hexdigest()[:16]};"
                f"headers={hdr.hexdigest()[:16]}")

    def compile(self, source: str, arch: str, options: Sequence[str] = (), name: str = "kernel.cu",
                include_dirs: Sequence[str] = (), _probe: bool = False) -> CodeObject:
        nvrtc = self._nvrtc()
        if not arch.startswith("sm_"):
            raise ValueError(f"NVRTC compiles for sm_XX targets, not {arch!r}")
        inc = cuda_include_dir()
        if inc is None:
            raise ToolchainUnavailable("cuda_fp16.h not found: pip install nvidia-cuda-runtime (escha_jit[cuda])")
        opts = [f"--gpu-architecture={arch}", "-std=c++17", "--ptxas-options=-v", "-DESCHA_NVIDIA=1",
                f"-I{inc}", *(f"-I{d}" for d in include_dirs), *options]
        t0 = time.perf_counter()
        prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "create")
        try:
            status, = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
            text = program_log(nvrtc, prog)
            if int(status) != 0:
                path = _keep_source(source, name)
                raise CompileError(f"NVRTC failed to compile {name} for {arch}", text, path)
            cubin = program_cubin(nvrtc, prog)
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        dt = time.perf_counter() - t0
        fp = "" if _probe else self.fingerprint()
        # a kernel the log does not describe (NVRTC 13.0 on the H200 host prints ptxas' lines only
        # for a process's first compile of a program): its resources from the cubin's records
        resources = parse_ptxas_log(text)
        for name, res in cubin_resources(cubin).items():
            resources.setdefault(name, Resources(**res).to_json())
        return CodeObject(cubin, arch, fp, text, resources, dt)


# NVRTC writes its log and cubin into the buffer it is given. That buffer must be a fresh mutable
# bytearray: an immutable ``b" " * n`` is, for n = 1, CPython's shared one-byte object b" " itself,
# and an empty log (size 1: the terminating NUL) then turned every later b" " of the process into
# b"\x00". The H200 host's NVRTC 13.0 prints no ptxas lines for the fingerprint probe, so every
# process there that compiled anything wrote NULs for single spaces from then on (found when its
# parallel test runs read safetensors headers padded with NULs; session 25, tests/test_nvrtc.py).
def program_log(nvrtc, prog) -> str:
    """The compile log of ``prog`` (cuda-bindings nvrtc module, a compiled program), as text."""
    buf = bytearray(_check(nvrtc.nvrtcGetProgramLogSize(prog), "log size"))
    _check((nvrtc.nvrtcGetProgramLog(prog, buf)[0], None), "log")
    return bytes(buf).rstrip(b"\0 ").decode(errors="replace")


def program_cubin(nvrtc, prog) -> bytes:
    """The cubin of ``prog`` (compiled for a real sm_XX architecture)."""
    buf = bytearray(_check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size"))
    _check((nvrtc.nvrtcGetCUBIN(prog, buf)[0], None), "cubin")
    return bytes(buf)


def _keep_source(source: str, name: str) -> str:
    """Write a failed source where the user can open it; its path goes into the error."""
    fd, path = tempfile.mkstemp(prefix="escha-failed-", suffix="-" + os.path.basename(name))
    with os.fdopen(fd, "w") as f:
        f.write(source)
    return path

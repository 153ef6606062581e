"""Offline AMD compile route: clang-22 invoked the way hipRTC invokes its compiler (torch-free).

hipRTC compiles a HIP source for one device with its builtin header ``hiprtc_runtime.h``
force-included, ``__HIPCC_RTC__`` defined, no HIP runtime headers, ROCm's device-library bitcode
linked in and every non-kernel symbol internalized. Doing the same with a stock clang gives the
code object hipRTC would build (same flags; header and LLVM versions may differ slightly) without
ROCm or a GPU, so CI can compile every kernel for gfx12.
``scripts/setup_amd_toolchain.sh`` installs clang-22 and puts the header and bitcode under
``$ESCHA_JIT_AMD_SYSROOT`` (``include/hiprtc_runtime.h``, ``bitcode/*.bc``).

Environment: ``ESCHA_JIT_CLANG`` (default ``clang-22`` on PATH), ``ESCHA_JIT_AMD_SYSROOT``
(default ``<repo>/.ci-cache/amd``).
"""
from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from typing import Optional, Sequence

from .. import env
from ..errors import CompileError, ToolchainUnavailable
from . import amd_elf
from .base import CodeObject, Toolchain

log = logging.getLogger(__name__)

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GFX_ARCH = re.compile(r"gfx[0-9a-f]+(:[a-z]+[+-])*$")
# Compiled to fingerprint the build: sinf pulls in ocml, so header + bitcode + codegen all show.
FINGERPRINT_SOURCE = 'extern "C" __global__ void escha_fingerprint(float* p) { p[threadIdx.x] = sinf(p[threadIdx.x]); }\n'
FINGERPRINT_ARCH = "gfx1201"
_FINGERPRINTS: dict[tuple[str, str], str] = {}   # (clang path, sysroot) -> fingerprint, per process


def default_sysroot() -> str:
    return env.amd_sysroot()


def first_error_line(log_text: str) -> str:
    """The compiler's first ``error:`` line (what a human wants in the exception message)."""
    for line in log_text.splitlines():
        if "error:" in line:
            return line.strip()
    return log_text.strip().splitlines()[0] if log_text.strip() else ""


def sha256_file(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class ClangAMDToolchain(Toolchain):
    name = "clang-amdgpu"
    vendor = "amd"

    def __init__(self, clang: Optional[str] = None, sysroot: Optional[str] = None):
        self.clang_cmd = clang or env.clang()
        self.sysroot = os.path.abspath(sysroot) if sysroot else default_sysroot()
        self.header = os.path.join(self.sysroot, "include", "hiprtc_runtime.h")
        self.bitcode_dir = os.path.join(self.sysroot, "bitcode")
        self._version: Optional[str] = None

    # --- discovery ---------------------------------------------------------------------------
    @property
    def clang(self) -> Optional[str]:
        return shutil.which(self.clang_cmd)

    def missing(self) -> list[str]:
        """What is missing, each with how to get it; empty when the route is usable."""
        out = []
        if not self.clang:
            out.append(f"{self.clang_cmd} not found (set ESCHA_JIT_CLANG or run scripts/setup_amd_toolchain.sh)")
        if not os.path.isfile(self.header):
            out.append(f"{self.header} missing (scripts/setup_amd_toolchain.sh, or set ESCHA_JIT_AMD_SYSROOT)")
        if not os.path.isfile(os.path.join(self.bitcode_dir, "ocml.bc")):
            out.append(f"{self.bitcode_dir}/ocml.bc missing (scripts/setup_amd_toolchain.sh)")
        return out

    def available(self) -> bool:
        try:
            return not self.missing()
        except Exception:  # noqa: BLE001 - available() never raises
            return False

    def _require(self) -> str:
        if (miss := self.missing()):
            raise ToolchainUnavailable("clang-amdgpu unavailable: " + "; ".join(miss))
        return self.clang  # type: ignore[return-value]

    def version(self) -> str:
        if self._version is None:
            r = subprocess.run([self._require(), "--version"], capture_output=True, text=True, check=True)
            self._version = r.stdout.splitlines()[0].strip()
        return self._version

    def fingerprint(self) -> str:
        clang = self._require()
        key = (os.path.realpath(clang), self.sysroot)
        if key not in _FINGERPRINTS:
            binary, _, _ = self._build(FINGERPRINT_SOURCE, FINGERPRINT_ARCH, (), "fingerprint.hip", ())
            bc = hashlib.sha256()
            for p in sorted(glob.glob(os.path.join(self.bitcode_dir, "*.bc"))):
                bc.update(os.path.basename(p).encode() + b"\0" + bytes.fromhex(sha256_file(p)))
            _FINGERPRINTS[key] = (f"{self.name}|{self.version()}|obj={hashlib.sha256(binary).hexdigest()[:16]}"
                                  f"|hdr={sha256_file(self.header)[:16]}|bc={bc.hexdigest()[:16]}")
        return _FINGERPRINTS[key]

    # --- compile -----------------------------------------------------------------------------
    def command(self, src: str, out: str, arch: str, options: Sequence[str] = (),
                include_dirs: Sequence[str] = ()) -> list[str]:
        """The clang command line for one compile: hipRTC's own flags, then the caller's."""
        return [
            self._require(), "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
            "--no-gpu-bundle-output",
            # hipRTC uses no ROCm headers (its builtin header stands in); without this clang-22
            # stops with "cannot find HIP runtime".
            "-nogpuinc",
            "-O3", "-std=c++17", "-D__HIPCC_RTC__", "-include", self.header,
            f"--rocm-device-lib-path={self.bitcode_dir}",
            "-mllvm", "-amdgpu-internalize-symbols",   # as hipRTC: only kernels stay visible
            *[f"-I{os.path.abspath(d)}" for d in include_dirs], *options, "-c", src, "-o", out,
        ]

    def _build(self, source: str, arch: str, options: Sequence[str], name: str,
               include_dirs: Sequence[str]) -> tuple[bytes, str, float]:
        """(code object, compiler log, seconds); CompileError with the kept source on failure."""
        if not GFX_ARCH.match(arch):
            raise ValueError(f"clang-amdgpu compiles for AMD gfx targets, not {arch!r}")
        workdir = tempfile.mkdtemp(prefix="escha_jit_amd_")
        src = os.path.join(workdir, os.path.basename(name) or "kernel.hip")
        out = os.path.splitext(src)[0] + ".hsaco"
        with open(src, "w") as f:
            f.write(source)
        # Relative paths from inside the temp dir: clang hashes the input path and the options into
        # the __hip_cuid_* symbol, so absolute temp paths would make every build differ.
        cmd = self.command(os.path.basename(src), os.path.basename(out), arch, options, include_dirs)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
        seconds = time.perf_counter() - t0
        if r.returncode != 0 or not os.path.isfile(out):
            if os.path.exists(out):
                os.remove(out)
            # Keep the source so the log's line numbers can be read against it.
            raise CompileError(f"clang-amdgpu: {os.path.basename(src)} for {arch} failed "
                               f"(exit {r.returncode}): {first_error_line(r.stderr)}", r.stderr, src)
        with open(out, "rb") as f:
            binary = f.read()
        shutil.rmtree(workdir, ignore_errors=True)
        return binary, r.stderr, seconds

    def compile(self, source: str, arch: str, options: Sequence[str] = (), name: str = "kernel.hip",
                include_dirs: Sequence[str] = ()) -> CodeObject:
        binary, log_text, seconds = self._build(source, arch, options, name, include_dirs)
        readelf = amd_elf.find_llvm_tool("llvm-readelf", self.clang_cmd)
        resources = amd_elf.kernel_resources(binary, readelf) if readelf else {}
        log.debug("clang-amdgpu: %s for %s in %.2f s", name, arch, seconds)
        return CodeObject(binary=binary, arch=arch, toolchain=self.fingerprint(), log=log_text,
                          resources=resources, compile_seconds=seconds)

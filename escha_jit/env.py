"""Every environment variable escha_jit reads, in one place (torch-free).

| variable | meaning | default |
|---|---|---|
| ``ESCHA_JIT_CACHE_DIR`` | kernel cache directory | ``$XDG_CACHE_HOME/escha_jit`` or ``~/.cache/escha_jit`` |
| ``ESCHA_JIT_NO_COMPILE`` | ``1``: any compile is an error (deployments with a prebuilt cache) | off |
| ``ESCHA_JIT_LOG_COMPILES`` | ``1``: log every compile at INFO (time, registers, spills) | off (DEBUG) |
| ``ESCHA_JIT_LOG_LEVEL`` | level for the ``escha_jit`` logger when the CLI configures logging | ``INFO`` |
| ``ESCHA_JIT_CLANG`` | clang for the offline gfx12 route | ``clang-22`` |
| ``ESCHA_JIT_AMD_SYSROOT`` | hipRTC's header + ROCm bitcode for that route | ``<checkout>/.ci-cache/amd`` |
| ``ESCHA_JIT_SID_CHROOT`` | the Debian sid chroot with real hipRTC (tests, CI) | ``<checkout>/.ci-cache/sid`` |
| ``ESCHA_JIT_NVRTC_FLOOR`` | a virtual environment with the oldest NVRTC the ``cuda`` extra allows (tests, CI: scripts/nvrtc_floor.sh) | ``<checkout>/.ci-cache/nvrtc-floor`` |
| ``ESCHA_JIT_NO_PDL`` | ``1``: launch the fused kernels as ordinary kernels, not as programmatic dependents (A/B timing; drivers without it) | off |
| ``ESCHA_JIT_PREFILL`` | route of calls above 256 rows: ``dense`` (dense weight + vendor GEMM) or ``gemm`` (the coded wgmma GEMM, Hopper only, experimental: slower today, benchmarks/RESULTS.md) | ``dense`` |
| ``ESCHA_JIT_SKIP_AMD`` | ``1``: skip the AMD toolchain tests (they fail otherwise when it is missing) | off |
| ``ROCM_PATH``, ``CUDA_HOME`` / ``CUDA_PATH`` | where ROCm's / CUDA's headers are, when not in the usual places | |
"""
from __future__ import annotations

import os


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> str:
    d = os.environ.get("ESCHA_JIT_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "escha_jit")


def no_compile() -> bool:
    return _flag("ESCHA_JIT_NO_COMPILE")


def log_compiles() -> bool:
    return _flag("ESCHA_JIT_LOG_COMPILES")


def log_level() -> str:
    return os.environ.get("ESCHA_JIT_LOG_LEVEL", "INFO").upper()


_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clang() -> str:
    return os.environ.get("ESCHA_JIT_CLANG") or "clang-22"


def amd_sysroot() -> str:
    return os.path.abspath(os.environ.get("ESCHA_JIT_AMD_SYSROOT") or os.path.join(_CHECKOUT, ".ci-cache", "amd"))


def sid_chroot() -> str:
    return os.path.abspath(os.environ.get("ESCHA_JIT_SID_CHROOT") or os.path.join(_CHECKOUT, ".ci-cache", "sid"))


def nvrtc_floor() -> str:
    return os.path.abspath(os.environ.get("ESCHA_JIT_NVRTC_FLOOR") or os.path.join(_CHECKOUT, ".ci-cache", "nvrtc-floor"))


def no_pdl() -> bool:
    return _flag("ESCHA_JIT_NO_PDL")


def skip_amd() -> bool:
    return _flag("ESCHA_JIT_SKIP_AMD")


def rocm_roots() -> list[str]:
    return [r for r in (os.environ.get("ROCM_PATH"), "/opt/rocm", "/usr") if r]


def cuda_homes() -> list[str]:
    return [h for h in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda") if h]


PREFILL_ROUTES = ("dense", "gemm")


def prefill_route() -> str:
    v = os.environ.get("ESCHA_JIT_PREFILL", "dense").strip().lower() or "dense"
    if v not in PREFILL_ROUTES:
        raise ValueError(f"ESCHA_JIT_PREFILL={v!r}: expected one of {PREFILL_ROUTES}")
    return v

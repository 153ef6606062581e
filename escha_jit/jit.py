"""Spec -> source -> code object, through the disk cache (torch-free).

    compile_spec(spec) renders the spec's template, picks the toolchain for its arch, computes
    the content-addressed cache key and returns the cached or freshly built code object.
"""
from __future__ import annotations

import functools
import logging
from typing import Any, Mapping, Optional

from .cache import CacheEntry, KernelCache, cache_key, default_cache
from .errors import ToolchainUnavailable
from .render import headers_digest, include_dir, render
from .spec import KernelSpec, vendor_of
from .toolchain.base import Toolchain

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def _toolchain(name: str) -> Toolchain:
    if name == "nvrtc":
        from .toolchain.nvrtc import NVRTCToolchain
        return NVRTCToolchain()
    if name == "hiprtc":
        from .toolchain.hiprtc import HipRTCToolchain
        return HipRTCToolchain()
    if name == "clang-amdgpu":
        from .toolchain.clang_amd import ClangAMDToolchain
        return ClangAMDToolchain()
    raise ValueError(f"unknown toolchain {name!r}: expected nvrtc, hiprtc or clang-amdgpu")


def toolchain_for(arch: str, prefer: Optional[str] = None) -> Toolchain:
    """The toolchain that compiles for ``arch``: NVRTC for sm_XX; hipRTC for gfxNNNN, or the
    offline clang route when hipRTC is absent (build machines without ROCm)."""
    if prefer:
        tc = _toolchain(prefer)
        if tc.vendor != vendor_of(arch):
            raise ValueError(f"toolchain {prefer} cannot compile for {arch}")
        return tc
    names = ("nvrtc",) if vendor_of(arch) == "nvidia" else ("hiprtc", "clang-amdgpu")
    for n in names:
        try:
            tc = _toolchain(n)
        except ImportError:
            continue
        if tc.available():
            return tc
    hint = "pip install 'escha_jit[cuda]'" if vendor_of(arch) == "nvidia" else \
        "install ROCm's hipRTC and pip install 'escha_jit[rocm]' (or scripts/setup_amd_toolchain.sh)"
    raise ToolchainUnavailable(f"no toolchain for {arch} on this machine ({', '.join(names)} unavailable): {hint}")


def compile_options(spec: KernelSpec) -> list[str]:
    """Compiler options of ``spec`` (part of the cache key): every kernel of a vendor's, and on
    NVIDIA the ptxas register-usage level a fused config may name (kernels.fused.FusedConfig)."""
    if spec.vendor == "amd":
        return ["-O3"]
    level = spec.params.get("reg_level", -1)
    return [f"--ptxas-options=--register-usage-level={level}"] if level >= 0 else []


PORTABLE = "portable"


def compile_spec(spec: KernelSpec, extra: Optional[Mapping[str, Any]] = None,
                 cache: Optional[KernelCache] = None, toolchain: Optional[str] = None) -> CacheEntry:
    """Render, key, and build-or-load the code object of ``spec``.

    Without any usable compiler (a deployment machine), or with compiling forbidden, a code
    object prebuilt elsewhere for the same source, arch and options is found by its portable key.
    """
    source = render(spec, extra)
    options = compile_options(spec)
    hdr = headers_digest()
    pkey = cache_key(source, hdr, PORTABLE, spec.arch, options)
    cache = cache or default_cache()
    try:
        tc = toolchain_for(spec.arch, toolchain)
    except ToolchainUnavailable:
        hit = cache.lookup_portable(spec.arch, pkey)
        if hit is not None:
            return hit
        raise
    key = cache_key(source, hdr, tc.fingerprint(), spec.arch, options)

    def build():
        return tc.compile(source, spec.arch, options, name=spec.kernel_name() + ".hip", include_dirs=[include_dir()])

    return cache.get_or_build(key, spec.arch, str(spec), build,
                              meta={"spec": spec.to_json(), "toolchain_name": tc.name}, pkey=pkey)

"""AMD gfx1201 offline compile route (clang-22 as hipRTC, TOOLCHAINS.md route 1), without a GPU.

CI installs the toolchain first (scripts/bootstrap.sh --test runs scripts/setup_amd_toolchain.sh),
so a missing toolchain FAILS here; set ESCHA_JIT_SKIP_AMD=1 to skip deliberately.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from escha_jit import env

from escha_jit.errors import CompileError
from escha_jit.toolchain import amd_elf
from escha_jit.toolchain.base import Resources
from escha_jit.toolchain.clang_amd import ClangAMDToolchain
from escha_jit.toolchain.hiprtc import HipRTCToolchain

ARCH = "gfx1201"
EF_AMDGPU_MACH_AMDGCN_GFX1201 = 0x04E

# One wave32 16x16x16 f16 WMMA per block plus a cross-half shuffle. On gfx12 (wave32) the builtin
# takes per lane 8 halves of A, 8 halves of B and 8 floats of C (v8f16, v8f16, v8f32 -> v8f32).
# Self-contained: no HIP headers (the clang route has none; hipRTC's builtin header suffices).
WMMA_SOURCE = r"""
typedef _Float16 half8 __attribute__((ext_vector_type(8)));
typedef float float8 __attribute__((ext_vector_type(8)));

extern "C" __global__ void __launch_bounds__(32)
wmma_f16_16x16x16(const half8* __restrict__ a, const half8* __restrict__ b, float8* __restrict__ c) {
  const int lane = threadIdx.x;
  float8 acc = c[lane];
  acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a[lane], b[lane], acc);
  // wave32 shuffle: lanes 0-15 and 16-31 hold the two 8-row halves of the 16x16 tile
  for (int i = 0; i < 8; ++i) acc[i] += __shfl_xor(acc[i], 16);
  c[lane] = acc;
}

extern "C" __global__ void __launch_bounds__(256) lds_reverse(float* p) {
  __shared__ float buf[256];
  buf[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = buf[255 - threadIdx.x];
}
"""
SHUFFLE_INSNS = ("ds_bpermute", "v_permlane", "dpp", "ds_swizzle")


def require_clang_amd() -> ClangAMDToolchain:
    if env.skip_amd():
        pytest.skip("ESCHA_JIT_SKIP_AMD=1: AMD toolchain tests skipped on purpose")
    tc = ClangAMDToolchain()
    if not tc.available():
        pytest.fail("AMD clang route missing: " + "; ".join(tc.missing())
                    + ". Run scripts/setup_amd_toolchain.sh (as root), or set ESCHA_JIT_SKIP_AMD=1 to skip.")
    return tc


def check_wmma_code_object(binary: bytes) -> dict:
    """The assertions both AMD routes must pass; returns the inspection for more checks."""
    info = amd_elf.inspect_hsaco(binary)
    assert info["e_machine"] == amd_elf.EM_AMDGPU == 224
    assert info["e_flags"] & amd_elf.EF_AMDGPU_MACH == EF_AMDGPU_MACH_AMDGCN_GFX1201
    assert info["target"] == ARCH and info["metadata_target"].endswith("--" + ARCH)
    k = info["kernels"]["wmma_f16_16x16x16"]
    assert k["wavefront_size"] == 32
    assert k["vgpr_spill_count"] == 0 and k["sgpr_spill_count"] == 0
    assert k["private_segment_fixed_size"] == 0 and k["uses_dynamic_stack"] is False
    assert k["kernarg_segment_size"] >= 24
    lds = info["kernels"]["lds_reverse"]
    assert lds["group_segment_fixed_size"] == 256 * 4 and lds["wavefront_size"] == 32
    asm = amd_elf.disassemble(binary, ARCH)
    assert "v_wmma_f32_16x16x16_f16" in asm
    assert any(s in asm for s in SHUFFLE_INSNS), "the wave32 shuffle vanished from the disassembly"
    return info


def test_wmma_gfx1201_code_object():
    tc = require_clang_amd()
    co = tc.compile(WMMA_SOURCE, ARCH, name="wmma.hip")
    info = check_wmma_code_object(co.binary)
    assert co.arch == ARCH and co.toolchain == tc.fingerprint() and co.compile_seconds > 0
    k = info["kernels"]["wmma_f16_16x16x16"]
    assert co.resources["wmma_f16_16x16x16"] == Resources(
        registers=k["vgpr_count"], sgprs=k["sgpr_count"], spill_bytes=0, stack_bytes=0,
        shared_bytes=0, wavefront=32).to_json()
    assert co.resources["lds_reverse"]["shared_bytes"] == 1024


def test_compile_error_names_line_and_kept_source():
    tc = require_clang_amd()
    bad = 'extern "C" __global__ void broken(float* p) {\n  p[0] = undeclared_thing;\n}\n'
    with pytest.raises(CompileError) as ei:
        tc.compile(bad, ARCH, name="broken.hip")
    e = ei.value
    assert e.source_path and os.path.isfile(e.source_path) and e.source_path.endswith("broken.hip")
    with open(e.source_path) as f:
        assert f.read() == bad
    msg = str(e)
    assert "broken.hip:2:10: error: use of undeclared identifier 'undeclared_thing'" in msg
    assert e.source_path in msg and "undeclared_thing" in e.log


def test_fingerprint_stable_and_names_clang():
    tc = require_clang_amd()
    fp = tc.fingerprint()
    assert fp == tc.fingerprint() == ClangAMDToolchain().fingerprint()
    assert tc.version() in fp and "clang version 22" in fp
    # Another process (fresh per-process cache, other temp dirs) must agree: cache keys depend on it.
    code = "from escha_jit.toolchain.clang_amd import ClangAMDToolchain as T; print(T().fingerprint())"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == fp


def test_rejects_non_amd_arch():
    tc = require_clang_amd()
    with pytest.raises(ValueError):
        tc.compile(WMMA_SOURCE, "sm_90")


def test_elf_header_parser_rejects_garbage():
    with pytest.raises(ValueError):
        amd_elf.parse_elf_header(b"not an elf file at all" * 4)


def test_compile_side_is_torch_free():
    code = ("import sys; import escha_jit.toolchain.clang_amd, escha_jit.toolchain.hiprtc, "
            "escha_jit.toolchain.amd_elf; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hiprtc_unavailable_is_false_not_exception():
    assert HipRTCToolchain().available() in (True, False)

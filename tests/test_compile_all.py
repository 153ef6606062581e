"""CI compiles every shipped specialization for sm_90 (NVRTC) and gfx1201 (clang-22 with hipRTC's
header and ROCm bitcode) and checks each code object: ELF arch, wave32 on AMD, no spills or
scratch. Fails (does not skip) when a toolchain is missing, unless ESCHA_JIT_SKIP_AMD=1 for AMD."""
import os

import pytest

from escha_jit import env

from escha_jit.kernels.registry import shipped_specs
from escha_jit.offline import compile_all


def _check(arch, tmp_path):
    rows = compile_all(arch, full=True, cache_dir=str(tmp_path), jobs=os.cpu_count())
    assert len(rows) == len(list(shipped_specs(arch)))
    bad = [f"{r.spec}: {r.error or '; '.join(r.problems)}" for r in rows if not r.ok]
    assert not bad, "\n".join(bad[:20])
    return rows


def test_every_sm90_specialization(tmp_path):
    rows = _check("sm_90", tmp_path)
    assert any("fused" in r.spec for r in rows) and any("reconstruct" in r.spec for r in rows)


def test_every_gfx1201_specialization(tmp_path):
    if env.skip_amd():
        pytest.skip("ESCHA_JIT_SKIP_AMD=1: the AMD toolchain is deliberately not installed here")
    rows = _check("gfx1201", tmp_path)
    assert all(r.wavefront == 32 for r in rows if r.wavefront is not None)

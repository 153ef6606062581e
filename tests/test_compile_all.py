"""CI compiles every shipped specialization for sm_90 (NVRTC) and gfx1201 (clang-22 with hipRTC's
header and ROCm bitcode) and checks each code object: ELF arch, wave32 on AMD, no spills or
scratch, the matrix / dot instruction (and on sm_90 the dependent-launch pair) in the disassembly.
Fails (does not skip) when a toolchain is missing, unless ESCHA_JIT_SKIP_AMD=1 for AMD; the sm_90
SASS checks need the ``sass`` extra, which the README's test command installs."""
import json
import os
import subprocess

import pytest

from escha_jit import env

from escha_jit.kernels import fused
from escha_jit.kernels.registry import shipped_specs
from escha_jit.offline import check_code_object, compile_all, expected_sass
from escha_jit.toolchain.sass import find_cuobjdump


def _check(arch, tmp_path):
    rows = compile_all(arch, full=True, cache_dir=str(tmp_path), jobs=os.cpu_count())
    assert len(rows) == len(list(shipped_specs(arch)))
    bad = [f"{r.spec}: {r.error or '; '.join(r.problems)}" for r in rows if not r.ok]
    assert not bad, "\n".join(bad[:20])
    return rows


def test_every_sm90_specialization(tmp_path):
    assert find_cuobjdump(), "cuobjdump missing: the sm_90 SASS checks need escha_jit[sass]"
    rows = _check("sm_90", tmp_path)
    assert any("fused" in r.spec for r in rows) and any("reconstruct" in r.spec for r in rows)


def test_every_sm90_specialization_with_the_oldest_nvrtc(tmp_path):
    """The oldest NVRTC the ``cuda`` extra allows (13.0, the venv of scripts/nvrtc_floor.sh) compiles
    every shipped sm_90 specialization too: NVRTC front ends differ between minor versions (13.5
    took a generic lambda in a device function that 13.0 rejects), and this environment has the
    newest. Torch-free, in that venv's interpreter; the SASS is checked by the test above."""
    py = os.path.join(env.nvrtc_floor(), "bin", "python")
    assert os.path.exists(py), f"{py} missing: run scripts/nvrtc_floor.sh (scripts/bootstrap.sh --test does)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run_env = {**os.environ, "PYTHONPATH": root}
    ver = subprocess.run([py, "-c", "from cuda.bindings import nvrtc; print(*nvrtc.nvrtcVersion()[1:])"],
                         env=run_env, capture_output=True, text=True, check=True).stdout.split()
    assert ver == ["13", "0"], ver
    out = tmp_path / "rows.json"
    r = subprocess.run([py, "-m", "escha_jit.cli", "compile", "--arch", "sm_90", "--all", "--cache-dir",
                        str(tmp_path / "cache"), "-j", str(os.cpu_count()), "--json", str(out)],
                       cwd=root, env=run_env, capture_output=True, text=True, timeout=3600)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-4000:]
    rows = json.loads(out.read_text())
    assert len(rows) == len(list(shipped_specs("sm_90")))
    bad = [f"{row['spec']}: {row['error'] or '; '.join(row['problems'])}" for row in rows
           if row["error"] or row["problems"]]
    assert not bad, "\n".join(bad[:10])
    assert r.returncode == 0, r.stderr[-2000:]


def test_every_gfx1201_specialization(tmp_path):
    if env.skip_amd():
        pytest.skip("ESCHA_JIT_SKIP_AMD=1: the AMD toolchain is deliberately not installed here")
    rows = _check("gfx1201", tmp_path)
    assert all(r.wavefront == 32 for r in rows if r.wavefront is not None)


def test_sass_check_names_what_is_missing(tmp_path):
    """The SASS check fails a code object without its unit's instruction, the scales' prefetch or
    the dependent-launch pair, naming each: the Hadamard kernel's cubin presented as a fused
    kernel's; the prep kernel's own cubin (prefetch and both halves of the pair) passes."""
    assert find_cuobjdump(), "cuobjdump missing: the SASS checks need escha_jit[sass]"
    from escha_jit.jit import compile_spec
    from escha_jit.cache import KernelCache
    from escha_jit.kernels import hadamard, prep
    cache = KernelCache(str(tmp_path))
    ps = prep.spec_for("sm_90", "f16")
    entry = compile_spec(ps, prep.render_extra(ps), cache=cache)
    assert check_code_object(ps, entry.code.binary, entry.code.resources) == []
    hs = hadamard.spec_for("sm_90", "f16", "f16")
    entry = compile_spec(hs, hadamard.render_extra(hs), cache=cache)
    fs = fused.spec_for("sm_90", 2.0, "mcg", "f16", "f16", fused.FusedConfig())
    res = {fs.kernel_name(): entry.code.resources[hs.kernel_name()]}
    problems = check_code_object(fs, entry.code.binary, res)
    assert problems == ["no HMMA.16816.F32 in the SASS", "no CCTL.E.PF2 in the SASS", "no ACQBULK in the SASS",
                        "no PREEXIT in the SASS"], problems


def test_gemm_block_variants_compile_clean(tmp_path):
    """The coded GEMM's block-shape variants (benchmarks/bench_gemm_parts.py --variants) compile
    for sm_90a with the shipped kernels' checks: no spills, wgmma and TMA in the SASS."""
    assert find_cuobjdump(), "cuobjdump missing: the SASS checks need escha_jit[sass]"
    from escha_jit.jit import compile_spec
    from escha_jit.cache import KernelCache
    from escha_jit.kernels import gemm
    for v in (dict(tokens=192), dict(tokens=128), dict(tokens=64), dict(stages=2)):
        gs = gemm.spec_for("sm_90", 3.0, "mul1", "bf16", **v)
        entry = compile_spec(gs, gemm.render_extra(gs), cache=KernelCache(str(tmp_path)))
        assert check_code_object(gs, entry.code.binary, entry.code.resources) == [], v


def test_gemm_loops_by_role(tmp_path):
    """benchmarks/gemm_sass.py reads the coded GEMM's SASS by loop: a producer loop (decode and
    swizzled stores), the consumers' wgmma loop, and the epilogue's row step with one shuffle round
    per 8 rows (32 SHFL: the Hadamard's stride 64; the other strides run in the accumulators and in
    the lane, benchmarks/RESULTS.md session 58) and no spills."""
    import importlib.util
    assert find_cuobjdump(), "cuobjdump missing: the SASS checks need escha_jit[sass]"
    from escha_jit.kernels import gemm
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "gemm_sass.py")
    spec = importlib.util.spec_from_file_location("gemm_sass", path)
    gemm_sass = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gemm_sass)
    from escha_jit.cache import KernelCache
    s = gemm_sass.stats(gemm.spec_for("sm_90", 2.0, "mcg", "bf16", share=2), cache=KernelCache(str(tmp_path)))
    roles = {lp["role"]: lp for lp in s["loops"]}
    assert s["spill_bytes"] == 0 and set(roles) == {"producer", "wgmma", "epilogue"}, s
    assert roles["wgmma"]["HGMMA"] == 8 and roles["epilogue"]["SHFL"] == 32 and roles["producer"]["STS"] == 16, s


def test_prep_products_rounded_before_the_rotation(tmp_path):
    """benchmarks/prep_sass.py: the prep kernels round x * rin before the Hadamard's first butterfly
    adds it (platform mul_rn) - no FFMA in sm_90's lane kernels, no v_fma_mix_f32 / v_fma_f32 in
    gfx1201's (4 each before session 59: ptxas and clang fuse the product into the add unless told
    not to) - and every FFMA of the groups kernel is a shuffle stage's (64 per copy of its step, 4
    copies), its full step taking one shuffle per such fma plus the fp16 check's."""
    import importlib.util
    assert find_cuobjdump(), "cuobjdump missing: the SASS checks need escha_jit[sass]"
    from escha_jit.cache import KernelCache
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "prep_sass.py")
    spec = importlib.util.spec_from_file_location("prep_sass", path)
    prep_sass = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prep_sass)
    cache = KernelCache(str(tmp_path))
    archs = ["sm_90"] + ([] if env.skip_amd() else ["gfx1201"])
    for arch in archs:
        for s in prep_sass.specs(arch):
            r = prep_sass.stats(s, cache=cache)
            assert r["spill_bytes"] == 0, (str(s), r)
            if s.params.get("groups"):
                assert r["fma"] == 256, (str(s), r)
                assert any(lp["FFMA"] == 128 and lp["SHFL"] <= 128 + 16 for lp in r["loops"]), (str(s), r)
            else:
                assert r["fma"] == 0, (str(s), r)


def test_expected_sass_per_kernel_and_arch():
    f90 = fused.spec_for("sm_90", 2.0, "mcg", "f16", "f16", fused.FusedConfig())
    f80 = fused.spec_for("sm_80", 2.0, "mcg", "f16", "f16", fused.FusedConfig())
    dot = fused.spec_for("sm_90", 2.0, "mul1", "f16", "f16", fused.FusedConfig(warps=4, dot=1), act_quant="int8")
    assert expected_sass(f90) == ("HMMA.16816.F32", "CCTL.E.PF2", "ACQBULK", "PREEXIT")
    assert expected_sass(f80) == ("HMMA.16816.F32", "CCTL.E.PF2")   # no griddepcontrol before sm_90
    assert expected_sass(dot) == ("IDP.4A.S8.U8", "CCTL.E.PF2", "ACQBULK", "PREEXIT")
    from escha_jit.kernels import prep
    assert expected_sass(prep.spec_for("sm_90", "f16")) == ("CCTL.E.PF2", "ACQBULK", "PREEXIT")


def test_shuffles_in_loops_over_the_wave_index_need_no_divergence_test():
    """ptxas puts a BRA.DIV test (and an out-of-line WARPSYNC.COLLECTIVE copy) before a shuffle in a
    loop whose trip count it cannot prove wave-uniform, e.g. one over threadIdx.x / 32; with the wave
    index from platform_cuda.h's wave_index() it compiles the shuffle alone. The shipped kernels'
    check (offline.SASS_FORBIDDEN) names the test where it appears."""
    from escha_jit.jit import include_dir
    from escha_jit.offline import _check_nvidia_sass
    from escha_jit.toolchain.nvrtc import NVRTCToolchain
    from escha_jit.toolchain.sass import disassemble
    assert find_cuobjdump(), "cuobjdump missing: the sm_90 SASS checks need escha_jit[sass]"
    body = """#include "escha/platform.h"
extern "C" __global__ void k(float* p, int n) {
    const int wave = WAVE;
    float v = p[threadIdx.x];
    for (int i = wave; i < n; i += 8) v = v * p[i] + escha::shfl_xor(v, 1);
    p[threadIdx.x] = v;
}"""
    binary, sass = {}, {}
    for name, wave in (("tid", "threadIdx.x / ESCHA_WAVE"), ("uniform", "escha::wave_index()")):
        binary[name] = NVRTCToolchain().compile(body.replace("WAVE", wave), "sm_90", name=f"{name}.cu",
                                                include_dirs=[include_dir()]).binary
        sass[name] = disassemble(binary[name])
    assert "BRA.DIV" in sass["tid"] and "WARPSYNC" in sass["tid"]
    assert "BRA.DIV" not in sass["uniform"] and "WARPSYNC" not in sass["uniform"] and "SHFL.BFLY" in sass["uniform"]
    from escha_jit.kernels import prep
    assert "BRA.DIV in the SASS" in _check_nvidia_sass(prep.spec_for("sm_90", "f16"), binary["tid"])


def test_unchecked_names_the_missing_disassembler(monkeypatch):
    """A machine without cuobjdump compiles sm_90 kernels whose SASS nobody checked: the compile
    command says so (offline.unchecked), instead of passing them silently."""
    from escha_jit import offline
    from escha_jit.toolchain import sass
    assert offline.unchecked("sm_90") is None                 # CI has the sass extra
    assert offline.unchecked("gfx1201") is None
    monkeypatch.setattr(sass, "find_cuobjdump", lambda: None)
    assert offline.unchecked("sm_90") == "SASS not checked: cuobjdump not found (pip install 'escha_jit[sass]')"
    assert offline.unchecked("gfx1201") is None


def test_reg_level_changes_the_allocation(tmp_path):
    """FusedConfig.reg_level reaches ptxas: the same kernel source at level 0 gets another
    allocation than at ptxas' default (a 16-wave K2 mcg kernel of the shipped table: 108 and 100
    registers with NVRTC 13.5, session 30) and another SASS, with no spills either way."""
    from escha_jit.cache import KernelCache
    from escha_jit.jit import compile_spec
    from escha_jit.toolchain.sass import disassemble
    cache = KernelCache(str(tmp_path))
    cfg = fused.FusedConfig(warps=16, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, xh=1)
    res, sass = [], []
    for c in (cfg, fused.FusedConfig(**{**cfg.__dict__, "reg_level": 0})):
        spec = fused.spec_for("sm_90", 2.0, "mcg", "bf16", "bf16", c)
        entry = compile_spec(spec, fused.render_extra(spec), cache=cache)
        res.append(entry.code.resources[spec.kernel_name()])
        if find_cuobjdump():
            sass.append(disassemble(entry.code.binary).replace(spec.kernel_name(), "K"))
    assert all(not r.get("spill_bytes") for r in res), res
    assert res[1]["registers"] < res[0]["registers"], res
    if sass:
        assert sass[0] != sass[1]

"""The gfx12 (RDNA4) wave32 WMMA path, proven on the CPU: lane layouts, the trellis -> WMMA B
decoders, and the compiled gfx1201 fused kernels (no AMD GPU anywhere).

Source of the hardware layout: AMD's Matrix Instruction Calculator (github.com/ROCm/
amd_matrix_instruction_calculator, matrix_calculator.py; `--architecture rdna4 --instruction
v_wmma_f32_16x16x16_f16 --wavefront 32 --detail-instruction`, the "Wave32 matrix element to register
mapping" and "register to matrix element mapping" lines, which transcribe the RDNA4 ISA reference
guide's WMMA VGPR layout tables). Transcribed here, independently of the headers under test:

    A[i][k]:  GPR 2*floor(k/8) + floor(k/2)%2, bits [16*(k%2)+15 : 16*(k%2)],  lane 16*(floor(k/4)%2) + i
    B[k][j]:  GPR 2*floor(k/8) + floor(k/2)%2, bits [16*(k%2)+15 : 16*(k%2)],  lane 16*(floor(k/4)%2) + j
    C/D[i][j]: GPR i%8, lane 16*floor(i/8) + j
    (and back: A/B k = 8*floor(GPR/2) + 4*floor(lane/16) + 2*(GPR%2) + floor(bits/16), i or j = lane%16,
     D i = 8*floor(lane/16) + GPR, j = lane%16)

Sanity anchor of the transcription: the same tool's RDNA3 answer is the well-known RDNA3 layout
(D row = 2*GPR + lane/16), which the RDNA4 one is checked NOT to be.

The index functions under test (templates/include/escha/wmma_layout.h) and the decoders
(wmma_decode.h) are compiled as host C++ by g++ through tests/host/escha_host_platform.h.
The compile test at the end needs the clang-22 route and FAILS without it unless
ESCHA_JIT_SKIP_AMD=1 (like tests/test_amd_toolchain.py).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
import torch

from escha_jit import reference
from escha_jit.trellis import all_rate_codebooks, position_to_rc, tile_words

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(REPO, "templates", "include")
HOST = os.path.join(REPO, "tests", "host")


# ---------------------------------------------------------------- AMD's documented layout

def doc_ab_reg(k: int) -> tuple[int, int]:
    """(VGPR, 16-bit half) of A[.][k] / B[k][.] (element -> register form)."""
    return 2 * (k // 8) + (k // 2) % 2, k % 2


def doc_ab_lane(k: int, i_or_j: int) -> int:
    return 16 * ((k // 4) % 2) + i_or_j


def doc_ab_k(lane: int, vgpr: int, half: int) -> int:
    """k of the A/B element in (lane, VGPR, half) (register -> element form)."""
    return 8 * (vgpr // 2) + 4 * (lane // 16) + 2 * (vgpr % 2) + half


def doc_d(lane: int, vgpr: int) -> tuple[int, int]:
    """(i, j) = (row m, column n) of D held in VGPR `vgpr` of `lane`."""
    return 8 * (lane // 16) + vgpr, lane % 16


def doc_d_reg_lane(i: int, j: int) -> tuple[int, int]:
    return i % 8, 16 * (i // 8) + j


def rdna3_d(lane: int, vgpr: int) -> tuple[int, int]:
    return 2 * vgpr + lane // 16, lane % 16


def fmt_rc(p: int) -> tuple[int, int]:
    """FORMAT.md section 4, written out again."""
    L, j = p // 8, p % 8
    return 2 * (L % 4) + (j % 2) + 8 * ((j // 2) % 2), L // 4 + 8 * (j // 4)


# ---------------------------------------------------------------- the host build

def host_cxx() -> str:
    for c in (os.environ.get("ESCHA_JIT_HOST_CXX"), "g++", "c++", "clang++"):
        if c and shutil.which(c):
            return c
    pytest.fail("no host C++ compiler (g++, c++ or clang++; or set ESCHA_JIT_HOST_CXX)")


@functools.lru_cache(maxsize=None)
def host_binary() -> str:
    out = os.path.join(tempfile.mkdtemp(prefix="escha_amd_host_"), "amd_layout_host")
    cmd = [host_cxx(), "-std=c++17", "-O1", "-fno-strict-aliasing", "-DESCHA_HOST",
           "-DESCHA_INDEX_FN=constexpr inline", f"-I{INCLUDE}", f"-I{HOST}",
           os.path.join(HOST, "amd_layout_host.cpp"), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"host build failed:\n{' '.join(cmd)}\n{r.stderr}"
    return out


@functools.lru_cache(maxsize=None)
def layout() -> dict:
    r = subprocess.run([host_binary(), "layout"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def host_decode(K: float, cb_id: int, words: np.ndarray) -> dict:
    r = subprocess.run([host_binary(), "decode", str(int(round(2 * K))), str(cb_id)],
                       input=" ".join(f"{int(w):x}" for w in words), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def lanes() -> list[dict]:
    return layout()["lanes"]


# ---------------------------------------------------------------- (0) the transcription itself

def test_documented_layout_is_self_consistent_and_not_rdna3():
    # element -> register and register -> element forms agree; every (lane, VGPR, half) is used once
    seen = set()
    for k in range(16):
        for ij in range(16):
            vgpr, half = doc_ab_reg(k)
            lane = doc_ab_lane(k, ij)
            assert doc_ab_k(lane, vgpr, half) == k and lane % 16 == ij
            seen.add((lane, vgpr, half))
    assert len(seen) == 32 * 4 * 2
    for i in range(16):
        for j in range(16):
            vgpr, lane = doc_d_reg_lane(i, j)
            assert doc_d(lane, vgpr) == (i, j)
    assert any(doc_d(l, r) != rdna3_d(l, r) for l in range(32) for r in range(8))


# ---------------------------------------------------------------- (b) accumulators = documented D

def test_acc_row_col_match_documented_d_layout():
    for L in lanes():
        for i in range(8):
            assert (L["acc_row"][i], L["acc_col"][i]) == doc_d(L["lane"], i), (L["lane"], i)
    cells = {(L["acc_row"][i], L["acc_col"][i]) for L in lanes() for i in range(8)}
    assert len(cells) == 256


# ---------------------------------------------------------------- (c) A operand

def test_a_layout_rows_and_contiguous_k():
    for L in lanes():
        l = L["lane"]
        assert L["a_row"] == l % 16                                  # documented: A row = lane % 16
        assert L["a_k"] == [8 * (l // 16) + e for e in range(8)]    # one 16-byte load, as fused.h passes
    # our k labels are a relabelling of the documented k shared by A and B (see test below)


def test_k_relabelling_is_one_bijection_shared_by_a_and_b():
    """Element e of a lane's fragment is (VGPR e//2, half e%2). Whatever k the hardware gives it, A
    and B must carry the SAME logical k there; then D = sum over k is unchanged."""
    hw_to_ours_a, hw_to_ours_b = {}, {}
    for L in lanes():
        l = L["lane"]
        for e in range(8):
            hw = doc_ab_k(l, e // 2, e % 2)
            assert hw_to_ours_a.setdefault(hw, L["a_k"][e]) == L["a_k"][e]
            assert hw_to_ours_b.setdefault(hw, L["b_k"][e]) == L["b_k"][e]
    assert hw_to_ours_a == hw_to_ours_b
    assert sorted(hw_to_ours_a) == list(range(16)) and sorted(hw_to_ours_a.values()) == list(range(16))


def simulate_wmma(afrag: np.ndarray, bfrag: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The documented semantics: afrag/bfrag [lane][8 halves], c [lane][8 VGPRs] -> D [lane][8]."""
    A = np.zeros((16, 16), np.int64)
    B = np.zeros((16, 16), np.int64)
    for i in range(16):
        for k in range(16):
            vgpr, half = doc_ab_reg(k)
            A[i, k] = afrag[doc_ab_lane(k, i), 2 * vgpr + half]
            B[k, i] = bfrag[doc_ab_lane(k, i), 2 * vgpr + half]
    D = A @ B
    out = np.zeros_like(c)
    for l in range(32):
        for r in range(8):
            i, j = doc_d(l, r)
            out[l, r] = c[l, r] + D[i, j]
    return out


def test_fragments_through_documented_wmma_give_x_times_w():
    rng = np.random.default_rng(5)
    X = rng.integers(-50, 50, (16, 16))
    W = rng.integers(-50, 50, (16, 16))
    af = np.zeros((32, 8), np.int64)
    bf = np.zeros((32, 8), np.int64)
    for L in lanes():
        l = L["lane"]
        for e in range(8):
            af[l, e] = X[L["a_row"], L["a_k"][e]]
            bf[l, e] = W[L["b_k"][e], L["b_n"][e]]
    d = simulate_wmma(af, bf, np.zeros((32, 8), np.int64))
    Y = np.zeros((16, 16), np.int64)
    for L in lanes():
        for i in range(8):
            Y[L["acc_row"][i], L["acc_col"][i]] = d[L["lane"], i]
    np.testing.assert_array_equal(Y, X @ W)


# ---------------------------------------------------------------- (a) B operand and positions

def test_b_lane_holds_documented_column_and_positions_land_per_format():
    for p in range(256):
        assert tuple(layout()["fmt"][p]) == fmt_rc(p) == position_to_rc(p)
    used = set()
    for L in lanes():
        l = L["lane"]
        for e in range(8):
            assert L["b_n"][e] == l % 16                            # documented: B column = lane % 16
            p = L["b_pos"][e]
            assert fmt_rc(p) == (L["b_k"][e], L["b_n"][e]), (l, e, p)
            used.add(p)
    assert used == set(range(256))


def test_shuffle_route_indices_deliver_the_b_layout():
    """Round t: lane l reads lane xchg_src_lane(l, t), which sends its NVIDIA-order pair
    xchg_send_pair(src, t); l keeps it as VGPR xchg_dst_reg(l, t). Pair q of lane L holds positions
    8L+2q, 8L+2q+1. The result must be positions b_pos(l, 2r), b_pos(l, 2r+1) in VGPR r."""
    for L in lanes():
        l = L["lane"]
        got = {}
        for t in range(4):
            src = L["xchg_src_lane"][t]
            q = lanes()[src]["xchg_send_pair"][t]
            got[L["xchg_dst_reg"][t]] = (8 * src + 2 * q, 8 * src + 2 * q + 1)
        assert got == {r: (L["b_pos"][2 * r], L["b_pos"][2 * r + 1]) for r in range(4)}, l
    for t in range(4):                                              # every round is a permutation
        assert sorted(L["xchg_src_lane"][t] for L in lanes()) == list(range(32))


CASES = [(K, cb) for K, cb in all_rate_codebooks()]


@pytest.mark.parametrize("K,cb", CASES, ids=[f"K{K:g}_{cb}" for K, cb in CASES])
def test_host_decoders_match_reference_tile(K, cb):
    """The decoders the gfx12 kernel runs, executed per lane on the CPU: every lane's 8 fp16 values
    are bit-identical to the reference decode at (b_k, b_n), for the direct route and the shuffle
    route; the NVIDIA-order decode lands at FORMAT.md's (row, col), with the state cut's one-word
    shifts as shifts and as multiplies (LaneStream::states<ON_MUL>)."""
    cb_id = {"3inst": 0, "mcg": 1, "mul1": 2}[cb]
    for seed in range(3):
        rng = np.random.default_rng(1000 * seed + int(4 * K) + cb_id)
        code16 = rng.integers(0, 1 << 16, tile_words(K), dtype=np.int64)
        if seed == 2:
            code16[:] = np.arange(tile_words(K))                  # FORMAT.md's worked example pattern
        words = code16[0::2] | (code16[1::2] << 16)
        code = torch.from_numpy(code16.astype(np.uint16).view(np.int16).reshape(1, 1, -1).copy())
        ref = reference.reconstruct(code, K, cb).view(torch.int16).numpy().astype(np.uint16)
        out = host_decode(K, cb_id, words)
        direct = np.zeros((16, 16), np.uint16)
        nv = np.zeros((16, 16), np.uint16)
        nv_mul = np.zeros((16, 16), np.uint16)
        shuf = np.zeros((16, 16), np.uint16)
        for L, S in zip(out["lanes"], out["shuffle"]):
            l = L["lane"]
            for e in range(8):
                k, n = lanes()[l]["b_k"][e], lanes()[l]["b_n"][e]
                direct[k, n] = L["direct"][e]
                shuf[k, n] = S[e]
                r, c = fmt_rc(8 * l + e)
                nv[r, c] = L["nv"][e]
                nv_mul[r, c] = L["nv_mul"][e]
        np.testing.assert_array_equal(nv, ref, err_msg="NVIDIA-order decode (host shim) vs reference")
        np.testing.assert_array_equal(nv_mul, ref, err_msg="NVIDIA-order decode, shifts as multiplies, vs reference")
        np.testing.assert_array_equal(direct, ref, err_msg="WMMA direct route vs reference")
        np.testing.assert_array_equal(shuf, ref, err_msg="WMMA shuffle route vs reference")


def test_direct_route_word_budget():
    """NW raw words per lane per tile (what fused.h loads) and the bit span, per rate: the span is
    25K+16 bits (positions p0..p0+25), so at K=4 a lane loads 5 words (NVIDIA order: 3)."""
    expect_nw = {}
    for K in (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0):
        out = host_decode(K, 2, np.zeros(tile_words(K) // 2, np.int64))
        expect_nw[K] = out["NW"]
        assert out["NW"] <= tile_words(K) // 2 or out["NW"] <= 8
        for L in out["lanes"]:
            assert 0 <= L["rsh"] <= 31 and len(L["words"]) == out["NW"]
    assert expect_nw[4.0] == 5


# ---------------------------------------------------------------- gfx1201 compiles of the fused kernel

COMPILE_CASES = [(4.0, "mcg", 1), (4.0, "mul1", 1), (2.0, "3inst", 16), (2.5, "mul1", 4), (8.0, "mcg", 128),
                 (1.0, "mcg", 100)]


@pytest.fixture(scope="module")
def clang_amd():
    from test_amd_toolchain import require_clang_amd
    return require_clang_amd()


@pytest.mark.parametrize("K,cb,M", COMPILE_CASES, ids=[f"K{K:g}_{cb}_M{M}" for K, cb, M in COMPILE_CASES])
def test_fused_gfx1201_isa(clang_amd, K, cb, M):
    from escha_jit.kernels import fused
    from escha_jit.offline import check_code_object
    from escha_jit.render import include_dir, render
    from escha_jit.toolchain import amd_elf
    spec = fused.spec_for("gfx1201", K, cb, "f16", "f16", fused.default_config(M, "amd"))
    co = clang_amd.compile(render(spec, fused.render_extra(spec)), "gfx1201", ["-O3"],
                           name=spec.kernel_name() + ".hip", include_dirs=[include_dir()])
    assert check_code_object(spec, co.binary, co.resources) == []
    info = amd_elf.inspect_hsaco(co.binary)
    k = info["kernels"][spec.kernel_name()]
    assert info["target"] == "gfx1201" and k["wavefront_size"] == 32
    assert k["vgpr_spill_count"] == 0 and k["sgpr_spill_count"] == 0
    assert k["private_segment_fixed_size"] == 0 and k["uses_dynamic_stack"] is False
    asm = amd_elf.disassemble(co.binary, "gfx1201")
    assert "v_wmma_f32_16x16x16_f16" in asm
    assert "scratch_" not in asm and "buffer_store" not in asm
    # the direct route moves nothing across lanes in the decode
    import importlib.util
    spec_l = importlib.util.spec_from_file_location("amd_inner_loop", os.path.join(REPO, "scripts", "amd_inner_loop.py"))
    mod = importlib.util.module_from_spec(spec_l)
    spec_l.loader.exec_module(mod)
    insns = mod.parse(asm)
    lo, hi = mod.inner_loop(insns)
    body = [x["mnemonic"] for x in insns[lo:hi + 1]]
    assert "ds_bpermute_b32" not in body
    cfg = fused.default_config(M, "amd")
    assert body.count("v_wmma_f32_16x16x16_f16") == cfg.rows_per_stage * cfg.m_tiles * (8 // cfg.warps)
    assert "v_mul_lo_u32" not in body            # codebook.h ESCHA_AMD_MUL24: full-rate 24-bit multiplies


def test_registry_ships_fused_for_gfx1201_within_lds():
    from escha_jit.kernels import fused
    from escha_jit.kernels.registry import AMD_LDS_BYTES, shipped_specs
    specs = [s for s, _ in shipped_specs("gfx1201") if s.op == "fused"]
    assert specs and all(s.arch == "gfx1201" for s in specs)
    assert {s.params["m_tiles"] for s in specs} == {1, 2, 4, 8}     # 16 m tiles cannot fit 64 KiB of LDS
    for s in specs:
        cfg = fused.FusedConfig(**s.params)
        ms = [M for M in range(1, fused.MAX_M + 1) if fused.default_config(M, "amd") == cfg]
        assert fused.smem_layout(cfg, s.K, min(ms), 128).total <= AMD_LDS_BYTES, s


def test_amd_mul24_split_is_exact():
    """codebook.h state_mul on AMD (ESCHA_AMD_MUL24): s*C = s*(C mod 2^24) + (s*(C>>24) << 24) mod 2^32,
    with each product the low 32 bits of a 24x24-bit multiply (v_mul_u32_u24), for every 16-bit state."""
    s = np.arange(1 << 16, dtype=np.uint64)
    for C in (89226354, 0xCBAC1FED, 0x83DCD12D):
        lo, hi = C & 0xFFFFFF, C >> 24
        m24 = lambda a, b: ((a & 0xFFFFFF) * (b & 0xFFFFFF)) & 0xFFFFFFFF   # noqa: E731
        got = (m24(s, np.uint64(lo)) + ((m24(s, np.uint64(hi)) << np.uint64(24)) & np.uint64(0xFFFFFFFF))) \
            & np.uint64(0xFFFFFFFF)
        np.testing.assert_array_equal(got, (s * np.uint64(C)) & np.uint64(0xFFFFFFFF))


# ---------------------------------------------------------------- the int8 route's iu8 WMMA
# v_wmma_i32_16x16x16_iu8, wave32 (same calculator, `--instruction v_wmma_i32_16x16x16_iu8
# --register-layout --A-matrix / --B-matrix / --D-matrix`), transcribed:
#     A[i][k]:  GPR floor(k/4)%2, bits [8*(k%4)+7 : 8*(k%4)], lane 16*floor(k/8) + i
#     B[k][j]:  GPR floor(k/4)%2, bits [8*(k%4)+7 : 8*(k%4)], lane 16*floor(k/8) + j
#     D[i][j]:  GPR i%8, lane 16*floor(i/8) + j          (as the f16 instruction's)
# i.e. both operands map (lane half h, GPR r, byte b) to the SAME k = 8h + 4r + b, which is what
# lets matunit_wmma.h relabel k: VGPR r of lane (column n, half h) in instruction t carries the
# 4 hash bytes of weight row 8h + 2t + r, and the A word of that lane the token's int8 value
# replicated 4 times.

def iu8_a_position(i: int, k: int) -> tuple[int, int, int]:
    return 16 * (k // 8) + i, (k // 4) % 2, k % 4          # lane, GPR, byte


def iu8_b_position(k: int, j: int) -> tuple[int, int, int]:
    return 16 * (k // 8) + j, (k // 4) % 2, k % 4


def simulate_wmma_iu8(a_words: np.ndarray, b_words: np.ndarray) -> np.ndarray:
    """D [16, 16] of one v_wmma_i32_16x16x16_iu8 (A signed, B unsigned) from [32, 2] u32 VGPRs."""
    def byte(w, b, signed):
        v = (int(w) >> (8 * b)) & 0xFF
        return v - 256 if signed and v >= 128 else v
    A = np.array([[byte(a_words[lane, r], b, True) for k in range(16) for lane, r, b in [iu8_a_position(i, k)]]
                  for i in range(16)])
    B = np.array([[byte(b_words[lane, r], b, False) for j in range(16) for lane, r, b in [iu8_b_position(k, j)]]
                  for k in range(16)])
    return A @ B


def test_iu8_layout_a_and_b_share_k():
    for k in range(16):
        la, ra, ba = iu8_a_position(0, k)
        lb, rb, bb = iu8_b_position(k, 0)
        assert (la // 16, ra, ba) == (lb // 16, rb, bb)


def test_int8_route_relabelling_through_documented_iu8_wmma():
    """matunit_wmma.h's int8 route: per tile, instructions t = 0..3 with lane (n, h) VGPR r = the
    hash of weight row 8h + 2t + r, column n, and A word = q[token][8h + 2t + r] * 0x01010101.
    Summed over t, D[m][n] must be sum_k q[m][k] * bytesum(hash[k][n]) for every token m."""
    rng = np.random.default_rng(7)
    q = rng.integers(-127, 128, (16, 16))                       # tokens x k
    h = rng.integers(0, 2 ** 32, (16, 16), dtype=np.uint64)     # k x n: mul1 hashes
    bytesum = sum(((h >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(np.int64) for b in range(4))
    D = np.zeros((16, 16), np.int64)
    for t in range(4):
        a = np.zeros((32, 2), np.uint64)
        bw = np.zeros((32, 2), np.uint64)
        for lane in range(32):
            col_or_row, half = lane % 16, lane // 16
            for r in range(2):
                k = 8 * half + 2 * t + r
                a[lane, r] = (int(q[col_or_row, k]) & 0xFF) * 0x01010101
                bw[lane, r] = h[k, col_or_row]
        D += simulate_wmma_iu8(a, bw)
    np.testing.assert_array_equal(D, q @ bytesum)

// The matrix unit on AMD gfx12 (RDNA4, wave32): v_wmma_f32_16x16x16_f16, fp16 in, fp32 accumulate,
// one instruction per 16x16x16 step. The interface is matunit_mma.h's (what fused.h uses from
// escha::mu); the lane layouts and the trellis-to-B-fragment decoding are in wmma_layout.h and
// wmma_decode.h (vendor-neutral, so they are also tested on the CPU and on NVIDIA).
#pragma once
#include "escha/platform.h"
#include "escha/wmma_layout.h"
#include "escha/wmma_decode.h"

namespace escha {
namespace mu {

typedef _Float16 half8_t __attribute__((ext_vector_type(8)));
typedef float float8_t __attribute__((ext_vector_type(8)));

constexpr int ACC = 8;                      // fp32 accumulators per lane per 16x16 output tile
struct AFrag { half8_t v; };                // x[row l%16][k0 + 8(l/16) .. +7] (wmma_layout.h)
struct BFrag { half2_t h[4]; };             // W[k0 + 8(l/16) + 2r .. +1][col l%16], r = 0..3

// A tile (16x16 fp16) from LDS: each lane passes the LDS address of ITS 8 halves, row l % 16,
// columns k0 + 8(l/16) .. +7 (16-byte aligned): one ds_load_b128. With B holding the same 8 k of
// the tile in the same VGPR order this is the hardware A layout up to a K relabelling that both
// operands share (wmma_layout.h explains why D is unchanged).
ESCHA_DEVICE void load_a_rows(AFrag& a, u32 my_row_saddr) {
    a.v = __builtin_bit_cast(half8_t, lds128(my_row_saddr));
}

ESCHA_DEVICE void mma(float (&c)[ACC], const AFrag& a, const BFrag& b) {
    const half8_t bv = __builtin_shufflevector(__builtin_shufflevector(b.h[0], b.h[1], 0, 1, 2, 3),
                                               __builtin_shufflevector(b.h[2], b.h[3], 0, 1, 2, 3),
                                               0, 1, 2, 3, 4, 5, 6, 7);
    float8_t acc = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
    acc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a.v, bv, acc);
    #pragma unroll
    for (int i = 0; i < ACC; ++i) c[i] = acc[i];
}

// Row (m) and column (n) in the 16x16 output tile of accumulator i of this lane (D VGPR i).
ESCHA_DEVICE int acc_row(int lane, int i) { return wmma::acc_row(lane, i); }
ESCHA_DEVICE int acc_col(int lane, int i) { return wmma::acc_col(lane, i); }
// A lane's accumulators are one column (consecutive rows): runs of one column element.
constexpr int ACC_RUN = 1;
// No swapped fp16 route on gfx12 (FusedLinear static_asserts it; the int8 route is the unit's own).
constexpr bool HAS_SWAPPED = false;

// An A fragment of constants: element (row r, k) is the fp16 with bits f(r, k), in the labelling
// load_a_rows uses (row l % 16, k = 8 (l / 16) + e for half e: wmma_layout.h a_row / a_k).
template <typename F>
ESCHA_DEVICE AFrag a_frag_bits(int lane, F f) {
    u32 w[4];
    #pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int r = wmma::a_row(lane), k = wmma::a_k(lane, 2 * q);
        w[q] = (f(r, k) & 0xFFFFu) | (f(r, k + 1) << 16);
    }
    AFrag a;
    a.v = __builtin_bit_cast(half8_t, w);
    return a;
}

// ---- int8 activations (the opt-in fused_i8 kernels; mul1 codebook only)
// v_wmma_i32_16x16x16_iu8: A signed 8-bit (the token's int8 value replicated in the 4 bytes of a
// word), B unsigned 8-bit (the 4 bytes of a weight's mul1 hash), s32 accumulate without clamping.
// One instruction takes 2 words per lane of each operand: 2 weights of the lane's column. The
// gfx12 8-bit A and B layouts map (lane half h, VGPR r, byte b) to the same hardware k = 8h + 4r + b
// (AMD Matrix Instruction Calculator, rdna4 v_wmma_i32_16x16x16_iu8; tests/test_amd_layout.py
// runs this relabelling through the documented layout), so the argument of wmma_layout.h holds:
// instruction t (0..3) of a tile gives VGPR r of lane l the weight of row 8(l/16) + 2t + r and the
// x element of that row.
typedef int int2_t __attribute__((ext_vector_type(2)));
typedef int int8v_t __attribute__((ext_vector_type(8)));
struct XFragI8 { u32 v[8]; };                     // x words of token l%16, slab k 8(l/16) .. +7
struct BFragI8 { u32 w[8]; };                     // hashes of elements e = 0..7 (rows 8(l/16) + e)

ESCHA_DEVICE constexpr int i8_slot(int k) { return k; }      // natural order inside the slab
ESCHA_DEVICE int i8_x_row(int lane, int /*part*/) { return lane & 15; }
ESCHA_DEVICE int i8_x_word(int lane, int part) { return 8 * (lane >> 4) + 4 * part; }

ESCHA_DEVICE void load_x_i8(XFragI8& x, u32 addr0, u32 addr1) {
    const u32v4 p0 = lds128(addr0), p1 = lds128(addr1);
    x.v[0] = p0.x; x.v[1] = p0.y; x.v[2] = p0.z; x.v[3] = p0.w;
    x.v[4] = p1.x; x.v[5] = p1.y; x.v[6] = p1.z; x.v[7] = p1.w;
}

ESCHA_DEVICE void mma_i8(int (&c)[ACC], const XFragI8& x, const BFragI8& b) {
    int8v_t acc = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
    #pragma unroll
    for (int t = 0; t < 4; ++t) {
        const int2_t av = {(int)x.v[2 * t], (int)x.v[2 * t + 1]};
        const int2_t bv = {(int)b.w[2 * t], (int)b.w[2 * t + 1]};
        acc = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, av, false, bv, acc, false);
    }
    #pragma unroll
    for (int i = 0; i < ACC; ++i) c[i] = acc[i];
}

// The swapped fp16 route is NVIDIA's (fused.h static_asserts it away on gfx12, where the f16 WMMA
// would take 2 instructions per tile for it); declared so the shared main loop names it.
template <typename C>
ESCHA_DEVICE void mma_sw(C&, const XFragI8&, const BFragI8&) {
    static_assert(sizeof(C) == 0, "no swapped fp16 route on gfx12");
}

// Token and output column of accumulator i: the f32 WMMA's D layout.
ESCHA_DEVICE int i8_acc_row(int lane, int i) { return wmma::acc_row(lane, i); }
ESCHA_DEVICE int i8_acc_col(int lane, int i) { return wmma::acc_col(lane, i); }

// The dot route (FusedConfig.dot, M = 1; the gfx12 default there): v_dot4_i32_iu8 per weight
// (1 VALU cycle) instead of 4 WMMA per tile (~4 cycles per weight of the matrix unit at M = 1,
// which does not co-execute with VALU). A lane's 8 elements are rows 8h + e of column l % 16:
// x words e of its two loads (token 0); lanes l and l ^ 16 share the column; lane h = 0 owns
// D[0][col] as accumulator 0.
constexpr int I8_DOT_COLS = 1;
constexpr int I8_DOT_REDUCE[1] = {16};
ESCHA_DEVICE constexpr int i8_dot_col(int /*e*/) { return 0; }
ESCHA_DEVICE constexpr int i8_dot_word(int e) { return e; }
ESCHA_DEVICE int i8_dot_acc(int lane, int /*c*/) { return (lane >> 4) == 0 ? 0 : -1; }
ESCHA_DEVICE u32 i8_dot_x(const XFragI8& x, int w) { return x.v[w]; }

// Per-lane decode state (computed once per kernel): which raw words of a tile this lane needs.
template <int K2>
struct Decoder {
    using Route = wmma::BDecoder<K2>;
    Route rt;
    ESCHA_DEVICE explicit Decoder(int lane) : rt(lane) {}

    static constexpr int NW = Route::NW;
    // Word q of this lane's raw words of a tile starting at word 0 of `tiles`.
    ESCHA_DEVICE int word(int q) const {
        if constexpr (ESCHA_WMMA_B_ROUTE == 1) return rt.ls.word[q];
        else return rt.word[q];
    }

    // Decode this lane's part of one tile from its NW raw words, in the WMMA B layout.
    template <int CB>
    ESCHA_DEVICE void decode(BFrag& b, const u32 (&w)[NW], u32 mask) const { rt.template decode<CB>(w, b.h, mask); }

    // The mul1 hashes of this lane's 8 elements (the int8 route's B operand; direct route only).
    ESCHA_DEVICE void hashes(u32 (&h)[8], const u32 (&w)[NW]) const {
        static_assert(ESCHA_WMMA_B_ROUTE == 0, "the int8 route decodes in the WMMA order directly");
        u32 s[8];
        rt.states(w, s);
        #pragma unroll
        for (int e = 0; e < 8; ++e) h[e] = mul1_hash(s[e]);
    }
};

}  // namespace mu
}  // namespace escha

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
};

}  // namespace mu
}  // namespace escha

// The matrix unit on NVIDIA: mma.m16n8k16 (fp16 in, fp32 accumulate), used as 16x16x16 steps.
// The trellis position order (FORMAT.md section 4) IS this unit's B layout: lane L decodes
// positions 8L..8L+7 straight into its two B fragments, no re-layout.
#pragma once
#include "escha/platform.h"
#include "escha/codebook.h"
#include "escha/trellis.h"

namespace escha {
namespace mu {

constexpr int ACC = 8;                      // fp32 accumulators per lane per 16x16 output tile
struct AFrag { u32 r[4]; };
struct BFrag { half2_t h[4]; };             // {h0, h1}: n8 half 0, {h2, h3}: n8 half 1

// A tile (16x16 fp16) from shared memory, each lane passing the shared address of its 8 halves:
// (row l % 16, column k0 + 8 * (l / 16)). Rows may point anywhere (e.g. a zero row).
ESCHA_DEVICE void load_a_rows(AFrag& a, u32 my_row_saddr) { load_a_frag(a.r, my_row_saddr); }

ESCHA_DEVICE void mma(float (&c)[ACC], const AFrag& a, const BFrag& b) {
    float (&c0)[4] = *reinterpret_cast<float (*)[4]>(&c[0]);
    float (&c1)[4] = *reinterpret_cast<float (*)[4]>(&c[4]);
    mma_16816(c0, a.r, bit_cast<u32>(b.h[0]), bit_cast<u32>(b.h[1]));
    mma_16816(c1, a.r, bit_cast<u32>(b.h[2]), bit_cast<u32>(b.h[3]));
}

// Row (m) and column (n) in the 16x16 output tile of accumulator i of this lane.
ESCHA_DEVICE int acc_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
ESCHA_DEVICE int acc_col(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }

// Per-lane decode state (computed once per kernel): where this lane's positions sit in a tile.
template <int K2>
struct Decoder {
    LaneStream<K2> ls;
    ESCHA_DEVICE explicit Decoder(int lane) : ls(lane) {}

    static constexpr int NW = LaneStream<K2>::NW;
    // Word q of this lane's raw words of a tile starting at word 0 of `tiles`.
    ESCHA_DEVICE int word(int q) const { return ls.word[q]; }

    // Decode this lane's part of one tile from its NW raw words.
    template <int CB>
    ESCHA_DEVICE void decode(BFrag& b, const u32 (&w)[NW], u32 mask) const { decode_lane<K2, CB>(w, ls, b.h, mask); }
};

}  // namespace mu
}  // namespace escha

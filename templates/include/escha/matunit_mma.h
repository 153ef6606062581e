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
// Accumulators i .. i + ACC_RUN - 1 (i a multiple of ACC_RUN) are consecutive columns of one row.
constexpr int ACC_RUN = 2;
// The swapped fp16 route (mma_sw below) exists on this unit.
constexpr bool HAS_SWAPPED = true;

// An A fragment of constants: element (row r, k) is the fp16 with bits f(r, k) (r, k = 0..15).
// Register q holds (row g + 8 (q & 1), k 2t + 8 (q >> 1) + {0, 1}), g = lane / 4, t = lane % 4.
template <typename F>
ESCHA_DEVICE AFrag a_frag_bits(int lane, F f) {
    AFrag a;
    const int g = lane >> 2, t = lane & 3;
    #pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int r = g + 8 * (q & 1), k = 2 * t + 8 * (q >> 1);
        a.r[q] = (f(r, k) & 0xFFFFu) | (f(r, k + 1) << 16);
    }
    return a;
}

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

    // The swapped fp16 route's operand: two-half words of this lane's 8 positions whose halves
    // sum (exactly, in the unit) to the weight (LCG codebooks: y = (s*a (+b) & mask) ^ 0x3B603B60)
    // or to an affine image of it (mul1: codebook.h mul1_swap_word).
    template <int CB>
    ESCHA_DEVICE void swap_words(u32 (&y)[8], const u32 (&w)[NW], u32 mask) const {
        u32 s[8];
        ls.template states<CB != CB_MUL1>(w, s);
        #pragma unroll
        for (int j = 0; j < 8; ++j) y[j] = CB == CB_MUL1 ? mul1_swap_word(s[j]) : lcg_bits<CB>(s[j], mask);
    }

    // The mul1 hashes of this lane's 8 positions (the int8 route's B operand).
    ESCHA_DEVICE void hashes(u32 (&h)[8], const u32 (&w)[NW]) const {
        u32 s[8];
        ls.states(w, s);
        #pragma unroll
        for (int j = 0; j < 8; ++j) h[j] = mul1_hash(s[j]);
    }
};

// ---- int8 activations (the opt-in fused_i8 kernels; mul1 codebook only)
// mma.m16n8k32 u8 x s8 -> s32 with the operands swapped (D^T = W^T x^T): the WEIGHTS are the
// 16-row A operand (16 output columns of a trellis tile) and 8 tokens are the n8 B operand, so a
// decode-sized M <= 8 fills the unit with no padding and a tile takes 2 instructions per 8 tokens.
// A mul1 weight is affine in the byte sum of its 32-bit hash h = s * 0x83DCD12D, so the four bytes
// of h ARE the operand: one weight fills 4 consecutive k (a "k group") and the token's int8 value
// is replicated in the 4 bytes of its word. Relabelling (both operands alike, so the sum over k
// is unchanged): in the "lo" instruction k group G = t <-> tile row 2t, G = 4 + t <-> row 2t + 1
// (t = lane % 4), in the "hi" one rows 8 + 2t, 9 + 2t. A lane's hashes of positions j = 0..7
// (pos_row/pos_col: rows 2t + (j&1) + 8((j>>1)&1), columns g + 8(j>>2), g = lane / 4) then form
//   lo: A = {h0, h4, h1, h5} (rows g, g+8 of W^T at G = t, then at G = 4 + t), hi: {h2, h6, h3, h7}
// and its token words {row 2t, 2t+1, 8+2t, 9+2t} of token g give B = {w0, w1} (lo), {w2, w3} (hi).
struct XFragI8 { u32 v[1][4]; };                  // token group 0..7 of the m tile (M <= 8: the only one)
struct BFragI8 { u32 w[8]; };                     // hashes of positions j = 0..7

// Where the prologue stores x element k (0..15 of a 16-k slab): lane t = l%4 then loads the
// words of rows 2t, 2t+1, 8+2t, 9+2t with one 16-byte load.
ESCHA_DEVICE constexpr int i8_slot(int k) { return 4 * ((k >> 1) & 3) + 2 * (k >> 3) + (k & 1); }
// This lane's x loads of an m tile (token row inside the tile, first word inside the slab): part 0
// is token g of the group 0..7 that the word routes compute (M <= 8); part 1 (tokens 8..15) is
// never loaded here - gfx12's unit takes the slab's second k half there.
ESCHA_DEVICE int i8_x_row(int lane, int part) { return (lane >> 2) + 8 * part; }
ESCHA_DEVICE int i8_x_word(int lane, int /*part*/) { return 4 * (lane & 3); }

ESCHA_DEVICE void load_x_i8(XFragI8& x, u32 addr0, u32 /*addr1*/) { lds128(x.v[0], addr0); }

// One trellis tile through the swapped unit: the relabelling above, for any instruction `op`
// (d, A quad, b0, b1) whose k groups pair with 32-bit words. c[i], i < 4: accumulator i of the
// 16x8 D^T tile of tokens 0..7; c[4..7] (tokens 8..15) stay zero: the word routes serve M <= 8
// (kernels/fused.py SWAP_MAX_M, I8_MAX_M).
template <typename T, typename Op>
ESCHA_DEVICE void mma_swapped(T (&c)[ACC], const XFragI8& x, const BFragI8& w, Op op) {
    const u32 lo[4] = {w.w[0], w.w[4], w.w[1], w.w[5]}, hi[4] = {w.w[2], w.w[6], w.w[3], w.w[7]};
    T (&c0)[4] = *reinterpret_cast<T (*)[4]>(&c[0]);
    op(c0, lo, x.v[0][0], x.v[0][1]);
    op(c0, hi, x.v[0][2], x.v[0][3]);
}

// The int8 route: u8 hash bytes x s8 token words, s32 sums.
ESCHA_DEVICE void mma_i8(int (&c)[ACC], const XFragI8& x, const BFragI8& b) {
    mma_swapped(c, x, b, [](int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) { mma_16832_u8s8(d, a, b0, b1); });
}

// The swapped fp16 route (FusedConfig.swap: NVIDIA, M <= 8): the same operand
// swap and relabelling with mma.m16n8k16 f16 -> f32, whose k groups are 2 halves instead of 4
// bytes: a weight's word y = {lo, hi} (the codebook's two fp16 halves, value lo + hi) fills one
// group, and the token's x word is the half2 {x, x}. No PRMT / HADD2 per weight, and the unit
// adds lo + hi without the fp16 rounding of the decoded weight (<= half an fp16 ulp apart).
ESCHA_DEVICE void mma_sw(float (&c)[ACC], const XFragI8& x, const BFragI8& y) {
    mma_swapped(c, x, y, [](float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) { mma_16816(d, a, b0, b1); });
}

// Token (row of y inside the m tile) and output column (inside the 16-column tile) of c[i]:
// D^T[col][token] with col = g (+8 for i&2), token = 2t + (i&1) (+8 for the second group).
ESCHA_DEVICE int i8_acc_row(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }
ESCHA_DEVICE int i8_acc_col(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }

// The dot route (FusedConfig.dot, M = 1): each hash j times the token's word of its row on the
// integer dot unit. A lane's 8 positions sit in 2 columns (g, g+8: j >> 2) and its 4 x words of
// a slab (load_x_i8's first load, token 0) are rows 2t, 2t+1, 8+2t, 9+2t: word j & 3. The lanes
// t = 0..3 of a group share the columns (xor-reduce over 1, 2); lane t = 0 then owns D^T[col][0]
// as accumulator 0 (column g) and 2 (column g + 8).
constexpr int I8_DOT_COLS = 2;
constexpr int I8_DOT_REDUCE[2] = {1, 2};
ESCHA_DEVICE constexpr int i8_dot_col(int j) { return j >> 2; }
ESCHA_DEVICE constexpr int i8_dot_word(int j) { return j & 3; }
ESCHA_DEVICE int i8_dot_acc(int lane, int c) { return (lane & 3) == 0 ? 2 * c : -1; }
ESCHA_DEVICE u32 i8_dot_x(const XFragI8& x, int w) { return x.v[0][w]; }

}  // namespace mu
}  // namespace escha

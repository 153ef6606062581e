// Trellis tiles (FORMAT.md sections 3-4): where each lane's eight states sit in a tile's ring.
//
// A tile is W = 16*K uint16 words = R = 256*K ring bits, read as little-endian uint32 words u[t]
// whose bits are consumed MSB first. Position p = 8*L + j belongs to lane L (j = 0..7, the
// mma.m16n8k16 B-fragment order); its state is the 16 ring bits ending at E(p) (cyclic).
// Everything that depends on the lane but not on the tile is computed once (LaneWindows).
#pragma once
#include "escha/platform.h"

namespace escha {

template <int K2>    // K2 = 2*K: 2..16
struct Rate {
    static constexpr int KA = K2 / 2;
    static constexpr bool HALF = (K2 & 1) != 0;
    static constexpr int W16 = 8 * K2;          // uint16 words per tile
    static constexpr int W32 = 4 * K2;          // uint32 words per tile
    static constexpr int R = 128 * K2;          // ring bits
    // E(p): exclusive end bit of position p
    static constexpr ESCHA_DEVICE int end(int p) { return HALF ? ((p + 1) * (2 * KA + 1)) / 2 : (p + 1) * KA; }
};

// Per-lane constants: the first of four consecutive (cyclic) words holding the lane's states,
// and for each of its 8 positions the word (0..2) and bit offset of its window within them.
template <int K2>
struct LaneWindows {
    int word0;         // first word index in the tile (0 .. W32-1)
    u32 sel[8];        // (word << 8) | offset
    ESCHA_DEVICE explicit LaneWindows(int lane) {
        using Rt = Rate<K2>;
        int s0 = Rt::end(8 * lane) - 16;
        s0 = s0 < 0 ? s0 + Rt::R : s0;
        word0 = s0 >> 5;
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            int s = Rt::end(8 * lane + j) - 16 - (word0 << 5);
            s = s < 0 ? s + Rt::R : s;
            sel[j] = ((u32)(s >> 5) << 8) | (u32)(s & 31);
        }
    }
};

// The 16-bit state whose window starts at bit `off` of word a (MSB first), continuing into b.
ESCHA_DEVICE u32 window16(u32 a, u32 b, u32 off) { return funnel_l(a, b, off) >> 16; }

// Decode one lane's 8 positions from its four words w[0..3] into four half2 (j pairs 01,23,45,67),
// i.e. the two B fragments (n8 halves) of an mma.m16n8k16: {h[0], h[1]} and {h[2], h[3]}.
template <int K2, int CB>
ESCHA_DEVICE void decode_lane(const u32 (&w)[4], const LaneWindows<K2>& lw, half2_t (&h)[4]) {
    u32 s[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        u32 a = lw.sel[j] >> 8, off = lw.sel[j] & 31u;
        u32 lo = a == 0 ? w[0] : a == 1 ? w[1] : w[2];
        u32 hi = a == 0 ? w[1] : a == 1 ? w[2] : w[3];
        s[j] = window16(lo, hi, off);
    }
    #pragma unroll
    for (int q = 0; q < 4; ++q) h[q] = decode2<CB>(s[2 * q], s[2 * q + 1]);
}

// Row and column inside the 16x16 tile of lane L's position j.
ESCHA_DEVICE int pos_row(int lane, int j) { return 2 * (lane & 3) + (j & 1) + 8 * ((j >> 1) & 1); }
ESCHA_DEVICE int pos_col(int lane, int j) { return (lane >> 2) + 8 * (j >> 2); }

}  // namespace escha

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

// Per-lane decoding of the 8 positions 8L..8L+7 of a tile.
//
// Relative to E(8L) - 16 (the first window's start) the 8 windows start at compile-time offsets
// C(j) = E(j) - E(0), the same for every lane (8L is even, so half rates repeat too). Per tile a
// lane loads the NW words covering its bits, aligns them once with NA funnel shifts by its own
// offset b (computed once per kernel), and then cuts every state out at a compile-time offset:
// no run-time selects in the hot loop.
template <int K2>
struct LaneStream {
    using Rt = Rate<K2>;
    static constexpr ESCHA_DEVICE int C(int j) { return Rt::end(j) - Rt::end(0); }
    static constexpr int SPAN = Rt::end(7) - Rt::end(0) + 16;       // bits covering the 8 windows
    static constexpr int NA = (SPAN + 31) / 32;                     // aligned words
    static constexpr ESCHA_DEVICE int start(int lane) {
        return (Rt::end(8 * lane) - 16 + Rt::R) % Rt::R;
    }
    static constexpr ESCHA_DEVICE int max_words() {
        int n = 0;
        for (int l = 0; l < 32; ++l) {
            int w = (start(l) % 32 + SPAN + 31) / 32;
            n = w > n ? w : n;
        }
        return n;
    }
    static constexpr int NW = max_words();                          // raw words loaded per tile
    static constexpr ESCHA_DEVICE bool uniform_offset() {          // same b for every lane?
        for (int l = 1; l < 32; ++l)
            if (start(l) % 32 != start(0) % 32) return false;
        return true;
    }
    static constexpr bool UNIFORM = uniform_offset();
    static constexpr int B0 = Rt::end(0) - 16 + Rt::R;              // lane 0's start (mod 32 below)

    int word[NW];      // word indices (cyclic) of this lane's raw words in the tile
    u32 b;             // bit offset of the first window inside word[0]

    ESCHA_DEVICE explicit LaneStream(int lane) {
        const int s0 = start(lane);
        b = (u32)(s0 & 31);
        #pragma unroll
        for (int q = 0; q < NW; ++q) word[q] = ((s0 >> 5) + q) % Rt::W32;
    }

    // The 8 states of this lane from its raw words w[0..NW-1]. With FMA_SHARE, every other
    // in-word window is cut out on the multiply pipe instead of the ALU pipe (the LCG codebooks
    // leave the multiply pipe half idle; mul1 fills it with IMAD + IDP4A already).
    template <bool FMA_SHARE>
    ESCHA_DEVICE void states(const u32 (&w)[NW], u32 (&s)[8]) const {
        u32 a[NA + 1];
        const u32 sh = UNIFORM ? (u32)(B0 % 32) : b;
        #pragma unroll
        for (int i = 0; i < NA; ++i) a[i] = i + 1 < NW ? funnel_l(w[i], w[i + 1], sh) : w[i] << sh;
        a[NA] = 0;
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int c = C(j), i = c / 32, o = c % 32;
            if (o == 0)
                s[j] = a[i] >> 16;
            else if (o == 16)
                s[j] = a[i] & 0xFFFFu;
            else if (FMA_SHARE && o < 16 && (j & 1))
                // on the multiply pipe (IMAD.SHL + IMAD.HI), keeping the ALU pipe for the rest:
                // (a << o) >> 16 == hi32((a << o) * 2^16)
                s[j] = mul_hi(a[i] << o, 1u << 16);
            else if (o < 16)
                s[j] = (a[i] >> (16 - o)) & 0xFFFFu;
            else
                s[j] = funnel_l(a[i], a[i + 1], (u32)o) >> 16;
        }
    }
};

// Decode one lane's 8 positions into four half2 (pairs j = 01, 23, 45, 67), i.e. the two B
// fragments (n8 halves) of an mma.m16n8k16: {h[0], h[1]} and {h[2], h[3]}.
template <int K2, int CB>
ESCHA_DEVICE void decode_lane(const u32 (&w)[LaneStream<K2>::NW], const LaneStream<K2>& ls, half2_t (&h)[4],
                             u32 mask = 0x8FFF8FFFu) {
    u32 s[8];
    ls.template states<CB != CB_MUL1>(w, s);
    #pragma unroll
    for (int q = 0; q < 4; ++q) h[q] = decode2<CB>(s[2 * q], s[2 * q + 1], mask);
}

// Row and column inside the 16x16 tile of lane L's position j.
ESCHA_DEVICE int pos_row(int lane, int j) { return 2 * (lane & 3) + (j & 1) + 8 * ((j >> 1) & 1); }
ESCHA_DEVICE int pos_col(int lane, int j) { return (lane >> 2) + 8 * (j >> 2); }

}  // namespace escha

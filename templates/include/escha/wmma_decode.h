// Trellis tile -> gfx12 WMMA B fragment (wmma_layout.h), vendor-neutral: this file compiles for
// gfx12 (where matunit_wmma.h uses it) and for NVIDIA (tests/test_amd_on_nvidia.py runs the very
// same decoders on an H200 and compares with the reference decode).
//
// Two routes, both giving lane l the 8 weights of column n = l%16, rows 8h..8h+7 (h = l/16):
//
// * WmmaStream (DEFAULT, "direct"): the lane decodes exactly its own 8 positions
//   p0 + {0,1, 8,9, 16,17, 24,25} (wmma_layout.h b_pos). They are not contiguous, but their bit
//   offsets from the lane's first window are compile-time constants (p0 is even, so half rates
//   repeat too), exactly as in LaneStream: per tile the lane aligns its words once by its own
//   offset (one v_alignbit_b32 per aligned word, run-time shift) and cuts the 8 states out at
//   fixed offsets. The price is a longer bit span: 25K+16 bits instead of 7K+16, i.e. more words
//   per lane (NW) and more aligned words (NA). No cross-lane traffic at all.
// * ShuffleDecoder ("shuffle"): decode the NVIDIA order (lane L: 8L..8L+7, contiguous bits, the
//   existing decode_lane) and move the 4 half2 pairs across lanes: 4 rounds of lane_gather
//   (ds_bpermute_b32) with XOR-butterfly register selects before (by L%4) and after (by the
//   receiving lane's c): by design 4 ds_bpermute + 16 v_cndmask per lane per tile (each round
//   needs a lane-dependent register on both sides), plus the LDS-crossbar round trips.
//
// Instruction counts, gfx1201 clang-22 -O3, inner loop of the fused kernel at K=4 mcg M=1 (4 waves x
// 2 tile columns x 8 tile rows = 16 tiles = 128 weights per lane per iteration), counted by
// scripts/amd_inner_loop.py (--route direct|shuffle):
//   direct : 1220 VALU, 80 ds_load_b32 (5 words per tile), 64 v_alignbit, 128 window cuts
//            (v_bfe_u32 / v_lshrrev), 16 v_wmma; 10.6 issued instructions per weight
//   shuffle: 1962 VALU of which 752 v_cndmask (47 per tile: the lane-dependent XOR selects on
//            both sides of the exchange), 64 ds_bpermute_b32, 48 ds_load_b32; 16.5 per weight
// (with the fused.h address change proposed in docs/AMD_ESTIMATE.md: 1065 vs 1888 VALU).
// So the direct route is cheaper by ~6 instructions per weight and keeps the LDS crossbar free;
// it is the default. ESCHA_WMMA_B_ROUTE=1 selects the shuffle route (kept: the NVIDIA test runs
// both lane by lane, and it is the fallback should a route ever need the NVIDIA order).
#pragma once
#include "escha/platform.h"
#include "escha/codebook.h"
#include "escha/trellis.h"
#include "escha/wmma_layout.h"

#ifndef ESCHA_WMMA_B_ROUTE
#define ESCHA_WMMA_B_ROUTE 0     // 0 direct, 1 shuffle
#endif

namespace escha {

#if defined(ESCHA_NVIDIA)
// The NVIDIA twin of platform_hip.h's lane_gather (ds_bpermute_b32): v of lane src.
ESCHA_DEVICE u32 lane_gather(u32 v, int src) { return __shfl_sync(0xffffffffu, v, src); }
#endif

namespace wmma {

// ---- the direct route: lane l decodes positions b_pos(l, 0..7)
template <int K2>
struct WmmaStream {
    using Rt = Rate<K2>;
    // bit offset of element e's window end from that of element 0 (= p0): E(p0+m) - E(p0), which
    // for even p0 is E(m) - E(0) at every rate
    static constexpr ESCHA_DEVICE int C(int e) { return Rt::end(pos_off(e)) - Rt::end(0); }
    static constexpr int SPAN = Rt::end(pos_off(7)) - Rt::end(0) + 16;    // bits of the 8 windows
    static constexpr int NA = (SPAN + 31) / 32;                          // aligned words
    // First window bit of the lane, s = 32*w0 + bb with bb in 1..32 (not 0..31): the alignment
    // is then one v_alignbit by 32 - bb (0..31) with no special case for a zero offset.
    static constexpr ESCHA_DEVICE int start(int lane) { return (Rt::end(b_p0(lane)) - 16 + Rt::R) % Rt::R; }
    static constexpr ESCHA_DEVICE int bb(int lane) { return start(lane) % 32 == 0 ? 32 : start(lane) % 32; }
    static constexpr ESCHA_DEVICE int w0(int lane) { return ((start(lane) - bb(lane)) / 32 + Rt::W32) % Rt::W32; }
    static constexpr ESCHA_DEVICE int max_words() {
        int n = 0;
        for (int l = 0; l < 32; ++l) {
            const int w = (bb(l) + SPAN - 1) / 32 + 1;
            n = w > n ? w : n;
        }
        return n;
    }
    static constexpr int NW = max_words();                               // raw words per tile

    int word[NW];      // cyclic word indices of this lane's raw words in the tile
    u32 rsh;           // 32 - bb: the right shift of v_alignbit

    ESCHA_DEVICE explicit WmmaStream(int lane) {
        const int s0 = w0(lane);
        rsh = (u32)(32 - bb(lane));
        #pragma unroll
        for (int q = 0; q < NW; ++q) word[q] = (s0 + q) % Rt::W32;
    }

    // The lane's 8 states, element order e = 0..7.
    ESCHA_DEVICE void states(const u32 (&w)[NW], u32 (&s)[8]) const {
        u32 a[NA + 1];
        #pragma unroll
        for (int i = 0; i < NA; ++i) a[i] = funnel_r(w[i], i + 1 < NW ? w[i + 1] : 0u, rsh);
        a[NA] = 0;
        #pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int c = C(e), i = c / 32, o = c % 32;
            if (o == 0)
                s[e] = a[i] >> 16;
            else if (o <= 16)
                s[e] = (a[i] >> (16 - o)) & 0xFFFFu;                       // one v_bfe_u32
            else
                s[e] = funnel_r(a[i], a[i + 1], (u32)(48 - o)) & 0xFFFFu;   // v_alignbit + v_and
        }
    }

    template <int CB>
    ESCHA_DEVICE void decode(const u32 (&w)[NW], half2_t (&h)[4], u32 mask) const {
        u32 s[8];
        states(w, s);
        #pragma unroll
        for (int r = 0; r < 4; ++r) h[r] = decode2<CB>(s[2 * r], s[2 * r + 1], mask);
    }
};

// ---- the shuffle route: NVIDIA-order decode, then 4 exchange rounds (wmma_layout.h xchg_*)
// Register selects by a lane-dependent XOR of the index: out[t] = in[t ^ x], as two butterfly
// stages of v_cndmask (bit 0, then bit 1 of x).
ESCHA_DEVICE void xor_select4(u32 (&v)[4], int x) {
    u32 t[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) t[i] = (x & 1) ? v[i ^ 1] : v[i];
    #pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (x & 2) ? t[i ^ 2] : t[i];
}

// Pure re-layout: lane l holds pairs in[q] of the NVIDIA order (its positions 8l+2q, 8l+2q+1);
// out[r] becomes the WMMA B VGPR r of lane l. Split in the lane-local halves around the exchange
// so a host test can run it for all 32 lanes in lock step; `src[t]` = xchg_src_lane(l, t).
ESCHA_DEVICE void relayout_send(const u32 (&in)[4], u32 (&send)[4], int lane) {
    #pragma unroll
    for (int t = 0; t < 4; ++t) send[t] = in[t];
    xor_select4(send, lane & 3);                 // send[t] = in[t ^ (lane % 4)] = in[xchg_send_pair]
}
ESCHA_DEVICE void relayout_recv(u32 (&recv)[4], int lane) {
    xor_select4(recv, xchg_c(lane));            // out[r] = received in round r ^ c = xchg_dst_reg
}
ESCHA_DEVICE void relayout_pairs(const u32 (&in)[4], u32 (&out)[4], int lane, const int (&src)[4]) {
    u32 send[4];
    relayout_send(in, send, lane);
    #pragma unroll
    for (int t = 0; t < 4; ++t) out[t] = lane_gather(send[t], src[t]);
    relayout_recv(out, lane);
}

template <int K2>
struct ShuffleDecoder {
    LaneStream<K2> ls;
    int src[4];
    int lane;
    static constexpr int NW = LaneStream<K2>::NW;
    ESCHA_DEVICE explicit ShuffleDecoder(int l) : ls(l), lane(l) {
        #pragma unroll
        for (int t = 0; t < 4; ++t) src[t] = xchg_src_lane(l, t);
    }
    template <int CB>
    ESCHA_DEVICE void decode(const u32 (&w)[NW], half2_t (&h)[4], u32 mask) const {
        half2_t p[4];
        decode_lane<K2, CB>(w, ls, p, mask);
        u32 in[4], out[4];
        #pragma unroll
        for (int q = 0; q < 4; ++q) in[q] = bit_cast<u32>(p[q]);
        relayout_pairs(in, out, lane, src);
        #pragma unroll
        for (int r = 0; r < 4; ++r) h[r] = bit_cast<half2_t>(out[r]);
    }
};

// The route fused.h gets (through mu::Decoder).
template <bool SHUFFLE, int K2> struct pick_route { using type = WmmaStream<K2>; };
template <int K2> struct pick_route<true, K2> { using type = ShuffleDecoder<K2>; };
template <int K2>
using BDecoder = typename pick_route<ESCHA_WMMA_B_ROUTE == 1, K2>::type;

}  // namespace wmma
}  // namespace escha

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
// lane loads the NW words covering its bits, aligns them once with funnel shifts by (part of) its
// own offset b (computed once per kernel), and then cuts every state out at a compile-time offset
// (states_aligned), or from compile-time shifted words chosen so that each cut is one instruction
// (states_planned, NVIDIA): no run-time selects in the hot loop.
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
    static constexpr ESCHA_DEVICE bool lanes_agree_mod(int g) {    // every lane's start equal mod g?
        for (int l = 1; l < 32; ++l)
            if (start(l) % g != start(0) % g) return false;
        return true;
    }
    static constexpr bool UNIFORM = lanes_agree_mod(32);            // same b for every lane
    static constexpr int B0 = Rt::end(0) - 16 + Rt::R;              // lane 0's start (mod 32 below)

    int word[NW];      // word indices (cyclic) of this lane's raw words in the tile
    u32 b;             // bit offset of the first window inside word[0]

    ESCHA_DEVICE explicit LaneStream(int lane) {
        const int s0 = start(lane);
        b = (u32)(s0 & 31);
        #pragma unroll
        for (int q = 0; q < NW; ++q) word[q] = ((s0 >> 5) + q) % Rt::W32;
    }

    // The 8 states of this lane from its raw words w[0..NW-1]: the planned cut (below) where it
    // takes fewer instructions than aligning and cutting at the windows' offsets (K = 1.5, 2, 2.5,
    // 4, 5.5, 6, 7.5, 8 on NVIDIA); on AMD always the latter (v_bfe_u32 cuts any field in one).
    // The cuts run on the integer ALU pipe, except with ON_MUL (NVIDIA; the LCG codebooks' swapped
    // route, bound by the ALU pipe while the multiply pipe carries only the hash IMAD): there a
    // shift of one word by a constant is IMAD.SHL instead of SHF (K3 mcg M <= 4 0.90-0.97x the
    // time, RESULTS.md session 22). mul1's multiply pipe also carries IDP: it keeps the ALU cut.
    // IMAD.HI is no substitute for the >> 16 cuts (session 8: 2-9 % slower; session 50, one per 8 states:
    // K2 / K3 mcg 1.027x / 1.025x the time, docs/experiments/s50-top-cut-on-mul.diff).
    template <bool ON_MUL = false>
    ESCHA_DEVICE void states(const u32 (&w)[NW], u32 (&s)[8]) const {
#if defined(ESCHA_AMD)
        constexpr bool planned = false;
#else
        constexpr bool planned = best_plan<ON_MUL>().cost < aligned_cost();
#endif
        if constexpr (planned)
            states_planned<ON_MUL>(w, s);
        else
            states_aligned<ON_MUL>(w, s);
    }

    // ---- NVIDIA (and the host shim): every state cut out in ONE integer instruction.
    // A 16-bit window that starts 0, 8 or 16 bits into a 32-bit word is one SHF, PRMT or LOP3;
    // anywhere else it takes two (sm_90 has no bit-field extract). So the lane's words are aligned
    // to a multiple of G bits (one funnel shift per word by b & ~(G-1), or none when every lane
    // has the same offset), where G is the largest power of two modulo which all 32 lanes' offsets
    // agree: the windows then sit at compile-time offsets D(j) = (start(0) mod G) + C(j), and each
    // is cut from a word funnel-shifted (compile-time) to start 0, 8 or 16 bits before it, with as
    // few distinct shifted words as possible (identical shifts of the same words are one
    // instruction: the compiler merges them). The trellis decode is bound by integer issue
    // (PERF.md), so instructions here are the kernel's time. K = 4, sm_90: 11 instructions for 8
    // states instead of 16.
    struct CutPlan {
        int g, nx, cost;
        int word[8], shift[8], off[8];      // state j = cut(funnel_l(x[word], x[word+1], shift), off)
    };
    static constexpr ESCHA_DEVICE bool serves(int base, int d) { return d == base || d == base + 8 || d == base + 16; }
    // pairs (ON_MUL): first every two windows 16 bits apart from one shifted word at the first's
    // start (cut at 0 by a shift, at 16 by one IMAD with its partner, top_partners), then the greedy
    // cover for the rest. K = 4: 3 funnel shifts, 4 shifts and 4 IMAD instead of 3 funnel shifts, 2
    // shifts, 2 PRMT, 2 LOP3 and 2 IMAD: as many instructions, two fewer on the ALU pipe (H100:
    // 0.986-0.988x the time over the 16 K4 mcg M = 1 / 4 cells, benchmarks/RESULTS.md session 50).
    static constexpr ESCHA_DEVICE CutPlan plan_for(int g, bool pairs = false) {
        CutPlan p{};
        p.g = g;
        int d[8] = {};
        for (int j = 0; j < 8; ++j) d[j] = start(0) % g + C(j);
        p.nx = g == 32 ? NW : (d[7] + 16 + 31) / 32;
        bool done[8] = {};
        int bases[8] = {}, nb = 0, copies = 0, left = 8;
        for (int j = 0; j < 8 && pairs; ++j)
            for (int k = 0; k < 8; ++k)
                if (!done[j] && !done[k] && d[k] == d[j] + 16) {
                    done[j] = done[k] = true;
                    left -= 2;
                    bases[nb++] = d[j];
                    copies += d[j] % 32 != 0;
                    p.word[j] = p.word[k] = d[j] / 32;
                    p.shift[j] = p.shift[k] = d[j] % 32;
                    p.off[j] = 0;
                    p.off[k] = 16;
                }
        // a word as it is (shift 0: no instruction) or one already shifted for a pair
        const auto have = [&](int base) {
            bool h = base % 32 == 0;
            for (int i = 0; i < nb; ++i) h = h || bases[i] == base;
            return h;
        };
        // Greedy cover (as few shifted words as the exhaustive search over the 3^8 choices, for
        // every K): take the shifted word that serves the most windows not yet cut, one we have
        // before any other, ties to the lowest base.
        while (left > 0) {
            int best_base = -1, best_score = -1;
            for (int j = 0; j < 8; ++j)
                for (int o = 0; o <= 16 && !done[j]; o += 8) {
                    const int base = d[j] - o;
                    if (base < 0) continue;
                    int score = have(base) ? 100 : 0;
                    for (int k = 0; k < 8; ++k) score += !done[k] && serves(base, d[k]);
                    if (score > best_score || (score == best_score && base < best_base)) {
                        best_score = score;
                        best_base = base;
                    }
                }
            if (!have(best_base)) {
                ++copies;
                bases[nb++] = best_base;
            }
            for (int k = 0; k < 8; ++k)
                if (!done[k] && serves(best_base, d[k])) {
                    done[k] = true;
                    --left;
                    p.word[k] = best_base / 32;
                    p.shift[k] = best_base % 32;
                    p.off[k] = d[k] - best_base;
                }
        }
        p.cost = (g == 32 ? 0 : p.nx) + copies + 8;
        return p;
    }
    // A plan's instructions on the ALU pipe with ON_MUL: funnel shifts (a last word's shift is
    // IMAD.SHL) and the cuts but those at 16 with a partner at 0 (one IMAD each, top_partners).
    static constexpr ESCHA_DEVICE int alu_on_mul(const CutPlan& p) {
        const Partners top = top_partners<true>(p);
        int n = p.g == 32 ? 0 : p.nx - 1;
        for (int j = 0; j < 8; ++j) {
            bool first = p.shift[j] != 0 && p.word[j] + 1 < p.nx;
            for (int k = 0; k < j; ++k)
                first = first && !(p.word[k] == p.word[j] && p.shift[k] == p.shift[j]);
            n += first + (top.k[j] < 0);
        }
        return n;
    }
    static constexpr ESCHA_DEVICE int aligned_cost() {      // states_aligned's instructions
        int n = NA;
        for (int j = 0; j < 8; ++j) n += C(j) % 32 == 0 || C(j) % 32 == 16 ? 1 : 2;
        return n;
    }
    // The fewest instructions; with ON_MUL, of those the fewest on the ALU pipe (the LCG codebooks'
    // swapped route is bound by it).
    template <bool ON_MUL = false>
    static constexpr ESCHA_DEVICE CutPlan best_plan() {
        CutPlan best = plan_for(1);
        for (int g = 1; g <= 32; g *= 2) {
            if (!lanes_agree_mod(g)) break;
            for (int pairs = 0; pairs <= (ON_MUL ? 1 : 0); ++pairs) {
                const CutPlan p = plan_for(g, pairs);
                if (p.cost < best.cost || (p.cost == best.cost && (!ON_MUL || alu_on_mul(p) <= alu_on_mul(best))))
                    best = p;
            }
        }
        return best;
    }

    // Word i of the lane's words shifted left by sh (the lane's offset, or part of it), the next
    // word's bits shifted in where it was loaded. ON_MUL: the last word's shift as a multiply by 2^sh
    // (1 << sh is hoisted out of the loop: b is the lane's), on the multiply pipe like the
    // compile-time shifts of the cuts.
    template <bool ON_MUL>
    static ESCHA_DEVICE u32 shifted_word(const u32 (&w)[NW], int i, u32 sh) {
        return i + 1 < NW ? funnel_l(w[i], w[i + 1], sh) : ON_MUL ? shl_on_mul(w[i], sh) : w[i] << sh;
    }

    template <bool ON_MUL>
    ESCHA_DEVICE void states_planned(const u32 (&w)[NW], u32 (&s)[8]) const {
        constexpr CutPlan PLAN = best_plan<ON_MUL>();
        constexpr int NX = PLAN.nx;
        static_assert(NX <= NW, "the aligned windows need no more words than were loaded");
        u32 x[NX];
        if constexpr (PLAN.g == 32) {
            #pragma unroll
            for (int i = 0; i < NX; ++i) x[i] = w[i];
        } else {
            const u32 sh = b & ~(u32)(PLAN.g - 1);
            #pragma unroll
            for (int i = 0; i < NX; ++i) x[i] = shifted_word<ON_MUL>(w, i, sh);
        }
        // a constant table, not a constexpr call per unrolled j: NVVM would fold the call's loop
        // at every use (session 24: 17 s instead of 0.8 s to compile a swapped K2 3inst kernel)
        constexpr Partners TOP = top_partners<ON_MUL>(PLAN);
        u32 y[8];
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int i = PLAN.word[j], sh = PLAN.shift[j], o = PLAN.off[j];
            y[j] = sh == 0                   ? x[i]
                   : ON_MUL && i + 1 >= NX ? shl_on_mul(x[i], (u32)sh)
                                           : funnel_l_kept(x[i], i + 1 < NX ? x[i + 1] : 0u, (u32)sh);
            if (TOP.k[j] < 0)
                s[j] = o == 0 ? y[j] >> 16 : o == 8 ? mid16(y[j]) : y[j] & 0xFFFFu;
        }
        #pragma unroll
        for (int j = 0; j < 8; ++j)
            if (TOP.k[j] >= 0)
                s[j] = mad_on_mul(s[TOP.k[j]], 0xFFFF0000u, y[j]);
    }
    // ON_MUL: a window in the low half of a shifted word whose high half is a state too is that
    // word less the other state << 16, one IMAD instead of a LOP3. k[j]: the other state's index
    // (cut at offset 0 of the same shifted word) where state j is cut so, else -1.
    struct Partners {
        int k[8];
    };
    template <bool ON_MUL>
    static constexpr ESCHA_DEVICE Partners top_partners(const CutPlan& p) {
        Partners t{};
        for (int j = 0; j < 8; ++j) {
            t.k[j] = -1;
            for (int k = 0; k < 8 && ON_MUL && p.off[j] == 16; ++k)
                if (t.k[j] < 0 && p.off[k] == 0 && p.word[k] == p.word[j] && p.shift[k] == p.shift[j]) t.k[j] = k;
        }
        return t;
    }

    // ---- Align the words once by the lane's offset b, then cut each state at a compile-time offset
    // (AMD's v_bfe_u32 takes any field in one instruction; two on NVIDIA but at offsets 0 and 16).
    template <bool ON_MUL>
    ESCHA_DEVICE void states_aligned(const u32 (&w)[NW], u32 (&s)[8]) const {
        u32 a[NA + 1];
        const u32 sh = UNIFORM ? (u32)(B0 % 32) : b;
        #pragma unroll
        for (int i = 0; i < NA; ++i) a[i] = shifted_word<ON_MUL>(w, i, sh);
        a[NA] = 0;
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int c = C(j), i = c / 32, o = c % 32;
            if (o == 0)
                s[j] = a[i] >> 16;
            else if (o == 16)
                s[j] = a[i] & 0xFFFFu;
            else if (o < 16)
                s[j] = ON_MUL ? shl_on_mul(a[i], (u32)o) >> 16 : (a[i] >> (16 - o)) & 0xFFFFu;
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
    ls.states(w, s);
    #pragma unroll
    for (int q = 0; q < 4; ++q) h[q] = decode2<CB>(s[2 * q], s[2 * q + 1], mask);
}

// Row and column inside the 16x16 tile of lane L's position j.
ESCHA_DEVICE int pos_row(int lane, int j) { return 2 * (lane & 3) + (j & 1) + 8 * ((j >> 1) & 1); }
ESCHA_DEVICE int pos_col(int lane, int j) { return (lane >> 2) + 8 * (j >> 2); }

}  // namespace escha

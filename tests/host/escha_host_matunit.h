// Host (g++) stand-in for the matrix unit (escha::mu of matunit_mma.h / matunit_wmma.h) and the
// wave's cross-lane operations, for CPU tests that run a kernel's threads as std::threads
// (tests/host/dense_host.cpp). Each cross-lane operation (mma, shfl_xor) is the wave's lanes
// meeting twice at the wave's barrier: once after writing their operands into the wave's scratch,
// once after reading what they need. The lane layouts are NVIDIA's mma.m16n8k16 by default and
// gfx12's WMMA (wmma_layout.h, the direct B decoder of wmma_decode.h) with ESCHA_HOST_AMD, so a
// kernel's vendor-specific index math runs on the CPU for both. Not shipped.
#pragma once
#include <barrier>

#include "escha/codebook.h"
#include "escha/trellis.h"
#include "escha/wmma_layout.h"
#if defined(ESCHA_HOST_AMD)
#include "escha/wmma_decode.h"
#endif

namespace escha {
namespace host {

struct Wave {
    std::barrier<>* bar = nullptr;
    u32 scratch[32][8] = {};                 // per lane: what it shows the other lanes
};
inline thread_local Wave* waves = nullptr;   // this thread's block's waves (set by the driver)
inline thread_local int my_lane = 0, my_wave = 0;
// This thread's block's dynamic shared memory, which shared-memory addresses (u32) are offsets into
// (tests/host/escha_host_kernel_api.h; set by the driver, escha_host_block.h)
inline thread_local unsigned char* smem_base = nullptr;
inline Wave& wave() { return waves[my_wave]; }

}  // namespace host

inline void wave_sync() { host::wave().bar->arrive_and_wait(); }

namespace host {
// The wave's lanes meet twice: each shows v, then takes the value lane `src` showed
inline u32 lane_value(u32 v, int src) {
    Wave& w = wave();
    w.scratch[my_lane][0] = v;
    w.bar->arrive_and_wait();
    const u32 r = w.scratch[src & 31][0];
    w.bar->arrive_and_wait();
    return r;
}
}  // namespace host

inline u32 shfl_xor(u32 v, int mask) { return host::lane_value(v, host::my_lane ^ mask); }
inline float shfl_xor(float v, int mask) { return bit_cast<float>(shfl_xor(bit_cast<u32>(v), mask)); }
// v of lane src (0..31): every lane of the wave takes part, as __shfl_sync(0xffffffff, ...) requires
inline float shfl_idx(float v, int src) { return bit_cast<float>(host::lane_value(bit_cast<u32>(v), src)); }

// (hadamard.h's fp16_fits_or) the lanes vote through the wave's scratch
inline bool wave_any(bool pred) {
    host::Wave& w = host::wave();
    w.scratch[host::my_lane][0] = pred;
    w.bar->arrive_and_wait();
    bool any = false;
    for (int l = 0; l < 32; ++l) any = any || w.scratch[l][0];
    w.bar->arrive_and_wait();
    return any;
}

namespace mu {

constexpr int ACC = 8;
struct AFrag { u32 r[4]; };                  // element e: half e % 2 of r[e / 2]
struct BFrag { half2_t h[4]; };              // element e: half e % 2 of h[e / 2]

#if defined(ESCHA_HOST_AMD)
inline int a_row_of(int l, int /*e*/) { return wmma::a_row(l); }
inline int a_k_of(int l, int e) { return wmma::a_k(l, e); }
inline int b_k_of(int l, int e) { return wmma::b_k(l, e); }
inline int b_n_of(int l, int e) { return wmma::b_n(l, e); }
inline int acc_row(int l, int i) { return wmma::acc_row(l, i); }
inline int acc_col(int l, int i) { return wmma::acc_col(l, i); }
constexpr int ACC_RUN = 1;

template <int K2>
struct Decoder {
    wmma::WmmaStream<K2> rt;
    explicit Decoder(int lane) : rt(lane) {}
    static constexpr int NW = wmma::WmmaStream<K2>::NW;
    int word(int q) const { return rt.word[q]; }
    template <int CB>
    void decode(BFrag& b, const u32 (&w)[NW], u32 mask) const { rt.template decode<CB>(w, b.h, mask); }
    // the int8 route's operand, as matunit_wmma.h's Decoder builds it (elements in the WMMA order)
    void hashes(u32 (&h)[8], const u32 (&w)[NW]) const {
        u32 s[8];
        rt.states(w, s);
        for (int e = 0; e < 8; ++e) h[e] = mul1_hash(s[e]);
    }
};
#else
// mma.m16n8k16: A register q = (row g + 8 (q & 1), k 2t + 8 (q >> 1) + half); B element j = the
// trellis position order (trellis.h pos_row / pos_col); accumulators as matunit_mma.h
inline int a_row_of(int l, int e) { return (l >> 2) + 8 * ((e >> 1) & 1); }
inline int a_k_of(int l, int e) { return 2 * (l & 3) + 8 * (e >> 2) + (e & 1); }
inline int b_k_of(int l, int e) { return pos_row(l, e); }
inline int b_n_of(int l, int e) { return pos_col(l, e); }
inline int acc_row(int l, int i) { return (l >> 2) + 8 * ((i >> 1) & 1); }
inline int acc_col(int l, int i) { return 8 * (i >> 2) + 2 * (l & 3) + (i & 1); }
constexpr int ACC_RUN = 2;

template <int K2>
struct Decoder {
    LaneStream<K2> ls;
    explicit Decoder(int lane) : ls(lane) {}
    static constexpr int NW = LaneStream<K2>::NW;
    int word(int q) const { return ls.word[q]; }
    template <int CB>
    void decode(BFrag& b, const u32 (&w)[NW], u32 mask) const { decode_lane<K2, CB>(w, ls, b.h, mask); }
    // the word routes' operands, as matunit_mma.h's Decoder builds them
    template <int CB>
    void swap_words(u32 (&y)[8], const u32 (&w)[NW], u32 mask) const {
        u32 s[8];
        ls.template states<CB != CB_MUL1>(w, s);
        for (int j = 0; j < 8; ++j) y[j] = CB == CB_MUL1 ? mul1_swap_word(s[j]) : lcg_bits<CB>(s[j], mask);
    }
    void hashes(u32 (&h)[8], const u32 (&w)[NW]) const {
        u32 s[8];
        ls.states(w, s);
        for (int j = 0; j < 8; ++j) h[j] = mul1_hash(s[j]);
    }
};
#endif

// The A fragment from shared memory, each lane giving the address of its row of the tile (row
// l % 16, columns 8 (l / 16) .. +7): gfx12 reads its own 16 bytes there (matunit_wmma.h); NVIDIA's
// ldmatrix.x4 gathers register q of lane l from the row address of lane 8 q + l / 4 (matunit_mma.h).
inline void load_a_rows(AFrag& a, u32 my_row_saddr) {
#if defined(ESCHA_HOST_AMD)
    std::memcpy(a.r, host::smem_base + my_row_saddr, 16);
#else
    host::Wave& w = host::wave();
    w.scratch[host::my_lane][0] = my_row_saddr;
    w.bar->arrive_and_wait();
    for (int q = 0; q < 4; ++q)
        std::memcpy(&a.r[q], host::smem_base + w.scratch[8 * q + host::my_lane / 4][0] + 4 * (host::my_lane % 4), 4);
    w.bar->arrive_and_wait();
#endif
}

template <typename F>
AFrag a_frag_bits(int lane, F f) {
    AFrag a;
    for (int q = 0; q < 4; ++q)
        a.r[q] = (f(a_row_of(lane, 2 * q), a_k_of(lane, 2 * q)) & 0xFFFFu)
                 | (f(a_row_of(lane, 2 * q + 1), a_k_of(lane, 2 * q + 1)) << 16);
    return a;
}

inline float half_bits_to_float(u32 bits) {
    const u16 b = (u16)bits;
    half_t h;
    std::memcpy(&h, &b, 2);
    return (float)h;
}

// c (16x16 fp32, this lane's ACC) += A (16x16) . B (16x16): every lane shows its fragments, then
// rebuilds both matrices and sums its outputs in fp32, k in order.
inline void mma(float (&c)[ACC], const AFrag& a, const BFrag& b) {
    host::Wave& w = host::wave();
    u32* mine = w.scratch[host::my_lane];
    for (int q = 0; q < 4; ++q) {
        mine[q] = a.r[q];
        std::memcpy(&mine[4 + q], &b.h[q], 4);
    }
    w.bar->arrive_and_wait();
    float A[16][16], B[16][16];
    for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 8; ++e) {
            A[a_row_of(l, e)][a_k_of(l, e)] = half_bits_to_float(w.scratch[l][e >> 1] >> (16 * (e & 1)));
            B[b_k_of(l, e)][b_n_of(l, e)] = half_bits_to_float(w.scratch[l][4 + (e >> 1)] >> (16 * (e & 1)));
        }
    w.bar->arrive_and_wait();
    for (int i = 0; i < ACC; ++i) {
        const int m = acc_row(host::my_lane, i), n = acc_col(host::my_lane, i);
        float s = c[i];
        for (int k = 0; k < 16; ++k) s += A[m][k] * B[k][n];
        c[i] = s;
    }
}

#if defined(ESCHA_HOST_AMD)
// ---- gfx12's int8 route (matunit_wmma.h): x words of token l % 16 as A (signed bytes), the hashes
// of the lane's column as B (unsigned bytes), 4 v_wmma_i32_16x16x16_iu8 per tile
struct XFragI8 { u32 v[8]; };
struct BFragI8 { u32 w[8]; };
constexpr bool HAS_SWAPPED = false;
void mma_sw(float (&c)[ACC], const XFragI8& x, const BFragI8& y);     // NVIDIA's route: never instantiated
constexpr int i8_slot(int k) { return k; }
inline int i8_x_row(int lane, int /*part*/) { return lane & 15; }
inline int i8_x_word(int lane, int part) { return 8 * (lane >> 4) + 4 * part; }
inline int i8_acc_row(int lane, int i) { return wmma::acc_row(lane, i); }
inline int i8_acc_col(int lane, int i) { return wmma::acc_col(lane, i); }
inline void load_x_i8(XFragI8& x, u32 addr0, u32 addr1) {
    std::memcpy(&x.v[0], host::smem_base + addr0, 16);
    std::memcpy(&x.v[4], host::smem_base + addr1, 16);
}
// v_wmma_i32_16x16x16_iu8 (wave32): byte b of VGPR r of lane l is k = 8 (l / 16) + 4 r + b of row
// l % 16 of A (signed) and of column l % 16 of B (unsigned) (AMD Matrix Instruction Calculator,
// rdna4; tests/test_amd_layout.py); D in the f32 WMMA's layout; exact integer sums.
inline void wmma_iu8(int (&d)[ACC], const u32 (&a)[2], const u32 (&b)[2]) {
    host::Wave& w = host::wave();
    u32* mine = w.scratch[host::my_lane];
    mine[0] = a[0]; mine[1] = a[1]; mine[2] = b[0]; mine[3] = b[1];
    w.bar->arrive_and_wait();
    int A[16][16], B[16][16];
    for (int l = 0; l < 32; ++l)
        for (int r = 0; r < 2; ++r)
            for (int byte = 0; byte < 4; ++byte) {
                const int k = 8 * (l >> 4) + 4 * r + byte;
                A[l & 15][k] = (signed char)(w.scratch[l][r] >> (8 * byte));
                B[k][l & 15] = (w.scratch[l][2 + r] >> (8 * byte)) & 0xFF;
            }
    w.bar->arrive_and_wait();
    for (int i = 0; i < ACC; ++i) {
        const int m = acc_row(host::my_lane, i), n = acc_col(host::my_lane, i);
        for (int k = 0; k < 16; ++k) d[i] += A[m][k] * B[k][n];
    }
}
inline void mma_i8(int (&c)[ACC], const XFragI8& x, const BFragI8& b) {
    for (int t = 0; t < 4; ++t) {
        const u32 av[2] = {x.v[2 * t], x.v[2 * t + 1]}, bv[2] = {b.w[2 * t], b.w[2 * t + 1]};
        wmma_iu8(c, av, bv);
    }
}
// the dot route (M = 1): a lane's 8 elements are rows 8h + e of column l % 16, x words e of its loads
constexpr int I8_DOT_COLS = 1;
constexpr int I8_DOT_REDUCE[1] = {16};
constexpr int i8_dot_col(int /*e*/) { return 0; }
constexpr int i8_dot_word(int e) { return e; }
inline int i8_dot_acc(int lane, int /*c*/) { return (lane >> 4) == 0 ? 0 : -1; }
inline u32 i8_dot_x(const XFragI8& x, int w) { return x.v[w]; }
#else
// ---- the word routes (matunit_mma.h): weights as the unit's 16-row operand, tokens 0..7 as its n8
struct XFragI8 { u32 v[1][4]; };
struct BFragI8 { u32 w[8]; };
constexpr bool HAS_SWAPPED = true;
// where the prologue puts x element k of a 16-k slab; the lanes' x loads; c[i]'s token and column
constexpr int i8_slot(int k) { return 4 * ((k >> 1) & 3) + 2 * (k >> 3) + (k & 1); }
inline int i8_x_row(int lane, int part) { return (lane >> 2) + 8 * part; }
inline int i8_x_word(int lane, int /*part*/) { return 4 * (lane & 3); }
inline int i8_acc_row(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }
inline int i8_acc_col(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
inline void load_x_i8(XFragI8& x, u32 addr0, u32 /*addr1*/) { std::memcpy(x.v[0], host::smem_base + addr0, 16); }

// NVIDIA's mma.m16n8kK with E elements per 32-bit register (PTX ISA fragment layouts, g = lane / 4,
// t = lane % 4): A register q = (row g + 8 (q & 1), k E t + 4 E (q >> 1) + e), B b0 = (k E t + e,
// column g), b1 = the same at k + 4 E, D d[i] = (row g + 8 (i >> 1), column 2t + (i & 1)); element e
// of a register is its bits 32/E * e.., read by a_elem / b_elem; products summed k in order.
template <int E, typename T, typename FA, typename FB>
inline void mma_n8(T (&d)[4], const u32 (&a)[4], u32 b0, u32 b1, FA a_elem, FB b_elem) {
    constexpr int KK = 8 * E, BITS = 32 / E;
    host::Wave& w = host::wave();
    u32* mine = w.scratch[host::my_lane];
    for (int q = 0; q < 4; ++q) mine[q] = a[q];
    mine[4] = b0;
    mine[5] = b1;
    w.bar->arrive_and_wait();
    T A[16][KK], B[KK][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, t = l & 3;
        for (int e = 0; e < E; ++e) {
            for (int q = 0; q < 4; ++q) A[g + 8 * (q & 1)][E * t + 4 * E * (q >> 1) + e] = a_elem(w.scratch[l][q] >> (BITS * e));
            B[E * t + e][g] = b_elem(w.scratch[l][4] >> (BITS * e));
            B[E * t + 4 * E + e][g] = b_elem(w.scratch[l][5] >> (BITS * e));
        }
    }
    w.bar->arrive_and_wait();
    const int g = host::my_lane >> 2, t = host::my_lane & 3;
    for (int i = 0; i < 4; ++i) {
        const int r = g + 8 * (i >> 1), c = 2 * t + (i & 1);
        T s = d[i];
        for (int k = 0; k < KK; ++k) s += A[r][k] * B[k][c];
        d[i] = s;
    }
}
// mma.m16n8k16 f16 x f16 -> f32, and mma.m16n8k32 u8 x s8 -> s32 (exact integer sums)
inline void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_n8<2>(d, a, b0, b1, half_bits_to_float, half_bits_to_float);
}
inline void mma_16832_u8s8(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    mma_n8<4>(d, a, b0, b1, [](u32 v) { return (int)(v & 0xFF); }, [](u32 v) { return (int)(signed char)v; });
}

// matunit_mma.h's relabelling of a tile's 8 words (two-half words or hashes) into two instructions
template <typename T, typename Op>
inline void mma_swapped(T (&c)[ACC], const XFragI8& x, const BFragI8& y, Op op) {
    const u32 lo[4] = {y.w[0], y.w[4], y.w[1], y.w[5]}, hi[4] = {y.w[2], y.w[6], y.w[3], y.w[7]};
    T (&c0)[4] = *reinterpret_cast<T (*)[4]>(&c[0]);
    op(c0, lo, x.v[0][0], x.v[0][1]);
    op(c0, hi, x.v[0][2], x.v[0][3]);
}
// the swapped fp16 route and the int8 route
inline void mma_sw(float (&c)[ACC], const XFragI8& x, const BFragI8& y) {
    mma_swapped(c, x, y, [](float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) { mma_16816(d, a, b0, b1); });
}
inline void mma_i8(int (&c)[ACC], const XFragI8& x, const BFragI8& b) {
    mma_swapped(c, x, b, [](int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) { mma_16832_u8s8(d, a, b0, b1); });
}
// the int8 route's dot variant (M = 1): columns g, g + 8 of a lane's positions, its 4 x words of a slab
constexpr int I8_DOT_COLS = 2;
constexpr int I8_DOT_REDUCE[2] = {1, 2};
constexpr int i8_dot_col(int j) { return j >> 2; }
constexpr int i8_dot_word(int j) { return j & 3; }
inline int i8_dot_acc(int lane, int c) { return (lane & 3) == 0 ? 2 * c : -1; }
inline u32 i8_dot_x(const XFragI8& x, int w) { return x.v[0][w]; }
#endif

}  // namespace mu
}  // namespace escha

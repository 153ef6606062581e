// Fused coded linear for small and medium M, one launch:
//
//   y[:, cols] = ( H128( (sum over this column group's K range of  Hx @ What) ) * rout * s_out ) + bias
//   Hx = H128(x * s_in * rin), fp16 in shared memory (per-row power-of-two scaled: no overflow)
//
// Grid: x = OC/128 column groups, y = S splits of the input features. A block of WARPS waves
// owns 128 output columns (8 tiles) and KR = IC/S input features. It starts streaming the
// trellis at once: every wave pulls ITS OWN tile columns through a private multi-stage
// async-copy ring (16 waves: two per tile column, each on every other step of the K range).
// Meanwhile the block turns its KR features of the M rows of x into the
// scaled, Hadamard-rotated fp16 A operand in shared memory (one barrier), and then each wave
// decodes its tiles straight into matrix-unit B fragments and accumulates MT m16 tiles of
// output in fp32 with no further block barrier until the epilogue.
// Routes (compile-time): the fp16 route above (XH: the A operand precomputed once per call by
// the prep kernel instead); the swapped fp16 route (SW, NVIDIA, M <= 8: weights as the unit's
// 16-row operand, one 32-bit word of two fp16 halves per weight against the token's {x, x}); the
// opt-in int8 route (I8, mul1: hash bytes x int8 tokens, DOT: on the dot unit at M = 1).
// On NVIDIA sm_90 the kernel is a programmatic dependent: it streams its first weight stages and
// prefetches its scales into L2, then waits for the previous kernel (grid_dependency_wait) before
// touching x or writing; it lets the next one be scheduled early (grid_dependents_launch: at
// block start, with XH after the main loop).
// Split K without grid-wide barriers: with S > 1 every block writes its fp32 partial to a
// workspace and bumps a per-column-group counter (release / acquire: platform partials_*); the
// last block to arrive sums the S partials in a fixed order (deterministic), applies the output
// Hadamard and scales, and resets the counter to zero for the next call (so CUDA-graph replays
// need no memset).
//
// Vendor-specific parts come from the platform headers: the matrix unit (mu::), async copies,
// shuffles, coherent loads, fences, the dependent-launch wait. ESCHA_FUSED_DIAG (0 = off) removes one
// stage for timing studies: 1 = no decode (B = raw words), 2 = no matrix-unit ops (nor, on the word
// routes, their x loads), 3 = no x prologue; 4 removes nothing but records per-block phase
// timestamps (%globaltimer, ns; the last of 8 slots: %smid) in the module global escha_trace
// (benchmarks/trace_fused.py reads them).
#pragma once
#include "escha/platform.h"
#include "escha/hadamard.h"
#include "escha/matunit.h"

#ifndef ESCHA_FUSED_DIAG
#define ESCHA_FUSED_DIAG 0
#endif
#ifndef ESCHA_AMD_STAGED_COPY
#define ESCHA_AMD_STAGED_COPY 0
#endif
// The fp16 route's A operand from the prep kernel (XH) in chunks, each completing on an mbarrier,
// so that the main loop starts on the first chunk (sm_90: bulk copies; else one copy and a barrier).
// ESCHA_HOST_SM90: the CPU tests' emulation of sm_90 (tests/host/escha_host_kernel_api.h) takes
// these paths and the cluster exchange's too.
#if (defined(ESCHA_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900) || defined(ESCHA_HOST_SM90)
#define ESCHA_XH_CHUNKS 1
#else
#define ESCHA_XH_CHUNKS 0
#endif
// CL > 1: the in-kernel prologue's rows reach the cluster's other blocks by st.async, each block
// learning from its own mbarrier that they have landed (sm_90; FusedLinear::prologue_f16)
#define ESCHA_CLUSTER_EXCHANGE ESCHA_XH_CHUNKS

#if ESCHA_FUSED_DIAG == 4
extern "C" __device__ unsigned long long escha_trace[1 << 16];     // unmangled: the host looks it up
#endif

namespace escha {

#if ESCHA_FUSED_DIAG == 4
constexpr int TRACE_POINTS = 8;
ESCHA_DEVICE void trace_point(int i) {
    if (threadIdx.x == 0) {
        const int b = blockIdx.y * gridDim.x + blockIdx.x;
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if ((b + 1) * TRACE_POINTS <= (1 << 16)) {
            escha_trace[b * TRACE_POINTS + i] = t;
            if (i == 0) {                                    // the last slot: the block's SM
                unsigned sm;
                asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
                escha_trace[b * TRACE_POINTS + TRACE_POINTS - 1] = sm;
            }
        }
    }
}
#define ESCHA_TRACE(i) trace_point(i)
#else
#define ESCHA_TRACE(i)
#endif

// Every element of a (nested) register array set to v, fully unrolled.
template <typename T>
ESCHA_DEVICE void fill(T& x, T v) { x = v; }
template <typename E, int N, typename T>
ESCHA_DEVICE void fill(E (&x)[N], T v) {
    #pragma unroll
    for (int i = 0; i < N; ++i) fill(x[i], v);
}

template <int K2, int CB, typename in_t, typename out_t, int WARPS, int MT, int RB, int STAGES, int TR_BYTES,
          bool XH, bool I8 = false, bool DOT = false, bool SW = false, int CL = 1, int XR = 0, bool SC = false>
struct FusedLinear {
    static constexpr int COLS = 128;                   // output columns per block (one Hadamard block)
    static constexpr int TILES_N = COLS / 16;           // 8 tile columns per block
    // WARPS = 16 (fp16 route): KW = 2 waves per tile column, each taking every other step of the
    // block's K range (K slice = wave / CW); their sums meet in shared memory in the epilogue. More
    // waves per SM without a second split-K partial set (one block per SM at M = 16).
    static constexpr int KW = WARPS > TILES_N ? WARPS / TILES_N : 1;
    static constexpr int CW = WARPS / KW;               // waves across the tile columns
    static constexpr int TPW = TILES_N / CW;            // tile columns per wave
    static constexpr int W32 = Rate<K2>::W32;
    static constexpr int MP = 16 * MT;                  // padded rows
    static constexpr int SLOT_WORDS = RB * TPW * W32;            // one pipeline stage of one wave
    static constexpr int RING_WORDS = STAGES * SLOT_WORDS;        // one wave's ring
    static constexpr int PIECES = SLOT_WORDS / 4;                 // 16-byte pieces of a stage of a wave
    static constexpr int PER_LANE = (PIECES + ESCHA_WAVE - 1) / ESCHA_WAVE;
    static_assert(TILES_N % CW == 0 && WARPS % KW == 0, "WARPS must divide 8, or be 16");
    static_assert(SLOT_WORDS % 4 == 0, "stages are copied in 16-byte pieces");
    static_assert(TR_BYTES == WARPS * RING_WORDS * 4, "host and kernel disagree on the trellis ring size");
    static constexpr int RED_LD = COLS + 4;
    // the epilogue's m tiles per pass (rows ER), staged in the A operand's region when MT > 1
    // (kernels/fused.py EPILOGUE_M_TILES sizes that region; fused.hip.j2 checks they agree)
    static constexpr int EM = MT < 4 ? MT : 4;
    static constexpr int ER = 16 * EM;
    // m_tiles 2..4: the A fragments' addresses and the weight copies' lane offsets are kept in
    // registers (platform keep_in_register); ptxas otherwise recomputed them in every main-loop step
    // (up to 1.15x the loop's instructions once the epilogue staged 4 tiles at once, session 38).
    // Above 4 tiles their 2 x MT registers next to 8 x MT accumulators made ptxas spill.
    static constexpr bool PIN_ADDRESSES = MT > 1 && MT <= 4;
    static_assert(!I8 || CB == CB_MUL1, "int8 activations need the mul1 codebook (weights affine in hash bytes)");
    static_assert(!I8 || !XH, "the int8 route quantizes in its own prologue");
    // The int8 route serves M <= 8 (one m tile): on NVIDIA one n8 token group of the swapped unit,
    // so tokens 8..15 are never computed (matunit_mma.h mma_swapped); gfx12's unit always takes 16.
    static_assert(!I8 || MT == 1, "the int8 route takes one m tile (M <= 8)");
    static_assert(!DOT || I8, "the dot route is the int8 route's M = 1 variant");
    // The swapped fp16 route (matunit_mma.h mma_sw): M <= 8, NVIDIA.
    static_assert(!SW || (!I8 && MT == 1), "swap: one m tile, fp16 activations");
    static_assert(!SW || mu::HAS_SWAPPED, "the swapped route is NVIDIA's (gfx12's WMMA would take 2 instructions per tile)");
    static constexpr bool WORDS = I8 || SW;            // the A side lives as one u32 word per x element
    // CL > 1 (NVIDIA, a cluster launch of CL blocks along the column groups, kernels/fused.py
    // FusedConfig.cluster): the CL blocks of a cluster have the same K range, so the in-kernel
    // prologue's items are split among them and each writes its rotated rows into every block's
    // shared memory (the fp16 route; at M = 16 the rotation is throughput-bound: 8 items and
    // 160 shuffles per wave at 4096x4096).
    static_assert(CL == 1 || (HAS_CLUSTERS && !XH && !WORDS), "clusters: NVIDIA, the fp16 route's in-kernel prologue");
    static_assert(CL >= 1 && CL <= 8 && (CL & (CL - 1)) == 0, "cluster of 1, 2, 4 or 8 blocks");
    static_assert(CL == 1 || ESCHA_CLUSTER_EXCHANGE, "clusters: sm_90's st.async and mbarriers");
    static_assert(KW == 1 || !WORDS, "K-sliced waves (WARPS = 16): the fp16 route only");
    // SC (NVIDIA sm_90, kernels/fused.py FusedConfig.split_cluster): the grid is swapped, x = the S
    // splits of a column group, launched as one thread block cluster, y = the column groups; the
    // split blocks send their partials into split 0's shared memory by st.async, completing on an
    // mbarrier there, and split 0 sums them and writes y: no workspace, fence or counter on the
    // critical path from the slowest block's main loop to the output (benchmarks/RESULTS.md
    // session 46: that tail, ~2.1 us, is ~27 % of a 4096x4096 M = 1 call).
    static_assert(!SC || (CL == 1 && MT == 1 && ESCHA_CLUSTER_EXCHANGE),
                  "split clusters: sm_90, one m tile (one epilogue pass), no column-group clusters");
    ESCHA_DEVICE static int group_index() { return SC ? (int)blockIdx.y : (int)blockIdx.x; }
    ESCHA_DEVICE static int split_index() { return SC ? (int)blockIdx.x : (int)blockIdx.y; }
    ESCHA_DEVICE static int split_count() { return SC ? (int)gridDim.x : (int)gridDim.y; }
    // XH on sm_90: the A operand arrives in at most XCHUNKS chunks of whole steps (Args::x_chunks;
    // kernels/fused.py smem_layout: 8 bytes of mbarrier per chunk after the zero bytes; XH_CHUNKS
    // there, checked by fused.hip.j2)
    static constexpr int XCHUNKS = 8;
    // the exchange region's bytes (row exponents, flags, zero rows, the A chunks' mbarriers), as
    // kernels/fused.py smem_layout sizes it (fused.hip.j2 checks); SC's receive region follows it:
    // its mbarrier, then (S - 1) x M rows of COLS fp32 partials
    static constexpr int EX_BYTES = ((MP + 4) * 4 + 64 * RB + 8 * XCHUNKS + 15) / 16 * 16;
    // The output factors of the block's COLS columns (s_out, bias as fp32, rout as fp16) are copied
    // into the trellis ring once the main loop is done with it (where it is large enough), while the
    // block stages and publishes its sums: the finishing block then reads them from shared memory,
    // not with a memory round trip after the split-K partials' (stage_factors, store_rows).
    static constexpr int FACTOR_BYTES = COLS * (4 + 4 + 2);
    static constexpr bool STAGED_FACTORS = HAS_ASYNC_COPY && TR_BYTES >= FACTOR_BYTES && WARPS >= 4;
    // halves per row of A chunk c (the last one may be shorter)
    ESCHA_DEVICE static int chunk_halves(int c, int steps, int chunk_steps) {
        return min(chunk_steps, steps - c * chunk_steps) * 16 * RB;
    }

    struct Args {
        const in_t* x; long long ldx;
        out_t* y; long long ldy;
        const u16* code;
        const half_t* rin; const float* s_in;
        const half_t* rout; const float* s_out;
        const float* bias;
        int M, IC, OC, k_split;
        int in_valid, out_valid;                       // logical dims (<= IC / OC when padded)
        float* ws; int* counters;
        int off_tr, off_red, off_exp;                  // byte offsets into dynamic shared memory
        const half_t* xh; const int* xh_exp;           // XH: the A operand precomputed by prep.hip.j2
        int x_chunks;                                  // XH, sm_90: chunks it arrives in (1..XCHUNKS)
    };

    // XR > 0 (XH on sm_90, the fp16 route; kernels/fused.py FusedConfig.x_ring): the A operand lives
    // in a ring of XR chunks of KW steps (every wave reads every chunk), not the whole K range: chunk c
    // in slot c % XR, full[s] (M arrivals and their bytes) and empty[s] (one arrival per wave) per
    // slot, phases by c / XR; chunk c + RING_AHEAD is sent when the waves reach chunk c, into the slot
    // all waves have left. Less shared memory per block at M = 32..64: more blocks per SM.
    static constexpr bool RING = XR > 0;
    static constexpr int RING_STEPS = XR * KW;
    static constexpr int RING_AHEAD = XR > 2 ? XR - 2 : 1;
    static constexpr u32 RING_EMPTY = 8u * 4;          // bytes from full[0] to empty[0]: full[0..3], empty[0..3]
    static_assert(!RING || (XR >= 2 && XR <= 4 && XH && !WORDS && ESCHA_XH_CHUNKS),
                  "x_ring: 2..4 chunks, the fp16 route's xh = 1 A operand on sm_90 (bulk copies, mbarriers)");
    static_assert(!RING || XCHUNKS >= 8, "x_ring: its 4 full and 4 empty mbarriers live in the A chunks' room");

    // RING: the A row length in shared memory (kernels/fused.py smem_layout), halves
    ESCHA_DEVICE static int ring_halves(const Args& p) { return min(p.k_split, RING_STEPS * 16 * RB); }

#if ESCHA_XH_CHUNKS      // (bulk copies and mbarriers: sm_90)
    // XH, sm_90, the fp16 route, lane 0 of a wave: this wave's rows (wave, wave + WARPS, ...) of the
    // A chunk of `n` steps from step s0, into the rows' steps from dst_step on, one bulk copy per row
    // completing on the chunk's mbarrier `bar` (armed for M arrivals; each copy announces its bytes).
    ESCHA_DEVICE static void copy_x_chunk(const Args& p, u32 a_smem, int a_ld, int s0, int n, u32 bar, int wave,
                                          int dst_step) {
        constexpr int EB = 2;                            // fp16
        const int k0 = s0 * 16 * RB, d0 = dst_step * 16 * RB;
        const u32 bytes = (u32)(n * 16 * RB * EB);
        const unsigned char* src = reinterpret_cast<const unsigned char*>(p.xh) +
                                   ((long long)split_index() * p.k_split + k0) * EB;
        #pragma unroll 1                                 // (a rare path inside the main loop: kept small)
        for (int m = wave; m < p.M; m += WARPS) {
            mbar_arrive_expect_tx(bar, bytes);
            bulk_copy_to_shared(a_smem + (u32)((m * a_ld + d0) * EB), src + (long long)m * p.IC * EB, bytes, bar);
        }
    }

    // RING, lane 0 of a wave: its rows of chunk c (KW steps from step c * KW) into slot c % XR, once
    // every wave has left the chunk that slot held (empty, phase by c / XR); `bars`: full[0]
    ESCHA_DEVICE static void send_ring_chunk(const Args& p, u32 xs_addr, int c, int steps, u32 bars, int wave) {
        const int slot = c % XR;
        if (c >= XR) mbar_wait(bars + RING_EMPTY + 8u * (u32)slot, (u32)((c / XR - 1) & 1));
        copy_x_chunk(p, xs_addr, ring_halves(p) + 8, c * KW, min(KW, steps - c * KW), bars + 8u * (u32)slot, wave,
                     slot * KW);
    }
#endif

    ESCHA_DEVICE static void run(const Args& p, unsigned char* smem) {
        ESCHA_TRACE(0);                                      // block start
        // Kernels with the in-kernel prologue let a programmatic dependent that follows them be
        // scheduled at once (H200: 4096x4096 M <= 4 4-7 % faster per graph-chained call); with the
        // prep kernel (XH) the next kernel is usually the next call's prep grid, whose blocks
        // resident from the start measured ~3 % slower (14336x4096 M = 16), from the epilogue on
        // 1-3 % faster (benchmarks/RESULTS.md session 6).
        if constexpr (!XH) grid_dependents_launch();
        const int lane = threadIdx.x % ESCHA_WAVE, wave = wave_index();
        const int wcol = wave % CW, kslice = wave / CW;             // tile-column wave, K slice
        const int g = group_index(), split = split_index();
        const int xs_ld = (RING ? ring_halves(p) : p.k_split) + 8;  // halves; rows 16-byte aligned
        half_t* xs = reinterpret_cast<half_t*>(smem);               // [M][KR + 8] fp16 A operand
        u32* tr = reinterpret_cast<u32*>(smem + p.off_tr);
        float* red = reinterpret_cast<float*>(smem + p.off_red);
        int* row_exp = reinterpret_cast<int*>(smem + p.off_exp);     // [MP] per-row exponent
        int* flag = row_exp + MP;
        half_t* zero16 = reinterpret_cast<half_t*>(flag + 4);       // RB x 64 bytes of zeros: rows >= M
        const u32 x_bars = smem_addr(zero16 + 32 * RB);             // XH (sm_90): the A chunks' mbarriers, 8 bytes each
        u32* x_ex = reinterpret_cast<u32*>(zero16 + 32 * RB);      // CL > 1 (no XH): the exchange barrier + flags
        // int8 route: x words [M][KR + 16] (one token value replicated in 4 bytes, mu::i8_slot order
        // per 16-k slab), then per (row, 128-block) the dequantisation factor and offset [MP][KR/128];
        // swapped route: half2 {x, x} words [M][KR + 16], then (mul1) per (row, 128-block) sums of x
        u32* xq = reinterpret_cast<u32*>(smem);
        const int xq_ld = p.k_split + 16;                           // words; 16 mod 32: no bank conflicts
        const int nkb = p.k_split / 128;
        float* q_scale = reinterpret_cast<float*>(smem + ((p.M * xq_ld * 4 + 15) & ~15));
        float* q_off = q_scale + MP * nkb;

        const int tiles_n = p.OC / 16;
        const mu::Decoder<K2> dec(lane);
        constexpr int NW = mu::Decoder<K2>::NW;
        u32* ring = tr + wave * RING_WORDS;                  // this wave's private trellis ring
        const u32 ring_addr = smem_addr(ring);
        u32 lane_words[NW];                                  // shared addresses: this lane's words, slot 0, tile 0
        #pragma unroll
        for (int q = 0; q < NW; ++q) lane_words[q] = ring_addr + 4 * dec.word(q);

        // The wave's tile rows: step s covers rows row0 + s*RB .. +RB-1 of tile columns
        // g*8 + wcol*TPW .. +TPW-1; the wave takes steps kslice, kslice + KW, ... (my_steps of them).
        const int k_begin = split * p.k_split;
        const int row0 = k_begin / 16;
        const int steps = p.k_split / (16 * RB);
        // (KW == 1 spelled out here and for the step below: the compiler cannot see kslice is 0 then)
        const int my_steps = KW == 1 ? steps : (steps - kslice + KW - 1) / KW;
        // XH: steps per A chunk (the word routes' A side comes in one, see main_loop_words)
        const int x_chunk_steps = WORDS ? steps : RING ? KW : (steps + p.x_chunks - 1) / p.x_chunks;
        const u32* src0 = reinterpret_cast<const u32*>(p.code) +
                          ((long long)(row0 + kslice * RB) * tiles_n + g * TILES_N + wcol * TPW) * W32;
        // this lane's 16-byte pieces of a stage: shared offset and global offset, fixed per lane
        u32 piece_dst[PER_LANE];
        int piece_src[PER_LANE];
        #pragma unroll
        for (int i = 0; i < PER_LANE; ++i) {
            const int c = i * ESCHA_WAVE + lane, r = c / (TPW * W32 / 4), o = c % (TPW * W32 / 4);
            piece_dst[i] = ring_addr + 4 * (r * TPW * W32 + 4 * o);
            piece_src[i] = r * tiles_n * W32 + 4 * o;
            if constexpr (PIN_ADDRESSES) {                 // (see the A addresses below)
                keep_in_register(piece_dst[i]);
                keep_in_register(piece_src[i]);
            }
        }
        const long long step_stride = (long long)KW * RB * tiles_n * W32;     // between the wave's steps
#if defined(ESCHA_AMD) && ESCHA_AMD_STAGED_COPY
        // gfx12 has no asynchronous global -> LDS copy (async_copy16 is synchronous there): the main
        // loop issues the loads of the stage it prefetches into VGPRs before decoding the current
        // stage and stores them to LDS after it, so the memory latency overlaps a stage of decode.
        // Off by default: hipRTC 6.4 (the users' route) spills the staged registers (400 bytes of
        // scratch for the M=1 config), clang-22 does not.
        auto load_step_regs = [&](const u32* src, StagedCopy16<PER_LANE>& st) {
            #pragma unroll
            for (int i = 0; i < PER_LANE; ++i)
                if (PIECES % ESCHA_WAVE == 0 || i * ESCHA_WAVE + lane < PIECES) st.load(i, src + piece_src[i]);
        };
        auto store_step_regs = [&](u32 slot_bytes, const StagedCopy16<PER_LANE>& st) {
            #pragma unroll
            for (int i = 0; i < PER_LANE; ++i)
                if (PIECES % ESCHA_WAVE == 0 || i * ESCHA_WAVE + lane < PIECES) st.store(i, piece_dst[i] + slot_bytes);
        };
#endif
        for (int i = threadIdx.x; i < 16 * RB; i += blockDim.x) reinterpret_cast<u32*>(zero16)[i] = 0u;
        for (int t = threadIdx.x; t < MP; t += blockDim.x) row_exp[t] = 0;    // (XH: overwritten after the wait)
        if (threadIdx.x == 4) flag[1] = (int)0x8FFF8FFFu;   // the codebook mask, read back below
        if (threadIdx.x == 5) flag[2] = 0;                  // the in-kernel prologue's "a row was raised"
#if ESCHA_XH_CHUNKS
        if (XH && threadIdx.x == 0) {
            // the A chunks' barriers (one arrival per row's copy, plus its bytes), at block start:
            // off the path from the dependency wait to the first copy
            if constexpr (RING)
                for (int s = 0; s < XR; ++s) {
                    mbar_init(x_bars + 8u * (u32)s, p.M);
                    mbar_init(x_bars + RING_EMPTY + 8u * (u32)s, WARPS);
                }
            else
                for (int c = 0; c * x_chunk_steps < steps; ++c) mbar_init(x_bars + 8u * (u32)c, p.M);
            fence_mbar_init();
        }
#endif
#if ESCHA_CLUSTER_EXCHANGE
        // SC: split 0's receive region (after the exchange region): its mbarrier, which expects the
        // other splits' partial rows, then those rows, [S - 1][M][COLS] fp32 (kernels/fused.py smem_layout)
        unsigned char* const sc_region = smem + p.off_exp + EX_BYTES;
        const u32 sc_bar = smem_addr(sc_region);
        if (SC && split == 0 && threadIdx.x == 0) {
            mbar_init(sc_bar, 1);
            mbar_arrive_expect_tx(sc_bar, (u32)((split_count() - 1) * p.M * COLS * 4));
            fence_mbar_init();
        }
        if (CL > 1 && threadIdx.x == 0) {
            // the exchange barrier (in the XH chunks' place: CL > 1 has no XH) expects the bytes of
            // the items the other blocks rotate, plus their flag words (prologue_f16)
            mbar_init(x_bars, 1);
            mbar_arrive_expect_tx(x_bars, cluster_bytes_in(p.M * (p.k_split / 128), cluster_rank()));
            fence_mbar_init();
        }
#endif
        #pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {               // start streaming the weights at once
            if (s < my_steps) copy_slot(src0 + s * step_stride, 4u * (u32)(s * SLOT_WORDS), piece_dst, piece_src, lane);
            async_commit();
        }
        // The layer's scales do not depend on the previous kernel either: fetch the block's rin /
        // s_in (its K range; the prep kernel's, not ours, with XH) and rout / s_out / bias (its
        // columns) into L2 now, so that the prologue and the epilogue do not wait for HBM
        if constexpr (!XH) {
            prefetch_l2_range(p.rin + k_begin, 2 * p.k_split, threadIdx.x, blockDim.x);
            if (p.s_in) prefetch_l2_range(p.s_in + k_begin, 4 * p.k_split, threadIdx.x, blockDim.x);
        }
        prefetch_l2_range(p.rout + g * COLS, 2 * COLS, threadIdx.x, blockDim.x);
        if (p.s_out) prefetch_l2_range(p.s_out + g * COLS, 4 * COLS, threadIdx.x, blockDim.x);
        if (p.bias) prefetch_l2_range(p.bias + g * COLS, 4 * COLS, threadIdx.x, blockDim.x);
        // The block's shared state above (zero bytes, mask, row exponents, XH's chunk barriers) is
        // complete for every thread from here on: a barrier before the wait, off the path after it.
        __syncthreads();
        // CL > 1: and every block's exchange barrier is initialised before any other block sends to
        // it (the only writes into another block). A relaxed cluster barrier after the init fence:
        // a release one compiles to MEMBAR.ALL.GPU (sm_90 ptxas), which would wait for the weights'
        // copies above.
        if constexpr (CL > 1) cluster_barrier_after_init();
#if ESCHA_CLUSTER_EXCHANGE
        // SC: announced to the cluster here, waited for before the first send (long after)
        if constexpr (SC) cluster_arrive_relaxed();
#endif
        // Launched as a programmatic dependent (NVIDIA): the weights above may stream while the
        // previous kernel finishes; x / xh and every global write (y, workspace, counters) wait.
        grid_dependency_wait();
        ESCHA_TRACE(1);                                      // the previous kernel has finished
        if constexpr (XH) {
            // The A operand was precomputed (prep kernel): the fp16 route's rotated rows, or the
            // swapped route's {x, x} words (4 bytes per value, already in mu::i8_slot order)
            constexpr int EB = SW ? 4 : 2;                      // bytes per value, in global and shared
            const u32 a_smem = SW ? smem_addr(xq) : smem_addr(xs);
            const int a_ld = SW ? xq_ld : xs_ld;                // values per shared row
            const unsigned char* a_src = reinterpret_cast<const unsigned char*>(p.xh);
#if ESCHA_XH_CHUNKS
            // ---- its rows' K range in p.x_chunks chunks of whole steps, one bulk copy per (row, chunk),
            // each chunk completing on its own mbarrier; the waves wait for a chunk at its first step
            // (main loop). All blocks copy x at once (at M = 16 as many bytes from L2 as the weights
            // they stream from HBM): in one piece before the first step it took 4.2 us of a 32 us call
            // (4096x14336; benchmarks/RESULTS.md session 12). The swapped route expanded fp16 rows
            // here until session 27: 2.9 us per block at M = 4 (8192x28672, session 26's trace).
            const int nchunks = (steps + x_chunk_steps - 1) / x_chunk_steps;
            // RING: the first RING_AHEAD chunks (into slots 0..RING_AHEAD - 1); the main loop sends
            // the rest. Sending every chunk's rows two ahead of the waves without a ring ran 1.007x the
            // time at M = 16 (H100, session 40: docs/experiments/s39-lazy-x-chunks.diff).
            const int sent = RING ? min(nchunks, RING_AHEAD) : nchunks;
            // lane 0 of each wave: a bulk copy takes uniform operands (per-lane values would make a
            // 32-way loop); chunk-major, so that chunk 0's copies go out first
            if (lane == 0)
                for (int t = wave; t < p.M * sent; t += WARPS) {
                    const int c = t / p.M, m = t - c * p.M;
                    const int k0 = c * x_chunk_steps * 16 * RB;
                    const u32 bytes = (u32)(chunk_halves(c, steps, x_chunk_steps) * EB);
                    mbar_arrive_expect_tx(x_bars + 8u * (u32)c, bytes);
                    bulk_copy_to_shared(a_smem + (u32)((m * a_ld + k0) * EB),
                                        a_src + ((long long)m * p.IC + k_begin + k0) * EB, bytes, x_bars + 8u * (u32)c);
                }
#else
            // ---- its rows' K range in one piece
            const int pieces_row = p.k_split * EB / 16;         // 16-byte pieces per row
            const DivMod by_row(pieces_row);                    // pieces < 2^22
            for (int c = threadIdx.x; c < p.M * pieces_row; c += blockDim.x) {
                int m, o;
                by_row(c, m, o);
                async_copy16(a_smem + (u32)(m * a_ld * EB + 16 * o),
                             a_src + ((long long)m * p.IC + k_begin) * EB + 16 * o);
            }
#endif
            if constexpr (SW && CB == CB_MUL1) {
                // mul1: the prep kernel's sums of x per (row, 128-block), after its words, into
                // [M][nkb] (in flight with the main loop's first weight stage; totalled after it)
                const float* sums =
                    reinterpret_cast<const float*>(reinterpret_cast<const u32*>(p.xh) + (long long)p.M * p.IC);
                const DivMod by_kb(nkb);
                for (int t = threadIdx.x; t < p.M * nkb; t += blockDim.x) {
                    int m, kb;
                    by_kb(t, m, kb);
                    async_copy4(smem_addr(q_scale + t), sums + (long long)m * (p.IC / 128) + k_begin / 128 + kb);
                }
            }
            for (int t = threadIdx.x; t < MP; t += blockDim.x) row_exp[t] = t < p.M ? p.xh_exp[t] : 0;
            // (row_exp: read in the epilogue, after the main loop's closing barrier)
#if !ESCHA_XH_CHUNKS
            async_commit();
            async_wait<0>();                                    // the A operand (and the first stages) landed
            __syncthreads();
#endif
        } else if constexpr (I8) {
            quantize_x(p, xq, xq_ld, q_scale, q_off, lane, wave);
        } else if constexpr (SW) {
            // the swapped route's A side: half2 {x, x} words in mu::i8_slot order; mul1 also keeps
            // the sum of each (row, 128-block) of x as stored (its weights are affine in the unit's sums)
            prologue_f16(p, row_exp, flag + 2, lane, wave, [&](int m, int kb, const float (&v)[4], float scale, bool) {
                half_t h[4];
                #pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int k = kb * 128 + 4 * lane + i;
                    h[i] = float_to_half(v[i] * scale);
                    xq[m * xq_ld + (k & ~15) + mu::i8_slot(k & 15)] = (u32)bit_cast<u16>(h[i]) * 0x00010001u;
                }
                if constexpr (CB == CB_MUL1) {
                    const float sum = wave_sum_halves4(h);
                    if (lane == 0) q_scale[m * nkb + kb] = sum;
                }
            }, x_ex);
            if constexpr (CB == CB_MUL1) row_totals(p, q_scale, 1.f);
        } else {
            // ---- prologue: the block's K range of x -> scaled, Hadamard-rotated fp16 A operand
            prologue_f16(p, row_exp, flag + 2, lane, wave, [&](int m, int kb, const float (&v)[4], float scale, bool share) {
                half_t* dst = xs + m * xs_ld + kb * 128 + 4 * lane;
                const u64 h = half4_bits(v, scale);
                *reinterpret_cast<u64*>(dst) = h;
#if ESCHA_CLUSTER_EXCHANGE
                if (CL > 1 && share) {                          // and into the cluster's other blocks
                    const u32 rank = cluster_rank();
                    #pragma unroll
                    for (int q = 1; q < CL; ++q) {
                        const u32 r = (rank + (u32)q) % CL;
                        st_async_u64(cluster_map(smem_addr(dst), r), h, cluster_map(x_bars, r));
                    }
                }
#endif
            }, x_ex);
        }

        ESCHA_TRACE(2);                                      // A operand ready
        float acc[MT][TPW][mu::ACC];
        fill(acc, 0.f);
        if constexpr (WORDS) {
            const u32 mask = reinterpret_cast<const u32*>(flag)[1];
            main_loop_words(p, acc, xq, xq_ld, q_scale, zero16, src0, step_stride, piece_dst, piece_src, lane_words,
                            dec, steps, lane, mask, x_bars);
        } else {
        // A operand addresses of this lane (ldmatrix: lane l supplies row l % 16); rows >= M read
        // the zero bytes instead (their column step is 0: RB x 32 of them are read, so that a step's RB
        // fragments sit at compile-time offsets 32 r from one per-step address for every lane and
        // fold into the loads' immediates).
        u32 a_addr[MT], a_step[MT];
        #pragma unroll
        for (int a = 0; a < MT; ++a) {
            const int m = 16 * a + (lane & 15);
            const bool valid = m < p.M;
            a_addr[a] = valid ? smem_addr(xs + m * xs_ld + 8 * (lane >> 4)) : smem_addr(zero16);
            a_step[a] = valid ? 32u : 0u;                      // bytes per 16 columns
            if constexpr (PIN_ADDRESSES) {
                keep_in_register(a_addr[a]);
                keep_in_register(a_step[a]);
            }
        }
        // The codebook's AND mask comes from shared memory: the compiler cannot see it is a
        // constant, so it keeps it in a register (LOP3 takes one immediate; a visible constant
        // is re-materialised with a MOV before every use).
        const u32 cb_mask = reinterpret_cast<const u32*>(flag)[1];
#if ESCHA_XH_CHUNKS
        u32 x_bar = x_bars;                                  // the next A chunk's mbarrier (XH)
        int x_next = 0;                                      // and its first step
#endif
        int rslot = 0;                                       // RING: this step's chunk's slot
        u32 rphase = 0;                                      // and its full barrier's phase

        // ---- main loop: wave-private pipeline, decode all tiles of a step, then multiply
        RingCursor ring_at(src0, step_stride);
        for (int i = 0; i < my_steps; ++i) {
            const int step = KW == 1 ? i : kslice + i * KW;        // the block's step
            async_wait<STAGES - 2>();
            wave_sync();
#if ESCHA_XH_CHUNKS
            if constexpr (RING) {
                // every step of a wave is its step of chunk i: leave chunk i - 1, send chunk
                // i + RING_AHEAD (into the slot all waves have left), wait for chunk i
                if (lane == 0) {
                    if (i > 0) mbar_arrive(x_bars + RING_EMPTY + 8u * (u32)(rslot == 0 ? XR - 1 : rslot - 1));
                    if ((i + RING_AHEAD) * KW < steps) send_ring_chunk(p, smem_addr(xs), i + RING_AHEAD, steps, x_bars, wave);
                }
                mbar_wait(x_bars + 8u * (u32)rslot, rphase);
            } else if constexpr (KW == 1) {
                if (XH && step == x_next) {                   // this step starts an A chunk: wait for it
                    mbar_wait(x_bar, 0);
                    x_bar += 8u;
                    x_next += x_chunk_steps;
                }
            } else {
                while (XH && step >= x_next) {                // K slices skip steps: every chunk up to it
                    mbar_wait(x_bar, 0);
                    x_bar += 8u;
                    x_next += x_chunk_steps;
                }
            }
#endif
#if defined(ESCHA_AMD) && ESCHA_AMD_STAGED_COPY
            StagedCopy16<PER_LANE> staged;
            const bool prefetch = i + STAGES - 1 < my_steps;
            if (prefetch) load_step_regs(ring_at.src, staged);
#else
            if (i + STAGES - 1 < my_steps) copy_slot(ring_at.src, ring_at.write, piece_dst, piece_src, lane);
#endif
            async_commit();
            const u32 slot = ring_at.read;
#if defined(ESCHA_AMD)
            // one add per word and step; the tile offsets below then fold into the ds_load offset
            // field (without the opaque base LLVM keeps one VGPR per (word, tile) and adds 2 VALU per load)
            u32 word_base[NW];
            #pragma unroll
            for (int q = 0; q < NW; ++q) word_base[q] = opaque_u32(lane_words[q] + slot);
            const u32 slot_rest = 0;
#else
            const u32* word_base = lane_words;
            const u32 slot_rest = slot;
#endif
            mu::BFrag bf[RB][TPW];
            #pragma unroll
            for (int r = 0; r < RB; ++r)
                #pragma unroll
                for (int b = 0; b < TPW; ++b) {
                    u32 w[NW];
                    #pragma unroll
                    for (int q = 0; q < NW; ++q) w[q] = lds32(word_base[q] + slot_rest + 4 * (r * TPW + b) * W32);
#if ESCHA_FUSED_DIAG == 1
                    #pragma unroll
                    for (int q = 0; q < 4; ++q) bf[r][b].h[q] = bit_cast<half2_t>(w[q % NW] & 0x3BFF3BFFu);
#else
                    dec.template decode<CB>(bf[r][b], w, cb_mask);
#endif
                }
#if ESCHA_FUSED_DIAG == 2
            #pragma unroll
            for (int r = 0; r < RB; ++r)
                #pragma unroll
                for (int b = 0; b < TPW; ++b)
                    #pragma unroll
                    for (int q = 0; q < 4; ++q) acc[0][b][q] += half_to_float(low_half(bf[r][b].h[q]));
#else
            #pragma unroll
            for (int r = 0; r < RB; ++r)
                #pragma unroll
                for (int a = 0; a < MT; ++a) {
                    mu::AFrag af;
                    mu::load_a_rows(af, a_addr[a] + (u32)((RING ? rslot * KW + kslice : step) * RB) * a_step[a] + 32u * (u32)r);
                    #pragma unroll
                    for (int b = 0; b < TPW; ++b) mu::mma(acc[a][b], af, bf[r][b]);
                }
#endif
#if defined(ESCHA_AMD) && ESCHA_AMD_STAGED_COPY
            if (prefetch) store_step_regs(ring_at.write, staged);
#endif
            ring_at.advance(step_stride);
            if constexpr (RING) {
                if (++rslot == XR) {
                    rslot = 0;
                    rphase ^= 1u;
                }
            }
            wave_sync();      // every lane done reading this slot before it is refilled
        }
        }   // not I8
        async_wait<0>();
        __syncthreads();
        // the ring is free: the output factors into it, in flight while the block stages its sums
        // (addressed from red, which follows the ring in kernels/fused.py smem_layout: a pointer of
        // its own, live across the main loop, spilled 16-wave kernels at their 128 registers)
        float* const f_s_out = red - TR_BYTES / 4;
        if constexpr (STAGED_FACTORS) stage_factors(p, reinterpret_cast<u32*>(f_s_out));
        // the swapped route's mul1 sums from the prep kernel (copied in with the first stage): totals
        if constexpr (XH && SW && CB == CB_MUL1) row_totals(p, q_scale, 1.f);
        ESCHA_TRACE(3);                                      // main loop done (all waves)
        // With the prep kernel (XH), the next call's prep grid may be scheduled from here on (it
        // waits in-kernel for this grid to end): its launch overlaps this epilogue.
        if constexpr (XH) grid_dependents_launch();

        // ---- epilogue: up to EM m tiles at a time through shared memory [16 * EM][COLS], then one
        // pass out (their partial, or y). MT > 1: staged in the A operand's region, free after the
        // main loop and at least that large (kernels/fused.py smem_layout); one tile at a time through
        // `red` took three block barriers and a partial write per tile (H200, 4096x14336 M = 64: 2.7 us
        // of a block's 14; benchmarks/RESULTS.md session 38). The word routes have one m tile.
        const int S = split_count();
        const int mtiles = (p.M + 15) / 16;
        float* const st = MT > 1 ? reinterpret_cast<float*>(smem) : red;
        #pragma unroll
        for (int a0 = 0; a0 < MT; a0 += EM) {
#if defined(ESCHA_AMD)
            if (a0 >= mtiles) continue;     // keep the trip count: clang unrolls unknown trip counts only up to 8
#else
            if (a0 >= mtiles) break;
#endif
            if constexpr (I8)
                stage_rows_i8(red, acc[0], q_off, nkb, lane, wave);
            else if constexpr (SW)
                stage_rows_sw(red, acc[0], row_exp, q_scale, nkb, lane, wave);
            else {
                #pragma unroll
                for (int ks = 0; ks < KW; ++ks) {           // the K slices add theirs in order
                    if (ks > 0) __syncthreads();
                    #pragma unroll
                    for (int a = a0; a < a0 + EM && a < MT; ++a)
                        if ((a == a0 || a < mtiles) && kslice == ks) {     // (tile a0 < mtiles: above)
                            if (ks == 0) stage_rows(st + 16 * (a - a0) * RED_LD, acc[a], row_exp + 16 * a, lane, wcol);
                            else stage_rows<true>(st + 16 * (a - a0) * RED_LD, acc[a], row_exp + 16 * a, lane, wcol);
                        }
                }
            }
            if (S == 1 && STAGED_FACTORS) async_wait<0>();  // the output factors (read by store_rows)
            __syncthreads();
#if ESCHA_CLUSTER_EXCHANGE
            if (SC && S > 1) {                              // (one pass: MT == 1)
                cluster_wait();                             // split 0's receive barrier is initialised
                if (split != 0) {                           // partial rows -> split 0 (st.async), then done
                    const u32 bar0 = cluster_map(sc_bar, 0);
                    const u32 dst0 = cluster_map(sc_bar + 16u + (u32)((split - 1) * p.M * COLS * 4), 0);
                    for (int t = threadIdx.x; t < p.M * COLS / 4; t += blockDim.x) {
                        const int r = t / (COLS / 4), c = 4 * (t % (COLS / 4));
                        st_async_f32x4(dst0 + (u32)((r * COLS + c) * 4),
                                       *reinterpret_cast<const f32x4*>(st + r * RED_LD + c), bar0);
                    }
                    ESCHA_TRACE(4);                          // partial sent
                    if constexpr (STAGED_FACTORS) async_wait<0>();
                    return;
                }
                mbar_wait(sc_bar, 0);                       // every other split's rows are in
                ESCHA_TRACE(5);
                for (int t = threadIdx.x; t < p.M * COLS / 4; t += blockDim.x) {
                    const int r = t / (COLS / 4), c = 4 * (t % (COLS / 4));
                    const f32x4 own = *reinterpret_cast<const f32x4*>(st + r * RED_LD + c);
                    f32x4 sum = {0.f, 0.f, 0.f, 0.f};       // the workspace route's order: split 0, 1, ...
                    sum.x += own.x; sum.y += own.y; sum.z += own.z; sum.w += own.w;
                    for (int s2 = 1; s2 < S; ++s2) {
                        const f32x4 v = *reinterpret_cast<const f32x4*>(
                            sc_region + 16 + (((s2 - 1) * p.M + r) * COLS + c) * 4);
                        sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
                    }
                    *reinterpret_cast<f32x4*>(st + r * RED_LD + c) = sum;
                }
                if constexpr (STAGED_FACTORS) async_wait<0>();
                __syncthreads();
                store_rows(p, st, f_s_out, 0, lane, wave);
                ESCHA_TRACE(6);                              // split 0: y written
                return;
            }
#endif
            if (S > 1) {                                    // partial -> workspace [S][M][OC]
                for (int t = threadIdx.x; t < ER * COLS / 4; t += blockDim.x) {
                    const int r = t / (COLS / 4), c = 4 * (t % (COLS / 4)), m = 16 * a0 + r;
                    if (m < p.M)
                        *reinterpret_cast<f32x4*>(p.ws + ((long long)split * p.M + m) * p.OC + g * COLS + c) =
                            *reinterpret_cast<const f32x4*>(st + r * RED_LD + c);
                }
            } else {
                store_rows(p, st, f_s_out, 16 * a0, lane, wave);
            }
            __syncthreads();
        }
        ESCHA_TRACE(4);                                      // partials written (or y, S = 1)
        if (S == 1) return;
        // publish this block's partial, count it; the last block to count sees every partial
        // (platform headers: release / acquire around one atomic, in the vendor's cheapest form)
        partials_release();
        __syncthreads();
        if (threadIdx.x == 0) *flag = atomic_add_acq_rel(p.counters + g, 1) == S - 1;
        __syncthreads();
        ESCHA_TRACE(5);                                      // counter bumped
        if (!*flag) {                                       // not the last block of this column group
            if constexpr (STAGED_FACTORS) async_wait<0>();  // (no copy into shared memory outlives the block)
            return;
        }
        partials_acquire();
        for (int m0 = 0; m0 < p.M; m0 += ER) {              // EM tiles a pass: their rows' loads in flight at once
            for (int t = threadIdx.x; t < ER * COLS / 4; t += blockDim.x) {
                const int r = t / (COLS / 4), c = 4 * (t % (COLS / 4)), m = m0 + r;
                f32x4 sum = {0.f, 0.f, 0.f, 0.f};
                if (m < p.M)
                    for (int s = 0; s < S; ++s) {           // fixed order: deterministic
                        const f32x4 v = load_coherent(reinterpret_cast<const f32x4*>(
                            p.ws + ((long long)s * p.M + m) * p.OC + g * COLS + c));
                        sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
                    }
                *reinterpret_cast<f32x4*>(st + r * RED_LD + c) = sum;
            }
            if constexpr (STAGED_FACTORS) async_wait<0>();  // the output factors (read by store_rows)
            __syncthreads();
            store_rows(p, st, f_s_out, m0, lane, wave);
            __syncthreads();
        }
        if (threadIdx.x == 0) p.counters[g] = 0;            // ready for the next call
        ESCHA_TRACE(6);                                      // last block: y written
    }

    // ---- int8 route
    // Prologue: per (row m, 128-block kb) of the block's K range, q = round(v * 127 / amax) of the
    // Hadamard-rotated row (v = H128(x * s_in * rin), amax = max |v| over the block; one wave per
    // item, no block-wide reduction) stored as 4 replicated bytes per word in mu::i8_slot order;
    // q_scale = amax / 127 * MUL1_SCALE multiplies the item's integer sums sum_k q_k * B_k, and
    // q_off[m][0] ends up holding MUL1_OFFSET * sum_kb (amax / 127) * sum_k q_k, the part of
    // sum_k q_k * w_k that does not depend on the output column (w = MUL1_SCALE * B - MUL1_OFFSET).
    ESCHA_DEVICE static void quantize_x(const Args& p, u32* xq, int xq_ld, float* q_scale, float* q_off,
                                        int lane, int wave) {
        const int nkb = p.k_split / 128;
        for (int t = p.M * nkb + threadIdx.x; t < MP * nkb; t += blockDim.x) q_scale[t] = q_off[t] = 0.f;
        rotated_items<4>(p, lane, wave, [](int) { return true; }, [&](int m, int kb, float (&v)[4]) {
            float amax = 0.f;
            #pragma unroll
            for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(v[i]));
            #pragma unroll
            for (int s = 16; s > 0; s >>= 1) amax = fmaxf(amax, shfl_xor(amax, s));
            const float inv = amax > 0.f ? 127.f / amax : 0.f;
            int qsum = 0;
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int q = max(-127, min(127, (int)rintf(v[i] * inv)));
                qsum += q;
                const int k = kb * 128 + 4 * lane + i;
                xq[m * xq_ld + (k & ~15) + mu::i8_slot(k & 15)] = ((u32)q & 0xFFu) * 0x01010101u;
            }
            #pragma unroll
            for (int s = 16; s > 0; s >>= 1) qsum += (int)shfl_xor((u32)qsum, s);
            if (lane == 0) {
                const float step = amax / 127.f;
                q_scale[m * nkb + kb] = step * MUL1_SCALE;
                q_off[m * nkb + kb] = step * (float)qsum;
            }
        });
        __syncthreads();
        row_totals(p, q_off, MUL1_OFFSET);
    }

    // t[m * nkb] = scale * the sum over the block's 128-blocks kb of t[m * nkb + kb], per row m < M,
    // in a fixed order (deterministic); then a block barrier.
    ESCHA_DEVICE static void row_totals(const Args& p, float* t, float scale) {
        const int nkb = p.k_split / 128;
        for (int m = threadIdx.x; m < p.M; m += blockDim.x) {
            float o = 0.f;
            for (int kb = 0; kb < nkb; ++kb) o += t[m * nkb + kb];
            t[m * nkb] = o * scale;
        }
        __syncthreads();
    }

    // Main loop of the int8 route: per tile row, decode TPW tiles to hashes and run the s8 x u8
    // unit into int32 sums; every 128 input features (8 tile rows) fold the sums into fp32 with
    // the block's dequantisation factor of the row (|sum| <= 128 * 1020 * 127 < 2^24: exact).
    // (With SW the same loop runs the swapped fp16 route: two-half words instead of hashes, the f16
    // unit straight into the fp32 accumulators, no folding.)
    // Both routes serve M <= 8: one n8 token group of the swapped unit (tokens 8..15 of the unit
    // never computed; at M = 9..16 the swapped fp16 route measured slower than the fp16 route on
    // the H200, kernels/fused.py SWAP_MAX_M).
    template <typename Dec, typename LW>
    ESCHA_DEVICE static void main_loop_words(const Args& p, float (&acc)[MT][TPW][mu::ACC], const u32* xq, int xq_ld,
                                             const float* q_scale, const half_t* zero, const u32* src0,
                                             long long step_stride, const u32 (&piece_dst)[PER_LANE],
                                             const int (&piece_src)[PER_LANE], const LW& lane_words, const Dec& dec,
                                             int steps, int lane, u32 mask, u32 x_bar) {
        constexpr int NW = Dec::NW;
        const int nkb = p.k_split / 128;
        u32 a_addr[MT][2], a_step[MT][2];
        const float* sc_row[MT][mu::ACC];
        #pragma unroll
        for (int a = 0; a < MT; ++a) {
            #pragma unroll
            for (int part = 0; part < 2; ++part) {     // tokens >= M read zeros with a column step of 0
                const int m = 16 * a + mu::i8_x_row(lane, part);
                a_addr[a][part] = m < p.M ? smem_addr(xq + m * xq_ld + mu::i8_x_word(lane, part))
                                          : smem_addr(zero) + 16u * (u32)part;
                a_step[a][part] = m < p.M ? 64u : 0u;   // bytes per 16-k slab
            }
            #pragma unroll
            for (int i = 0; i < mu::ACC; ++i) sc_row[a][i] = I8 ? q_scale + (16 * a + mu::i8_acc_row(lane, i)) * nkb : nullptr;
        }
        int iacc[MT][TPW][mu::ACC];
        fill(iacc, 0);
        // dot route (M = 1): token 0's words for every lane, per-column integer partial sums
        u32 x0_addr[2];
        #pragma unroll
        for (int part = 0; part < 2; ++part) x0_addr[part] = smem_addr(xq + mu::i8_x_word(lane, part));
        int dpart[TPW][mu::I8_DOT_COLS];
        fill(dpart, 0);
        RingCursor ring_at(src0, step_stride);
#if ESCHA_XH_CHUNKS
        // XH: the A operand arrives as one chunk (x_chunk_steps = steps here): waited for before
        // the loop. A wait per chunk inside it cost ptxas 5-46 instructions per step (a test per
        // step) or 96 -> 114 registers (a loop over chunks around the step loop).
        if constexpr (XH) mbar_wait(x_bar, 0);
#endif
        for (int step = 0; step < steps; ++step) {
            async_wait<STAGES - 2>();
            wave_sync();
            if (step + STAGES - 1 < steps) copy_slot(ring_at.src, ring_at.write, piece_dst, piece_src, lane);
            async_commit();
            const u32 slot = ring_at.read;
            #pragma unroll
            for (int r = 0; r < RB; ++r) {
                mu::BFragI8 bf[TPW];
                #pragma unroll
                for (int b = 0; b < TPW; ++b) {
                    u32 w[NW];
                    #pragma unroll
                    for (int q = 0; q < NW; ++q) w[q] = lds32(lane_words[q] + slot + 4 * (r * TPW + b) * W32);
#if ESCHA_FUSED_DIAG == 1
                    #pragma unroll
                    for (int j = 0; j < 8; ++j) bf[b].w[j] = w[j % NW] & 0x3BFF3BFFu;    // raw words, no decode
#else
                    if constexpr (SW)
                        dec.template swap_words<CB>(bf[b].w, w, mask);
                    else
                        dec.hashes(bf[b].w, w);
#endif
                }
                const int row = step * RB + r;                      // tile row inside the block's K range
#if ESCHA_FUSED_DIAG == 2
                // no matrix unit (nor its x loads): the decoded words folded into one accumulator
                #pragma unroll
                for (int b = 0; b < TPW; ++b) {
                    const u32 f = (bf[b].w[0] ^ bf[b].w[1] ^ bf[b].w[2]) ^ (bf[b].w[3] ^ bf[b].w[4] ^ bf[b].w[5]) ^
                                  (bf[b].w[6] ^ bf[b].w[7]);
                    acc[0][b][0] += bit_cast<float>(f & 0x3BFF3BFFu);
                }
                continue;
#endif
                if constexpr (DOT) {
                    mu::XFragI8 xf;
                    mu::load_x_i8(xf, x0_addr[0] + 64u * (u32)row, x0_addr[1] + 64u * (u32)row);
                    #pragma unroll
                    for (int b = 0; b < TPW; ++b)
                        #pragma unroll
                        for (int j = 0; j < 8; ++j)
                            dpart[b][mu::i8_dot_col(j)] = dot4_s8u8(mu::i8_dot_x(xf, mu::i8_dot_word(j)), bf[b].w[j],
                                                                     dpart[b][mu::i8_dot_col(j)]);
                    if ((row & 7) == 7) {
                        const float f = q_scale[row >> 3];          // token 0's factor of this 128-block
                        #pragma unroll
                        for (int b = 0; b < TPW; ++b)
                            #pragma unroll
                            for (int c = 0; c < mu::I8_DOT_COLS; ++c) {
                                int v = dpart[b][c];
                                #pragma unroll
                                for (int m : mu::I8_DOT_REDUCE) v += (int)shfl_xor((u32)v, m);
                                const int idx = mu::i8_dot_acc(lane, c);
                                #pragma unroll
                                for (int i = 0; i < mu::ACC; ++i)
                                    if (i == idx) acc[0][b][i] += (float)v * f;
                                dpart[b][c] = 0;
                            }
                    }
                    continue;
                }
                #pragma unroll
                for (int a = 0; a < MT; ++a) {
                    mu::XFragI8 xf;
                    // one per-step address, the step's slabs at compile-time offsets 64 r (rows >= M:
                    // inside the RB x 64 zero bytes): the offsets fold into the loads' immediates
                    const u32 slab = 64u * (u32)r;
                    mu::load_x_i8(xf, a_addr[a][0] + (u32)(step * RB) * a_step[a][0] + slab,
                                  a_addr[a][1] + (u32)(step * RB) * a_step[a][1] + slab);
                    #pragma unroll
                    for (int b = 0; b < TPW; ++b) {
                        if constexpr (SW)
                            mu::mma_sw(acc[a][b], xf, bf[b]);
                        else
                            mu::mma_i8(iacc[a][b], xf, bf[b]);
                    }
                }
                if (I8 && (row & 7) == 7) {                         // end of a 128-feature block
                    const int kb = row >> 3;
                    #pragma unroll
                    for (int a = 0; a < MT; ++a)
                        #pragma unroll
                        for (int i = 0; i < mu::ACC; ++i) {
                            const float f = sc_row[a][i][kb];
                            #pragma unroll
                            for (int b = 0; b < TPW; ++b) {
                                acc[a][b][i] += (float)iacc[a][b][i] * f;
                                iacc[a][b][i] = 0;
                            }
                        }
                }
            }
            ring_at.advance(step_stride);
            wave_sync();      // every lane done reading this slot before it is refilled
        }
    }

    // A wave's place in its ring, advanced once per step: the slot being decoded (bytes from slot 0),
    // the slot the step STAGES - 1 ahead streams into, and that step's first weight word. Running
    // offsets instead of `step % STAGES` and `src0 + step * stride`: on sm_90 those cost a
    // multiply-high division and a 64-bit product per step (~20 instructions per K4 mcg step of 4
    // tiles, predicated or not).
    struct RingCursor {
        static_assert(STAGES >= 2, "the ring streams STAGES - 1 steps ahead");
        static constexpr u32 SLOT_BYTES = 4u * SLOT_WORDS, RING_BYTES = 4u * RING_WORDS;
        u32 read = 0, write = (STAGES - 1) * SLOT_BYTES;
        const u32* src;
        ESCHA_DEVICE RingCursor(const u32* src0, long long step_stride) : src(src0 + (STAGES - 1) * step_stride) {}
        ESCHA_DEVICE static u32 next(u32 b) { b += SLOT_BYTES; return b == RING_BYTES ? 0u : b; }
        ESCHA_DEVICE void advance(long long step_stride) { read = next(read); write = next(write); src += step_stride; }
    };

    // One stage of the wave's trellis tiles (RB rows x TPW tiles, first word `src`) into the ring slot
    // at `slot_bytes`: this lane's 16-byte async copies (shared / global offsets per piece fixed per
    // lane, see run()).
    ESCHA_DEVICE static void copy_slot(const u32* src, u32 slot_bytes, const u32 (&piece_dst)[PER_LANE],
                                       const int (&piece_src)[PER_LANE], int lane) {
        #pragma unroll
        for (int i = 0; i < PER_LANE; ++i)
            if (PIECES % ESCHA_WAVE == 0 || i * ESCHA_WAVE + lane < PIECES)
                async_copy16(piece_dst[i] + slot_bytes, src + piece_src[i]);
    }

    // The block's items (row m, 128-block kb) of x, one wave per item: visit(m, kb, v) receives
    // v = H128(x * s_in * rin) * HAD128_SCALE of this lane's 4 features. BATCH items per wave have
    // their global loads in flight together (the prologue is on the critical path before the first
    // matrix-unit step: one memory latency per batch, not per item): the loads of every item are
    // issued (load_raw4) before any is used (scale_raw4). Items whose row fails keep(m) are
    // neither loaded nor visited. SHARE (CL > 1): only this block's share of the cluster's items.
    template <int BATCH, bool SHARE = false, typename Keep, typename Visit>
    ESCHA_DEVICE static void rotated_items(const Args& p, int lane, int wave, Keep keep, Visit visit) {
        constexpr int CS = SHARE ? CL : 1;                   // blocks the items are dealt to
        const int nkb = p.k_split / 128, items = p.M * nkb;
        const DivMod by_nkb(nkb);                            // item -> (row, 128-block): items < 2^22
        const int k_begin = split_index() * p.k_split;
        const bool vec = p.in_valid == p.IC && (p.ldx % 8) == 0 && (reinterpret_cast<u64>(p.x) % 16) == 0;
        // SHARE: wave w of the block of rank r takes items r*WARPS + w + k*CL*WARPS (the cluster's
        // blocks interleave in runs of WARPS items; cluster_bytes_in counts them)
        const int first = CS > 1 ? (int)cluster_rank() * WARPS + wave : wave;
        for (int item0 = first; item0 < items; item0 += BATCH * WARPS * CS) {
            Raw4 raw[BATCH];
#if ESCHA_FUSED_DIAG != 3
            #pragma unroll
            for (int u = 0; u < BATCH; ++u) {
                int m, kb;
                by_nkb(item0 + u * WARPS * CS, m, kb);
                if (item0 + u * WARPS * CS < items && keep(m)) load_raw4(p, m, k_begin + kb * 128 + 4 * lane, vec, raw[u]);
            }
#endif
            #pragma unroll
            for (int u = 0; u < BATCH; ++u) {
                if (item0 + u * WARPS * CS >= items) break;
                int m, kb;                                   // recomputed: fewer registers held than 2 x BATCH
                by_nkb(item0 + u * WARPS * CS, m, kb);
                if (!keep(m)) continue;
                float v[4];
#if ESCHA_FUSED_DIAG != 3
                scale_raw4(p, raw[u], v);
                hadamard128_lane(v, lane);
#else
                #pragma unroll
                for (int i = 0; i < 4; ++i) v[i] = 1.f;
#endif
                #pragma unroll
                for (int i = 0; i < 4; ++i) v[i] *= HAD128_SCALE;
                visit(m, kb, v);
            }
        }
    }

    // The fp16 A side of the fp16 routes (store(m, kb, v, scale, share) writes v * scale in the
    // route's layout; share: also into the cluster's other blocks, CL > 1). Optimistic single pass:
    // every item is stored unscaled; a row with a value that would not fit fp16 (|v| >= 2^15, e.g.
    // large bf16 activations) gets the power-of-two exponent it needs (atomicMax over its items),
    // sets *raised, and is redone in a second pass (rare; skipped with its barrier when no row was
    // raised). row_exp (zero) and *raised (0) were set at block start, before a block barrier.
    //
    // CL > 1: each block rotates its share of the items and sends them to the other blocks with
    // st.async, which completes their bytes on the receiver's exchange barrier `ex_bar` (armed at
    // block start with cluster_bytes_in). A cluster barrier would order them too, but its release
    // is a MEMBAR.ALL.GPU (sm_90 ptxas); without it and with the first cluster barrier relaxed the
    // calls took 0.957x the time (4096x4096 M = 16, benchmarks/RESULTS.md session 31). An item
    // that does not fit is sent all the same (the byte counts are fixed) and only noted; each block
    // then sends one flag word to the others, and if any block noted one, every block redoes the
    // whole prologue alone (the CL = 1 passes below, over all the items, into its own memory), so
    // the result is bit for bit the one-block prologue's.
    template <typename Store>
    ESCHA_DEVICE static void prologue_f16(const Args& p, int* row_exp, int* raised, int lane, int wave, Store store,
                                          u32* ex) {
#if ESCHA_CLUSTER_EXCHANGE
        if constexpr (CL > 1) {
            rotated_items<4, true>(p, lane, wave, [](int) { return true; }, [&](int m, int kb, float (&v)[4]) {
                float amax = 0.f;
                #pragma unroll
                for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(v[i]));
                fp16_fits_or(amax, lane, [&](int) { *raised = 1; });
                store(m, kb, v, 1.f, true);
            });
            __syncthreads();                                   // this block's items in, *raised final
            const u32 ex_bar = smem_addr(ex), rank = cluster_rank();
            const u32* flags_in = ex + 2;                      // [CL]: the other blocks' flags
            if (threadIdx.x == 0) {
                #pragma unroll
                for (int q = 1; q < CL; ++q) {
                    const u32 r = (rank + (u32)q) % CL;
                    st_async_u32(cluster_map(ex_bar + 8u + 4u * rank, r), (u32)*raised, cluster_map(ex_bar, r));
                }
            }
            mbar_wait(ex_bar, 0);                              // the other blocks' items and flags in
            u32 any = (u32)*raised;
            #pragma unroll
            for (int q = 0; q < CL; ++q) any |= (u32)q != rank ? flags_in[q] : 0u;
            if (!any) return;                                  // cluster-uniform: every block saw every flag
            __syncthreads();                                   // (rare) every thread has read *raised
            if (threadIdx.x == 0) *raised = 0;
            __syncthreads();
        }
#endif
        // The rare passes (CL > 1: this whole one; the rows redone below) go one item per wave at a
        // time: each batched item is another unrolled copy of the rotation (a K2 mcg kernel 4328 ->
        // 3768 instructions for the redo alone, benchmarks/RESULTS.md session 36), compiled into
        // every kernel and almost never run. The common passes (and the shared one above) take 4 items
        // per wave at a time, 32 in flight per 8-wave block (every item of M <= 4 at k_split <= 1024):
        // each batched item is ~260 SASS instructions, and 8 made the kernels ~1.3x larger and their
        // cold compiles ~1.2x longer (benchmarks/RESULTS.md session 37); at M = 16, where a block has
        // more items, the rotation is bound by its shuffles' issue, not by load latency (session 16).
        rotated_items<CL == 1 ? 4 : 1>(p, lane, wave, [](int) { return true; }, [&](int m, int kb, float (&v)[4]) {
            float amax = 0.f;
            #pragma unroll
            for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(v[i]));
            if (fp16_fits_or(amax, lane, [&](int e) { atomicMax(row_exp + m, e); *raised = 1; }))
                store(m, kb, v, 1.f, false);
        });
        __syncthreads();
        if (!*raised) return;                                    // block-uniform
        rotated_items<1>(p, lane, wave, [&](int m) { return row_exp[m] != 0; }, [&](int m, int kb, float (&v)[4]) {
            store(m, kb, v, exp2i(-row_exp[m]), false);          // the rare rows, redone
        });
        __syncthreads();
    }

    // Bytes the other blocks of the cluster send into block `rank` in prologue_f16: 256 per item
    // they rotate (32 lanes x 4 halves; rotated_items deals the items to the blocks in runs of
    // WARPS), and one 4-byte flag word each.
    ESCHA_DEVICE static u32 cluster_bytes_in(int items, u32 rank) {
        const int cycle = WARPS * CL, full = items / cycle;
        const int mine = full * WARPS + min(WARPS, max(0, items - full * cycle - (int)rank * WARPS));
        return 256u * (u32)(items - mine) + 4u * (CL - 1);
    }

    // One m tile of the swapped route's accumulators (times 2^row_exp) -> shared [16][COLS]. mul1:
    // the unit summed (lo + hi) * x = (B - 510) * x, so the partial is MUL1_SCALE * acc minus
    // MUL1_SWAP_OFFSET times the row's sum of x over this block's K range (xsum[r * nkb]).
    ESCHA_DEVICE static void stage_rows_sw(float* red, const float (&acc)[TPW][mu::ACC], const int* exps,
                                           const float* xsum, int nkb, int lane, int wave) {
        #pragma unroll
        for (int b = 0; b < TPW; ++b)
            #pragma unroll
            for (int i = 0; i < mu::ACC; ++i) {
                const int r = mu::i8_acc_row(lane, i);
                const float v = CB == CB_MUL1 ? acc[b][i] * MUL1_SCALE - MUL1_SWAP_OFFSET * xsum[r * nkb] : acc[b][i];
                red[r * RED_LD + (wave * TPW + b) * 16 + mu::i8_acc_col(lane, i)] = v * exp2i(exps[r]);
            }
    }

    // One m tile of the int8 route's accumulators minus the row's column-independent part -> shared.
    ESCHA_DEVICE static void stage_rows_i8(float* red, const float (&acc)[TPW][mu::ACC], const float* off,
                                           int nkb, int lane, int wave) {
        #pragma unroll
        for (int b = 0; b < TPW; ++b)
            #pragma unroll
            for (int i = 0; i < mu::ACC; ++i) {
                const int r = mu::i8_acc_row(lane, i);
                red[r * RED_LD + (wave * TPW + b) * 16 + mu::i8_acc_col(lane, i)] = acc[b][i] - off[r * nkb];
            }
    }

    // x[m, k..k+3], rin[k..k+3] and s_in[k..k+3] as loaded (raw words; x zero beyond the logical
    // input width): load_raw4 only issues the loads, scale_raw4 turns them into fp32
    // x * s_in * rin, so that a batch has all its loads in flight before it waits for one.
    struct Raw4 { u32 x[sizeof(in_t)]; u32 r[2]; f32x4 s; };
    ESCHA_DEVICE static void load_raw4(const Args& p, int m, int k, bool vec, Raw4& w) {
        const in_t* xr = p.x + m * p.ldx + k;
        if (vec) {
            load_words4(xr, w.x);
        } else {
            in_t* x = reinterpret_cast<in_t*>(w.x);
            #pragma unroll
            for (int i = 0; i < 4; ++i) x[i] = k + i < p.in_valid ? xr[i] : from_float<in_t>(0.f);
        }
        load_words4(p.rin + k, w.r);
        if (p.s_in) w.s = *reinterpret_cast<const f32x4*>(p.s_in + k);
    }
    ESCHA_DEVICE static void scale_raw4(const Args& p, const Raw4& w, float (&v)[4]) {
        const in_t* x = reinterpret_cast<const in_t*>(w.x);
        const half_t* r = reinterpret_cast<const half_t*>(w.r);
        #pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = to_float(x[i]);
        if (p.s_in) {
            v[0] *= w.s.x; v[1] *= w.s.y; v[2] *= w.s.z; v[3] *= w.s.w;
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) v[i] *= half_to_float(r[i]);
    }

    // fp16(v * scale), 4 halves as one 8-byte word
    ESCHA_DEVICE static u64 half4_bits(const float (&v)[4], float scale) {
        half_t h[4];
        #pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = float_to_half(v[i] * scale);
        return bit_cast<u64>(h);
    }

    // One m tile of accumulators (times 2^row_exp) -> shared [16][COLS] (ADD: added to what is
    // there, another K slice's sums); wcol: the wave's tile-column index.
    template <bool ADD = false>
    ESCHA_DEVICE static void stage_rows(float* red, const float (&acc)[TPW][mu::ACC], const int* exps,
                                        int lane, int wcol) {
        #pragma unroll
        for (int b = 0; b < TPW; ++b)
            #pragma unroll
            for (int i = 0; i < mu::ACC; ++i) {
                const int r = mu::acc_row(lane, i);
                float& d = red[r * RED_LD + (wcol * TPW + b) * 16 + mu::acc_col(lane, i)];
                const float v = acc[b][i] * exp2i(exps[r]);
                d = ADD ? d + v : v;
            }
    }

    // The block's output factors into shared memory at f (s_out [COLS], bias [COLS] as fp32, then
    // rout [COLS] fp16; absent ones not copied), asynchronously: waited for before store_rows.
    ESCHA_DEVICE static void stage_factors(const Args& p, u32* f) {
        const int col0 = group_index() * COLS;
        const int i = threadIdx.x;
        const float* s_out = opaque_ptr(p.s_out);
        const float* bias = opaque_ptr(p.bias);
        static_assert(COLS <= 4 * ESCHA_WAVE, "4 waves or more (STAGED_FACTORS) stage the factors in one round");
        if (i < COLS) {
            if (s_out) async_copy4(smem_addr(f + i), s_out + col0 + i);
            if (bias) async_copy4(smem_addr(f + COLS + i), bias + col0 + i);
            if (2 * i < COLS) async_copy4(smem_addr(f + 2 * COLS + i), p.rout + col0 + 2 * i);
        }
        async_commit();
    }

    // Rows m0..m0+ER-1 (< M) of shared [ER][COLS] -> output Hadamard, scales, bias -> y. The output
    // factors come from their shared copy (f_s_out, see stage_factors) or, without one, from global
    // memory; per row either way (loaded once per call, ptxas kept them in registers across the
    // finishing block's unrolled partial loads, the register peak of some kernels: +8..+24).
    ESCHA_DEVICE static void store_rows(const Args& p, const float* red, const float* f_s_out, int m0, int lane,
                                        int wave) {
        const int c = 4 * lane;
        const float* s_out = opaque_ptr(p.s_out);
        const float* bias = opaque_ptr(p.bias);
        for (int r = wave; r < ER && m0 + r < p.M; r += WARPS) {
            float v[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = red[r * RED_LD + c + i];
            const OutFactors f = STAGED_FACTORS
                ? out_factors(c, reinterpret_cast<const half_t*>(f_s_out + 2 * COLS), s_out ? f_s_out : nullptr,
                              bias ? f_s_out + COLS : nullptr)
                : out_factors(group_index() * COLS + c, p.rout, s_out, bias);
            finish_row128(v, lane, HAD128_SCALE, f, s_out != nullptr, bias != nullptr, group_index() * COLS + c,
                          p.out_valid, p.y, (long long)(m0 + r) * p.ldy);
        }
    }
};

}  // namespace escha

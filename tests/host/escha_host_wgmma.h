// Host (g++) stand-in for include/escha/wgmma.h, for the CPU test of the coded GEMM
// (tests/host/gemm_host.cpp, built with -DESCHA_HOST_SM90 for the mbarriers and cp.async groups of
// escha_host_kernel_api.h). wgmma.h includes it in place of its asm when ESCHA_HOST is set (the descriptor
// and the swizzle offsets are wgmma.h's own, shared with the GPU build).
//
// What it emulates, as the PTX ISA defines it:
// * the shared-memory matrix descriptor as wgmma.h's desc_k_sw128 encodes it (start address / 16
//   in bits 0-13, stride byte offset / 16 in bits 32-45, the 128-byte swizzle in bits 62-63) and
//   the swizzle itself: within each 1024-byte-aligned 8 x 128-byte atom, 16-byte chunk c of row r
//   sits at chunk c ^ (r % 8), i.e. address bits 4-6 XOR bits 7-9;
// * wgmma.mma_async m64nNk16 f32 += f16 x f16, both operands K-major in shared memory, executed at
//   once (fence / commit / wait are no-ops): each thread of the warpgroup computes its own
//   accumulators, in the unit's fragment layout (thread t = 32 w + l of the warpgroup, accumulator
//   i: row 16 w + l / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (l % 4) + i % 2);
// * the 2-D TMA load: a box of the tensor into shared memory with the 128-byte swizzle, its bytes
//   completing on the mbarrier (a tensor map here is a plain struct the harness fills in, not the
//   driver's opaque 128 bytes);
// * named barriers (bar.sync id, n): one std::barrier of n threads per id and block.
// Not shipped.
#pragma once
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#define __grid_constant__

namespace escha {
namespace wg {

inline void fence() {}
inline void commit() {}
template <int N>
inline void wait() {}
inline void pin(u32&) {}
inline void pin(float&) {}

namespace host {
[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "escha_host_wgmma: %s\n", what);
    std::abort();
}
// The 128-byte swizzle of a shared address: its 16-byte chunk bits (4-6) XOR its row bits (7-9)
inline u32 swizzle128(u32 a) { return a ^ (((a >> 7) & 7u) << 4); }
// The shared address of element (row r, k) of a K-major operand whose descriptor is d: rows of
// 128 bytes, 8-row groups the stride byte offset apart, then the swizzle on the address bits.
inline u32 operand_addr(u64 d, int r, int k) {
    if ((d >> 62) != 1) host::fail("only the 128-byte swizzle is emulated");
    const u32 start = (u32)(d & 0x3FFFu) << 4, sbo = (u32)((d >> 32) & 0x3FFFu) << 4;
    return swizzle128(start + (u32)(r / 8) * sbo + (u32)(r % 8) * 128u + 2u * (u32)k);
}
inline float operand(u64 d, int r, int k) {
    half_t h;
    std::memcpy(&h, smem_ptr(operand_addr(d, r, k)), 2);
    return (float)h;
}
}  // namespace host

// D[64 x N] += A[64 x 16] . B[16 x N] (A rows: output features, B rows: tokens; both K-major):
// this thread's N / 2 accumulators. Each product of two fp16 values is exact in double; the sum of
// the 16 is rounded to fp32 once and added (the unit's internal order is not specified).
template <int N>
inline void mma_ss(float (&d)[N / 2], u64 desc_a, u64 desc_b) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    for (int i = 0; i < N / 2; ++i) {
        const int r = 16 * w + l / 4 + 8 * ((i / 2) % 2), n = 8 * (i / 4) + 2 * (l % 4) + i % 2;
        double s = 0.0;
        for (int k = 0; k < 16; ++k) s += (double)host::operand(desc_a, r, k) * (double)host::operand(desc_b, n, k);
        d[i] += (float)s;
    }
}

inline void fence_async_shared() {}

using escha::mbar_init;
using escha::mbar_arrive;
using escha::mbar_wait;
using escha::mbar_arrive_expect_tx;
using escha::fence_mbar_init;

// A 2-D tensor of fp16 [rows][cols] (row stride `ld` elements) read in boxes of [box_rows][box_cols]
// (box_cols x 2 = 128 bytes: one swizzle row).
struct alignas(64) TensorMap {
    const half_t* base;
    int rows, cols;
    long long ld;
    int box_rows, box_cols;
};
inline void prefetch_tensor_map(const TensorMap*) {}
// The box at (column c0, row c1) into shared memory at dst (1024-byte aligned), swizzled; elements
// outside the tensor are zeros (as TMA fills them); then its bytes complete on the mbarrier.
inline void tma_load_2d(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
    if (map->box_cols * 2 != 128 || (dst & 1023u)) host::fail("128-byte swizzled boxes at 1024-byte aligned addresses only");
    for (int r = 0; r < map->box_rows; ++r)
        for (int c = 0; c < map->box_cols; ++c) {
            const int gr = c1 + r, gc = c0 + c;
            const half_t v = gr < map->rows && gc < map->cols ? map->base[(long long)gr * map->ld + gc] : (half_t)0;
            std::memcpy(smem_ptr(host::swizzle128(dst + (u32)r * 128u + 2u * (u32)c)), &v, 2);
        }
    escha::host::mbar_update(bar, 0, -(int)(map->box_rows * map->box_cols * 2));
}

// bar.sync id, threads: the first `threads` threads of this block to arrive at barrier `id` (one
// barrier per id and block: a cluster's blocks run at the same time)
inline void named_sync(int id, int threads) {
    escha::host::Block& blk = *escha::host::this_block;
    std::barrier<>* b;
    {
        std::lock_guard<std::mutex> g(blk.named_mutex);
        if (!blk.named[id]) blk.named[id] = std::make_unique<std::barrier<>>(threads);
        b = blk.named[id].get();
    }
    b->arrive_and_wait();
}

}  // namespace wg
}  // namespace escha

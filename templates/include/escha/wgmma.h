// Hopper warpgroup matrix unit (wgmma, sm_90a): the prefill GEMM's (templates/gemm.hip.j2)
// vendor-specific part. NVIDIA only; the AMD prefill keeps the dense-weight GEMM path.
//
// Operand roles (the swapped product D^T = W^T . X^T): A = 64 output features x 16 input
// features of decoded weights in REGISTERS (warp w of the warpgroup holds rows 16w..16w+15 in
// the mma.m16n8k16 A-fragment layout, which is the transpose of the trellis tile's B layout:
// a = {h0, h2, h1, h3} of a decoded BFrag), B = 16 input features x N tokens of rotated
// activations in shared memory (the x tile [token][k] row-major = "K-major", 128-byte swizzle),
// D = 64 output features x N tokens in fp32 registers.
#pragma once
#include "escha/platform.h"

namespace escha {
namespace wg {

ESCHA_DEVICE void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
ESCHA_DEVICE void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
ESCHA_DEVICE void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }

// Keep the compiler from moving register reads / writes across an asynchronous wgmma (the
// unit reads A and D after the issuing instruction retires, until wait()).
ESCHA_DEVICE void pin(u32& r) { asm volatile("" : "+r"(r) :: "memory"); }
ESCHA_DEVICE void pin(float& r) { asm volatile("" : "+f"(r) :: "memory"); }

// Shared-memory matrix descriptor of a K-major operand tile with the 128-byte swizzle: rows of
// 64 fp16 (128 bytes), 8-row groups 1024 bytes apart (stride byte offset), the tile's base 1024-byte
// aligned; the k16 slice kk of a 64-wide row block starts 32 * kk bytes in (the unit applies the
// swizzle to the computed address, as the copies that wrote the tile did).
ESCHA_DEVICE u64 desc_k_sw128(u32 saddr) {
    u64 d = (u64)((saddr & 0x3FFFFu) >> 4);            // start address / 16
    d |= (u64)1 << 16;                                  // leading byte offset (unused here) / 16
    d |= (u64)(1024 >> 4) << 32;                        // stride byte offset / 16
    d |= (u64)1 << 62;                                  // layout: 128-byte swizzle
    return d;
}

// Byte offset of 16-byte chunk c (0..7) of row r in a 128-byte-swizzled K-major tile.
ESCHA_DEVICE constexpr u32 sw128_offset(int r, int c) { return (u32)(r * 128 + ((c ^ (r & 7)) << 4)); }

}  // namespace wg
}  // namespace escha

// Hopper warpgroup matrix unit (wgmma, sm_90a): the prefill GEMM's (templates/gemm.hip.j2)
// vendor-specific part. NVIDIA only; the AMD prefill keeps the dense-weight GEMM path.
//
// Operand roles (the swapped product D^T = W^T . X^T): A = 64 output features x 16 input
// features of decoded weights, B = 16 input features x N tokens of rotated activations, both in
// shared memory, K-major (rows of 64 input features = 128 bytes, 128-byte swizzle), D = 64 output
// features x N tokens in fp32 registers.
#pragma once
#include "escha/platform.h"

namespace escha {
namespace wg {

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

#if defined(ESCHA_HOST)
#include "escha_host_wgmma.h"      // CPU tests (tests/host): the rest in plain C++; not shipped
#else
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

// Ordinary shared-memory writes (st.shared, cp.async) -> visible to the unit's operand reads
// (the async proxy): by the writer before it signals (the mbarrier's release / acquire carries
// them to the reader, as in CUTLASS's pipelines).
ESCHA_DEVICE void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- shared-memory barriers: platform_cuda.h (mbar_*), shared with the fused kernel
using escha::mbar_init;
using escha::mbar_arrive;
using escha::mbar_wait;
using escha::mbar_arrive_expect_tx;
using escha::fence_mbar_init;
// ---- TMA (the tensor memory accelerator): bulk tensor copies global -> shared memory
// A tensor map as a kernel parameter (`const __grid_constant__`): the driver's opaque 128 bytes
// (cuTensorMapEncodeTiled, runtime/cuda.py), 64-byte aligned.
struct ESCHA_ALIGN(64) TensorMap { unsigned long long opaque[16]; };

ESCHA_DEVICE void prefetch_tensor_map(const TensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<u64>(map)) : "memory");
}
// The box at (column c0, row c1) of a 2-D tensor map into shared memory at `dst` (the map's
// swizzle applied), completing `bytes` on the mbarrier `bar`.
ESCHA_DEVICE void tma_load_2d(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// Barrier over the first `threads` threads of the block (named barrier `id`, not 0).
ESCHA_DEVICE void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}

}  // namespace wg
}  // namespace escha
#endif

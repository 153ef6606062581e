// Host (g++) stand-in for the part of the platform API that whole kernels use beyond the matrix
// unit and the shuffles (tests/host/fused_host.cpp): shared memory by 32-bit address, the trellis
// ring's "async" copies (synchronous, as on gfx12), split-K publication and its atomic, and the
// launch-side no-ops (dependent launch, L2 prefetch, clusters of one block). Its semantics are
// platform_hip.h's, so a kernel takes the code paths it takes on an AMD GPU where it asks
// HAS_ASYNC_COPY / HAS_CLUSTERS. Include it after escha_host_block.h. Not shipped.
#pragma once
#include <algorithm>
#include <atomic>

using std::max;
using std::min;

namespace escha {
struct alignas(16) u32v4 { u32 x, y, z, w; };

// A shared-memory address is the byte offset into the block's allocation, as an LDS address is.
inline u32 smem_addr(const void* p) {
    return (u32)(reinterpret_cast<const unsigned char*>(p) - host::smem_base);
}
inline u32 lds32(u32 saddr) { u32 v; std::memcpy(&v, host::smem_base + saddr, 4); return v; }
inline u32v4 lds128(u32 saddr) { u32v4 v; std::memcpy(&v, host::smem_base + saddr, 16); return v; }
inline void sts128(u32 saddr, u32v4 v) { std::memcpy(host::smem_base + saddr, &v, 16); }

// Copies complete at once and are visible to the wave (gfx12's synchronous copy)
constexpr bool HAS_ASYNC_COPY = false;
inline void async_copy16(u32 saddr, const void* gmem) { std::memcpy(host::smem_base + saddr, gmem, 16); }
inline void async_copy4(u32 saddr, const void* gmem) { std::memcpy(host::smem_base + saddr, gmem, 4); }
inline void async_commit() {}
template <int N>
inline void async_wait() {}

inline void grid_dependency_wait() {}
inline void grid_dependents_launch() {}
template <typename T>
inline T* opaque_ptr(T* p) { return p; }

constexpr bool HAS_CLUSTERS = false;
inline u32 cluster_rank() { return 0; }
inline void cluster_barrier_after_init() {}

// Split-K: the counter is a real atomic (a block's threads run concurrently); the blocks of the
// grid run one after another, so the last to count sees every partial.
inline void partials_release() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void partials_acquire() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomic_add_acq_rel(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
inline f32x4 load_coherent(const f32x4* p) { return *p; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomicExch(int* p, int v) { return std::atomic_ref<int>(*p).exchange(v); }

// The wave's index, uniform across its lanes (as wave_index() promises the compilers)
inline int wave_index() { return threadIdx.x / 32; }

}  // namespace escha

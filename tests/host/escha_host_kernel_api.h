// Host (g++) stand-in for the part of the platform API that whole kernels use beyond the matrix
// unit and the shuffles (tests/host/fused_host.cpp, prep_host.cpp, hadamard_host.cpp,
// reconstruct_host.cpp): shared memory by 32-bit address, the trellis ring's copies, split-K
// publication and its atomic, the launch-side no-ops (dependent launch, L2 prefetch). By default
// copies complete at once and a kernel takes the code paths it takes on an AMD GPU where it asks
// HAS_ASYNC_COPY / HAS_CLUSTERS; with -DESCHA_HOST_SM90 it takes sm_90's: cp.async copies land at
// their commit group's wait, and clusters, mbarriers, st.async and bulk copies are emulated.
// Include it after escha_host_block.h. Not shipped.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <optional>
#include <thread>
#include <vector>

using std::max;
using std::min;

namespace escha {
struct alignas(16) u32v4 { u32 x, y, z, w; };

// Shared-memory addresses: the byte offset into this block's allocation, as an LDS address is;
// with the cluster window (cluster_map) the target block's rank + 1 in the top byte.
inline unsigned char* smem_ptr(u32 saddr) {
    const u32 rank1 = saddr >> 24;
    return (rank1 ? host::cluster_blocks[rank1 - 1]->smem.data() : host::smem_base) + (saddr & 0xFFFFFFu);
}
inline u32 smem_addr(const void* p) {
    return (u32)(reinterpret_cast<const unsigned char*>(p) - host::smem_base);
}
inline u32 lds32(u32 saddr) { u32 v; std::memcpy(&v, smem_ptr(saddr), 4); return v; }
inline void sts32(u32 saddr, u32 v) { std::memcpy(smem_ptr(saddr), &v, 4); }
inline u32v4 lds128(u32 saddr) { u32v4 v; std::memcpy(&v, smem_ptr(saddr), 16); return v; }
inline void sts128(u32 saddr, u32v4 v) { std::memcpy(smem_ptr(saddr), &v, 16); }

#if defined(ESCHA_HOST_SM90)
// cp.async as sm_90 runs it: a thread's copies land when it waits for their commit group
// (cp.async.wait_group N: all but its N newest groups), not before, so a kernel that reads a ring
// slot before waiting for it, or skips the barrier after the wait, reads the slot's old bytes here.
constexpr bool HAS_ASYNC_COPY = true;
namespace host {
struct PendingCopy { unsigned char* dst; const void* src; int bytes; };
inline thread_local std::vector<PendingCopy> copies_open;                  // not committed yet
inline thread_local std::vector<std::vector<PendingCopy>> copy_groups;     // committed, oldest first
}  // namespace host
inline void async_copy16(u32 saddr, const void* gmem) { host::copies_open.push_back({smem_ptr(saddr), gmem, 16}); }
inline void async_copy4(u32 saddr, const void* gmem) { host::copies_open.push_back({smem_ptr(saddr), gmem, 4}); }
inline void async_commit() {
    host::copy_groups.push_back(std::move(host::copies_open));
    host::copies_open.clear();
}
template <int N>
inline void async_wait() {
    while (host::copy_groups.size() > (size_t)N) {
        for (const auto& c : host::copy_groups.front()) std::memcpy(c.dst, c.src, c.bytes);
        host::copy_groups.erase(host::copy_groups.begin());
    }
}
#else
// Copies complete at once and are visible to the wave (gfx12's synchronous copy).
constexpr bool HAS_ASYNC_COPY = false;
inline void async_copy16(u32 saddr, const void* gmem) { std::memcpy(smem_ptr(saddr), gmem, 16); }
inline void async_copy4(u32 saddr, const void* gmem) { std::memcpy(smem_ptr(saddr), gmem, 4); }
inline void async_commit() {}
template <int N>
inline void async_wait() {}
#endif

inline void grid_dependency_wait() {}
inline void grid_dependents_launch() {}
template <typename T>
inline T* opaque_ptr(T* p) { return p; }
inline void keep_in_register(u32&) {}
inline void keep_in_register(int&) {}

#if defined(ESCHA_HOST_SM90)
// ---- sm_90's thread block clusters and mbarriers (platform_cuda.h), for the fused kernel's cluster
// prologue and its A operand in chunks. The blocks of a cluster run together (escha_host_block.h).
constexpr bool HAS_CLUSTERS = true;
inline u32 cluster_rank() { return host::cluster_ctarank; }
inline void cluster_barrier_after_init() { host::cluster_bar->arrive_and_wait(); }
inline u32 cluster_map(u32 saddr, u32 rank) { return (saddr & 0xFFFFFFu) | ((rank + 1) << 24); }
namespace host {
inline thread_local std::optional<std::barrier<>::arrival_token> cluster_token;
}  // namespace host
inline void cluster_arrive_relaxed() { host::cluster_token.emplace(host::cluster_bar->arrive()); }
inline void cluster_wait() {
    host::cluster_bar->wait(std::move(*host::cluster_token));
    host::cluster_token.reset();
}

// An mbarrier in its 8 bytes of shared memory: arrivals still expected this phase (bits 0-15),
// the count it was initialised with (16-31), transaction bytes still expected (32-62, signed: bytes
// may complete before they are announced) and the phase parity (63). A phase completes when both
// the arrivals and the bytes are in; the next one starts with the full count again.
namespace host {
inline void mbar_update(u32 bar, int arrivals, int tx) {
    std::atomic_ref<u64> a(*reinterpret_cast<u64*>(smem_ptr(bar)));
    u64 old = a.load(), next;
    do {
        const u32 pending = (u32)(old & 0xFFFFu) - (u32)arrivals, count = (u32)(old >> 16) & 0xFFFFu;
        const int bytes = (int)((u32)(old >> 31) & 0xFFFFFFFEu) / 2 + tx;      // bits 32-62, sign-extended
        const u64 phase = old >> 63;
        if (pending == 0 && bytes == 0)
            next = ((phase ^ 1) << 63) | ((u64)count << 16) | count;
        else
            next = (phase << 63) | ((u64)((u32)bytes & 0x7FFFFFFFu) << 32) | ((u64)count << 16) | (pending & 0xFFFFu);
    } while (!a.compare_exchange_weak(old, next));
}
}  // namespace host
inline void mbar_init(u32 bar, u32 count) {
    std::atomic_ref<u64>(*reinterpret_cast<u64*>(smem_ptr(bar))).store(((u64)count << 16) | count);
}
inline void fence_mbar_init() {}
inline void mbar_arrive(u32 bar) { host::mbar_update(bar, 1, 0); }
inline void mbar_arrive_expect_tx(u32 bar, u32 bytes) { host::mbar_update(bar, 1, (int)bytes); }
inline void mbar_wait(u32 bar, u32 parity) {
    std::atomic_ref<u64> a(*reinterpret_cast<u64*>(smem_ptr(bar)));
    while ((a.load() >> 63) == parity) std::this_thread::yield();
}
// the data, then its bytes completed on the (possibly remote) mbarrier
inline void st_async_u32(u32 caddr, u32 v, u32 cbar) { std::memcpy(smem_ptr(caddr), &v, 4); host::mbar_update(cbar, 0, -4); }
inline void st_async_u64(u32 caddr, u64 v, u32 cbar) { std::memcpy(smem_ptr(caddr), &v, 8); host::mbar_update(cbar, 0, -8); }
inline void st_async_f32x4(u32 caddr, f32x4 v, u32 cbar) { std::memcpy(smem_ptr(caddr), &v, 16); host::mbar_update(cbar, 0, -16); }
inline void mbar_arrive_cluster(u32 cbar) { host::mbar_update(cbar, 1, 0); }
inline void cluster_sync() { host::cluster_bar->arrive_and_wait(); }
inline void bulk_copy_to_peer(u32 cdst, u32 src, u32 bytes, u32 cbar) {
    std::memcpy(smem_ptr(cdst), smem_ptr(src), bytes);
    host::mbar_update(cbar, 0, -(int)bytes);
}
inline void bulk_copy_to_shared(u32 dst, const void* src, u32 bytes, u32 bar) {
    std::memcpy(smem_ptr(dst), src, bytes);
    host::mbar_update(bar, 0, -(int)bytes);
}
#else
constexpr bool HAS_CLUSTERS = false;
inline u32 cluster_rank() { return 0; }
inline void cluster_barrier_after_init() {}
#endif

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

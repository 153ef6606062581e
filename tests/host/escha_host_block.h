// Host (g++) stand-in for a kernel launch, for CPU tests that run a rendered kernel
// (tests/host/dense_host.cpp, rowscale_host.cpp, fused_host.cpp, prep_host.cpp): the blocks of a
// grid one after another (or the blocks of one thread block cluster together), a block's threads
// as std::threads meeting at a std::barrier for __syncthreads, each wave's 32 at a barrier of their
// own for the cross-lane operations of escha_host_matunit.h. Include it after that header and
// before the kernel source. Not shipped.
#pragma once
#include <atomic>
#include <barrier>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct HostDim3 { int x = 0, y = 0, z = 0; };
inline thread_local HostDim3 threadIdx, blockIdx, blockDim, gridDim;

namespace escha {
namespace host {
inline thread_local std::barrier<>* block_barrier = nullptr;
}  // namespace host
}  // namespace escha
inline void host_syncthreads() { escha::host::block_barrier->arrive_and_wait(); }

// atomicMax as CUDA / HIP declare it, for int and unsigned
template <typename T>
inline T atomicMax(T* p, T v) {
    std::atomic_ref<T> a(*p);
    T old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {}
    return old;
}

#define __restrict__
#define __launch_bounds__(...)
#define __syncthreads() host_syncthreads()

namespace escha {
namespace host {

// A block of the launch as its threads see it: barrier, waves, dynamic shared memory, cluster.
struct Block {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<std::barrier<>>> wave_bars;
    std::vector<Wave> waves;
    std::vector<unsigned char> smem;
    std::mutex named_mutex;                                 // named barriers (bar.sync id, n): made on first use
    std::unique_ptr<std::barrier<>> named[16];
    Block(int threads, size_t smem_bytes) : bar(std::make_unique<std::barrier<>>(threads)), waves(threads / 32),
                                            smem(smem_bytes, 0xA5) {    // garbage until the kernel writes it
        for (auto& w : waves) {
            wave_bars.push_back(std::make_unique<std::barrier<>>(32));
            w.bar = wave_bars.back().get();
        }
    }
};
// The cluster this thread's block belongs to: its blocks in rank order, and a barrier of all their threads.
inline thread_local Block* const* cluster_blocks = nullptr;
inline thread_local std::barrier<>* cluster_bar = nullptr;
inline thread_local u32 cluster_ctarank = 0;
inline thread_local Block* this_block = nullptr;

// Runs kernel() (a call of the kernel with its arguments) as every thread of every block of a
// grid_x x grid_y grid of `threads`-thread blocks, x fastest, with `smem_bytes` of dynamic shared
// memory per block (escha::host::smem_base). Blocks run one after another; with `cluster` > 1 the
// `cluster` consecutive blocks along x of a thread block cluster run together (their threads
// concurrently), as the cluster's blocks are co-resident on a GPU.
template <typename Kernel>
void launch(int grid_x, int grid_y, int threads, Kernel kernel, size_t smem_bytes = 0, int cluster = 1) {
    for (int by = 0; by < grid_y; ++by)
        for (int bx0 = 0; bx0 < grid_x; bx0 += cluster) {
            std::vector<std::unique_ptr<Block>> blocks;
            std::vector<Block*> ranked;
            for (int r = 0; r < cluster; ++r) {
                blocks.push_back(std::make_unique<Block>(threads, smem_bytes));
                ranked.push_back(blocks.back().get());
            }
            std::barrier<> cbar(threads * cluster);
            std::vector<std::thread> ts;
            for (int r = 0; r < cluster; ++r)
                for (int t = 0; t < threads; ++t)
                    ts.emplace_back([&, r, t] {
                        Block& b = *ranked[r];
                        threadIdx.x = t; blockIdx.x = bx0 + r; blockIdx.y = by;
                        blockDim.x = threads; blockDim.y = blockDim.z = 1;
                        gridDim.x = grid_x; gridDim.y = grid_y; gridDim.z = 1;
                        block_barrier = b.bar.get();
                        waves = b.waves.data();
                        smem_base = b.smem.data();
                        cluster_blocks = ranked.data();
                        cluster_bar = &cbar;
                        cluster_ctarank = (u32)r;
                        this_block = &b;
                        my_lane = t % 32; my_wave = t / 32;
                        kernel();
                    });
            for (auto& t : ts) t.join();
        }
}

}  // namespace host
}  // namespace escha

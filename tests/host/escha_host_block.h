// Host (g++) stand-in for a kernel launch, for CPU tests that run a rendered kernel
// (tests/host/dense_host.cpp, rowscale_host.cpp): the blocks of a grid one after another, a block's
// threads as std::threads meeting at a std::barrier for __syncthreads, each wave's 32 at a barrier
// of their own for the cross-lane operations of escha_host_matunit.h. Include it after that header
// and before the kernel source. Not shipped.
#pragma once
#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

struct HostDim3 { int x = 0, y = 0, z = 0; };
inline thread_local HostDim3 threadIdx, blockIdx, blockDim, gridDim;

namespace escha {
namespace host {
inline std::barrier<>* block_barrier = nullptr;
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

// Runs kernel() (a call of the kernel with its arguments) as every thread of every block of a
// grid_x x grid_y grid of `threads`-thread blocks, x fastest.
template <typename Kernel>
void launch(int grid_x, int grid_y, int threads, Kernel kernel) {
    std::barrier<> bar(threads);
    block_barrier = &bar;
    std::vector<std::unique_ptr<std::barrier<>>> wave_bars;
    std::vector<Wave> wave_state(threads / 32);
    for (auto& w : wave_state) {
        wave_bars.push_back(std::make_unique<std::barrier<>>(32));
        w.bar = wave_bars.back().get();
    }
    waves = wave_state.data();
    for (int by = 0; by < grid_y; ++by)
        for (int bx = 0; bx < grid_x; ++bx) {
            std::vector<std::thread> ts;
            for (int t = 0; t < threads; ++t)
                ts.emplace_back([&, t] {
                    threadIdx.x = t; blockIdx.x = bx; blockIdx.y = by;
                    blockDim.x = threads; blockDim.y = blockDim.z = 1;
                    gridDim.x = grid_x; gridDim.y = grid_y; gridDim.z = 1;
                    my_lane = t % 32; my_wave = t / 32;
                    kernel();
                });
            for (auto& t : ts) t.join();
        }
}

}  // namespace host
}  // namespace escha

// Runs a rendered rowscale.hip.j2 kernel (stage "in" or "out") on the CPU: each row's block in
// turn, its threads as std::threads meeting at a std::barrier for __syncthreads, each wave's 32 at
// a barrier of their own for the shuffles (escha_host_matunit.h). Checks the row exponents, the
// weight bound, the rounding and both the 8-element and the element-wise paths without a GPU
// (tests/test_rowscale_host.py).
//
// usage: rowscale_host IN OUT with IN = int64 header {M, n, ld_src, ld_dst, src_offset,
// dst_offset, flags (1: wmax_bits / row_exp given, 2: bias given), wmax_bits}, then
//   stage in:  the source rows (in_t, M * ld_src elements after src_offset of padding);
//   stage out: the source rows (the GEMM output type), int32 row_exp [M], (fp32 bias [n]);
// OUT = stage in: fp16 xs (M * ld_dst after dst_offset), int32 row_exp [M];
//       stage out: out_t y (M * ld_dst after dst_offset).
// Offsets (in elements) move a buffer off 16-byte alignment, to take the element-wise paths.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"

struct HostDim3 { int x = 0, y = 0, z = 0; };
thread_local HostDim3 threadIdx, blockIdx;
static std::barrier<>* host_barrier = nullptr;
inline void host_syncthreads() { host_barrier->arrive_and_wait(); }

namespace escha {
inline bool wave_any(bool pred) {                 // declared for hadamard.h; lanes vote through the scratch
    host::Wave& w = host::wave();
    w.scratch[host::my_lane][0] = pred;
    w.bar->arrive_and_wait();
    bool any = false;
    for (int l = 0; l < 32; ++l) any = any || w.scratch[l][0];
    w.bar->arrive_and_wait();
    return any;
}
}  // namespace escha
inline int atomicMax(int* p, int v) {
    std::atomic_ref<int> a(*p);
    int old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {}
    return old;
}
using std::max;
using std::min;

#define __shared__ static                          // one block at a time: function statics are its shared memory
#define __restrict__
#define __launch_bounds__(...)
#define __syncthreads() host_syncthreads()
#include ESCHA_KERNEL_SOURCE

// 16-byte aligned byte buffers (the kernel's vector path checks the alignment of what it is given)
static std::vector<u32x4> buffer(size_t bytes) { return std::vector<u32x4>((bytes + 15) / 16 + 1); }

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: rowscale_host IN OUT\n"); return 2; }
    std::ifstream f(argv[1], std::ios::binary);
    std::vector<char> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const long long* h = reinterpret_cast<const long long*>(in.data());
    const long long M = h[0], n = h[1], lds = h[2], ldd = h[3], soff = h[4], doff = h[5], flags = h[6];
    u32 wmax_bits = (u32)h[7];
    const char* p = in.data() + 8 * 8;
#if defined(ESCHA_STAGE_IN)
    typedef in_t src_t;
    typedef half_t dst_t;
#else
    typedef in_t src_t;
    typedef out_t dst_t;
#endif
    const size_t src_bytes = sizeof(src_t) * (size_t)(soff + M * lds), dst_bytes = sizeof(dst_t) * (size_t)(doff + M * ldd);
    std::vector<u32x4> src = buffer(src_bytes), dst = buffer(dst_bytes);
    std::memcpy(src.data(), p, src_bytes); p += src_bytes;
    std::vector<int> row_exp(M, 0);
    std::vector<float> bias(n, 0.f);
#if !defined(ESCHA_STAGE_IN)
    if (flags & 1) std::memcpy(row_exp.data(), p, 4 * M);
    p += 4 * M;
    if (flags & 2) std::memcpy(bias.data(), p, 4 * n);
#endif
    const src_t* s = reinterpret_cast<const src_t*>(src.data()) + soff;
    dst_t* d = reinterpret_cast<dst_t*>(dst.data()) + doff;
    std::barrier<> bar(THREADS);
    host_barrier = &bar;
    std::vector<std::unique_ptr<std::barrier<>>> wave_bars;
    std::vector<escha::host::Wave> waves(THREADS / 32);
    for (int w = 0; w < THREADS / 32; ++w) {
        wave_bars.push_back(std::make_unique<std::barrier<>>(32));
        waves[w].bar = wave_bars.back().get();
    }
    escha::host::waves = waves.data();
    for (long long m = 0; m < M; ++m) {
        std::vector<std::thread> ts;
        for (int t = 0; t < THREADS; ++t)
            ts.emplace_back([&, t] {
                threadIdx.x = t; blockIdx.x = (int)m;
                escha::host::my_lane = t % 32; escha::host::my_wave = t / 32;
#if defined(ESCHA_STAGE_IN)
                ESCHA_KERNEL(s, lds, d, ldd, row_exp.data(), (int)n, (flags & 1) ? &wmax_bits : nullptr);
#else
                ESCHA_KERNEL(s, lds, d, ldd, (flags & 1) ? row_exp.data() : nullptr,
                             (flags & 2) ? bias.data() : nullptr, (int)n);
#endif
            });
        for (auto& t : ts) t.join();
    }
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(d), sizeof(dst_t) * M * ldd);
#if defined(ESCHA_STAGE_IN)
    o.write(reinterpret_cast<const char*>(row_exp.data()), 4 * M);
#endif
    return 0;
}

// Runs a rendered hadamard.hip.j2 kernel (128-point Hadamard per block of a row, optional scales
// before and after) on the CPU, like fused_host.cpp: the grid's blocks in turn, their threads as
// std::threads, the shuffles per wave (escha_host_matunit.h). tests/test_small_kernels_host.py.
//
// usage: hadamard_host IN OUT  with IN = int32 {rows, n, in_bytes, out_bytes, has_r_pre, has_s_pre,
// has_r_post, has_s_post}, fp32 scale, in 64 bytes, then each part from a multiple of 16 bytes:
// x [rows][n], (fp16 r_pre [n]), (fp32 s_pre [n]), (fp16 r_post [n]), (fp32 s_post [n]);
// OUT = y [rows][n] (out_bytes per value).
#include <cstdio>
#include <fstream>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"
#include "escha_host_block.h"
#include "escha_host_kernel_api.h"
#include "escha_host_io.h"

#include ESCHA_KERNEL_SOURCE

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: hadamard_host IN OUT\n"); return 2; }
    escha::host::InputFile in(argv[1], 64);
    const int* h = in.header();
    const int rows = h[0], n = h[1], in_bytes = h[2], out_bytes = h[3];
    float scale;
    std::memcpy(&scale, h + 8, 4);
    auto part = [&](size_t b) { return in.part(b); };
    const char* x = part((size_t)rows * n * in_bytes);
    const half_t* r_pre = h[4] ? reinterpret_cast<const half_t*>(part(2 * n)) : nullptr;
    const float* s_pre = h[5] ? reinterpret_cast<const float*>(part(4 * n)) : nullptr;
    const half_t* r_post = h[6] ? reinterpret_cast<const half_t*>(part(2 * n)) : nullptr;
    const float* s_post = h[7] ? reinterpret_cast<const float*>(part(4 * n)) : nullptr;
    std::vector<char> y((size_t)rows * n * out_bytes, (char)0xA5);
    const int waves = rows * (n / 128), per_block = ESCHA_THREADS / 32;
    escha::host::launch((waves + per_block - 1) / per_block, 1, ESCHA_THREADS, [&] {
        ESCHA_KERNEL(reinterpret_cast<const in_t*>(x), reinterpret_cast<out_t*>(y.data()), r_pre, s_pre, r_post,
                     s_post, rows, n, n, n, scale);
    });
    std::ofstream o(argv[2], std::ios::binary);
    o.write(y.data(), y.size());
    return 0;
}

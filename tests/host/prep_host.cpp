// Runs a rendered prep.hip.j2 kernel (the fused kernel's xh = 1 A operand: each row of x scaled,
// rotated and stored as fp16, or as the swapped route's {h, h} words with per-block sums, with the
// row's power-of-two exponent) on the CPU, like fused_host.cpp: the grid's blocks in turn, their
// threads as std::threads; its static shared words are one per program (blocks run one at a time).
//
// usage: prep_host IN OUT  with IN = int32 {M, IC, in_valid, P, seg_blocks, threads, has_s_in,
// in_bytes, out_bytes} in 64 bytes, then each part from a multiple of 16 bytes: x [M][IC]
// (in_bytes per value), fp16 rin [IC], (fp32 s_in [IC]); OUT = xh (out_bytes), xh_exp [M] int32,
// row_sync [2M] int32 (zero again after a call).
#include <cstdio>
#include <fstream>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"
#include "escha_host_block.h"
#include "escha_host_kernel_api.h"
#include "escha_host_io.h"

#define __shared__ static      // the kernel's `__shared__ int row_e, last`: one copy for the block's threads
#include ESCHA_KERNEL_SOURCE

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: prep_host IN OUT\n"); return 2; }
    escha::host::InputFile in(argv[1], 64);
    const int* h = in.header();
    const int M = h[0], IC = h[1], in_valid = h[2], P = h[3], seg_blocks = h[4], threads = h[5];
    const int has_s_in = h[6], in_bytes = h[7], out_bytes = h[8];
    auto part = [&](size_t n) { return in.part(n); };
    const char* x = part((size_t)M * IC * in_bytes);
    const half_t* rin = reinterpret_cast<const half_t*>(part(2 * IC));
    const float* s_in = has_s_in ? reinterpret_cast<const float*>(part(4 * IC)) : nullptr;
    std::vector<escha::u32v4> xh((size_t)out_bytes / 16 + 1);
    std::memset(xh.data(), 0xA5, xh.size() * 16);
    std::vector<int> xh_exp(M, -1), row_sync(2 * M, 0);
    escha::host::launch(M, P, threads, [&] {
        ESCHA_KERNEL(reinterpret_cast<const in_t*>(x), IC, rin, s_in, xh.data(), xh_exp.data(), IC, in_valid,
                     seg_blocks, row_sync.data());
    });
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(xh.data()), out_bytes);
    o.write(reinterpret_cast<const char*>(xh_exp.data()), 4 * M);
    o.write(reinterpret_cast<const char*>(row_sync.data()), 8 * M);
    return 0;
}

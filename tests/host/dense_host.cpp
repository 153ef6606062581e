// Runs a rendered dense.hip.j2 kernel on the CPU (escha_host_block.h: every block of the grid in
// turn, its threads as std::threads; the matrix unit and shuffles per wave by escha_host_matunit.h,
// in NVIDIA's lane layouts, or gfx12's with -DESCHA_HOST_AMD). Checks the kernel's index math,
// layouts, swizzle and rounding without a GPU (tests/test_dense_host.py).
//
// usage: dense_host IN OUT  with IN = int32 {IC, OC, has_s_in, has_s_out}, int16 code
// [IC/16, OC/16, 16K], fp16 rin [IC], (fp32 s_in [IC]), fp16 rout [OC], (fp32 s_out [OC]);
// OUT = the 16-bit output dtype's bits, [IC, OC] row-major, then the uint32 the kernel's amax_bits
// points at (starts at 0; only kernels rendered with `amax` raise it), then int64 counts of the
// L2 prefetches inside and outside the code (rows_ahead = 1: each block prefetches the block
// below it).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"
#include "escha_host_block.h"

#define __shared__
#undef ESCHA_ALIGN            // alignas cannot sit inside `extern __shared__ ... float S[]` in host C++
#define ESCHA_ALIGN(n)
#include ESCHA_KERNEL_SOURCE

alignas(16) float S[128 * 136 + 128];   // the kernel's `extern __shared__ float S[]`, sized for its larger (NVIDIA) layout

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: dense_host IN OUT\n"); return 2; }
    std::ifstream f(argv[1], std::ios::binary);
    std::vector<char> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const int* hdr = reinterpret_cast<const int*>(in.data());
    const int IC = hdr[0], OC = hdr[1], has_s_in = hdr[2], has_s_out = hdr[3];
    const char* p = in.data() + 16;
    const size_t code_words = (size_t)(IC / 16) * (OC / 16) * 8 * ESCHA_K2;
    const u16* code = reinterpret_cast<const u16*>(p); p += 2 * code_words;
    const half_t* rin = reinterpret_cast<const half_t*>(p); p += 2 * IC;
    const float* s_in = has_s_in ? reinterpret_cast<const float*>(p) : nullptr; p += has_s_in ? 4 * IC : 0;
    const half_t* rout = reinterpret_cast<const half_t*>(p); p += 2 * OC;
    const float* s_out = has_s_out ? reinterpret_cast<const float*>(p) : nullptr;
    std::vector<u16> out((size_t)IC * OC, 0xFFFF);
    alignas(4) unsigned amax = 0;
    escha::host::prefetch_lo = code;
    escha::host::prefetch_hi = code + code_words;
    escha::host::launch(OC / 128, IC / 128, THREADS, [&] {
        ESCHA_KERNEL(code, rin, s_in, rout, s_out, reinterpret_cast<out_t*>(out.data()), IC, OC, OC, &amax, 1);
    });
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.data()), 2 * out.size());
    o.write(reinterpret_cast<const char*>(&amax), 4);
    const long long counts[2] = {escha::host::prefetches_in.load(), escha::host::prefetches_out.load()};
    o.write(reinterpret_cast<const char*>(counts), sizeof counts);
    return 0;
}

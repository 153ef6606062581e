// Runs a rendered reconstruct.hip.j2 kernel (trellis -> fp16 rotated-basis weight, a 16-row strip
// of tiles per block staged in shared memory) on the CPU, like fused_host.cpp; its static shared
// strip is one per program (blocks run one at a time). tests/test_small_kernels_host.py.
//
// usage: reconstruct_host IN OUT  with IN = int32 {IC, OC} in 16 bytes, then int16 code
// [IC/16, OC/16, 16K]; OUT = fp16 What [IC][OC] (row stride OC).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"
#include "escha_host_block.h"
#include "escha_host_kernel_api.h"

#define __shared__ static
#undef ESCHA_ALIGN            // `static alignas(16) T` is ill-formed; GNU's attribute may sit there
#define ESCHA_ALIGN(n) __attribute__((aligned(n)))
#include ESCHA_KERNEL_SOURCE

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: reconstruct_host IN OUT\n"); return 2; }
    std::ifstream f(argv[1], std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<escha::u32v4> store(bytes.size() / 16 + 1);
    std::memcpy(store.data(), bytes.data(), bytes.size());
    const char* in = reinterpret_cast<const char*>(store.data());
    const int IC = reinterpret_cast<const int*>(in)[0], OC = reinterpret_cast<const int*>(in)[1];
    const u16* code = reinterpret_cast<const u16*>(in + 16);
    std::vector<escha::u32v4> out((size_t)IC * OC / 8 + 1);       // 16-byte aligned fp16 [IC][OC]
    std::memset(out.data(), 0xA5, out.size() * 16);
    constexpr int strip = 16 * WARPS;
    escha::host::launch((OC + strip - 1) / strip, IC / 16, WARPS * 32, [&] {
        ESCHA_KERNEL(code, reinterpret_cast<half_t*>(out.data()), IC, OC, OC);
    });
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.data()), 2 * (size_t)IC * OC);
    return 0;
}

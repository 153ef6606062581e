// Runs a rendered reconstruct.hip.j2 kernel (trellis -> fp16 rotated-basis weight, a 16-row strip
// of tiles per block staged in shared memory) on the CPU, like fused_host.cpp; its static shared
// strip is one per program (blocks run one at a time). tests/test_small_kernels_host.py.
//
// usage: reconstruct_host IN OUT  with IN = int32 {IC, OC} in 16 bytes, then int16 code
// [IC/16, OC/16, 16K]; OUT = fp16 What [IC][OC] (row stride OC).
#include <cstdio>
#include <fstream>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"
#include "escha_host_block.h"
#include "escha_host_kernel_api.h"
#include "escha_host_io.h"

#define __shared__ static
#undef ESCHA_ALIGN            // `static alignas(16) T` is ill-formed; GNU's attribute may sit there
#define ESCHA_ALIGN(n) __attribute__((aligned(n)))
#include ESCHA_KERNEL_SOURCE

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: reconstruct_host IN OUT\n"); return 2; }
    escha::host::InputFile in(argv[1], 16);
    const int IC = in.header()[0], OC = in.header()[1];
    const u16* code = reinterpret_cast<const u16*>(in.part((size_t)(IC / 16) * (OC / 16) * Rate<K2>::W16 * 2));
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

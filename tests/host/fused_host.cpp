// Runs a rendered fused.hip.j2 kernel (include/escha/fused.h) on the CPU: every block of the grid
// in turn, its threads as std::threads (escha_host_block.h), the matrix unit, ldmatrix and the
// shuffles per wave (escha_host_matunit.h: NVIDIA's lane layouts, or gfx12's with -DESCHA_HOST_AMD),
// shared memory, copies and the split-K atomic as on gfx12 (escha_host_kernel_api.h). Checks the
// prologue (x's rotation, its batches, the fp16 overflow redo), the trellis ring, the decode into
// fragments, the word routes, split-K and the epilogue without a GPU (tests/test_fused_host.py).
// ESCHA_THREADS: the block's threads (32 x waves).
//
// usage: fused_host IN OUT  with IN = int32 {M, IC, OC, S, in_valid, out_valid, has_s_in,
// has_s_out, has_bias, off_tr, off_red, off_exp, smem_bytes, in_bytes, xh_bytes, x_chunks, cluster,
// split_cluster} in 80 bytes (cluster: blocks of one thread block cluster along x, run together;
// split_cluster: the grid swapped, x = the S splits of a column group as one cluster), then
// each part from a multiple of 16 bytes: x [M][IC] (in_bytes per value), int16 code
// [IC/16, OC/16, 16K], fp16 rin [IC], (fp32 s_in [IC]), fp16 rout [OC], (fp32 s_out [OC]), (fp32
// bias [OC]), and with xh_bytes > 0 the prep kernel's output (tests/host/prep_host.cpp): xh
// (xh_bytes), xh_exp [M] int32. OUT = y [M][OC] in the output dtype's bits, then the split-K
// counters [OC/128] as int32 (zero again after a call).
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
    if (argc != 3) { std::fprintf(stderr, "usage: fused_host IN OUT\n"); return 2; }
    escha::host::InputFile in(argv[1], 80);
    const int* h = in.header();
    const int M = h[0], IC = h[1], OC = h[2], S = h[3], in_valid = h[4], out_valid = h[5];
    const int has_s_in = h[6], has_s_out = h[7], has_bias = h[8], off_tr = h[9], off_red = h[10], off_exp = h[11];
    const int smem_bytes = h[12], in_bytes = h[13];
    auto part = [&](size_t n) { return in.part(n); };
    const char* x = part((size_t)M * IC * in_bytes);
    const size_t code_words = (size_t)(IC / 16) * (OC / 16) * 8 * ESCHA_K2;
    const u16* code = reinterpret_cast<const u16*>(part(2 * code_words));
    const half_t* rin = reinterpret_cast<const half_t*>(part(2 * IC));
    const float* s_in = has_s_in ? reinterpret_cast<const float*>(part(4 * IC)) : nullptr;
    const half_t* rout = reinterpret_cast<const half_t*>(part(2 * OC));
    const float* s_out = has_s_out ? reinterpret_cast<const float*>(part(4 * OC)) : nullptr;
    const float* bias = has_bias ? reinterpret_cast<const float*>(part(4 * OC)) : nullptr;
    const int x_chunks = std::max(1, h[15]), cluster = std::max(1, h[16]);   // xh chunks (sm_90), cluster size
    const bool split_cluster = h[17] != 0;
    const int xh_bytes = h[14];                 // xh = 1: the prep kernel's A operand and exponents follow
    const half_t* xh = xh_bytes ? reinterpret_cast<const half_t*>(part(xh_bytes)) : nullptr;
    const int* xh_exp = xh_bytes ? reinterpret_cast<const int*>(part(4 * M)) : nullptr;
    // every byte of shared memory starts as garbage, as on a GPU: what the kernel reads before it
    // writes shows up as a wrong result
    std::vector<u16> y((size_t)M * OC, 0xFFFF);
    std::vector<float> ws((size_t)S * M * OC, -1.f);
    std::vector<int> counters(OC / 128, 0);
    const bool partials = S > 1 && !split_cluster;       // the workspace route (split_cluster: none)
    escha::host::launch(split_cluster ? S : OC / 128, split_cluster ? OC / 128 : S, ESCHA_THREADS, [&] {
        ESCHA_KERNEL(reinterpret_cast<const in_t*>(x), IC, reinterpret_cast<out_t*>(y.data()), OC, code,
                     rin, s_in, rout, s_out, bias, M, IC, OC, IC / S, in_valid, out_valid,
                     partials ? ws.data() : nullptr, partials ? counters.data() : nullptr, off_tr, off_red, off_exp,
                     xh, xh_exp, x_chunks);
    }, (size_t)smem_bytes + 16, split_cluster ? S : cluster);
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(y.data()), 2 * y.size());
    o.write(reinterpret_cast<const char*>(counters.data()), 4 * counters.size());
    return 0;
}

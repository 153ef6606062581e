// Runs a rendered gemm.hip.j2 kernel (the coded wgmma GEMM for prefill on Hopper) on the CPU: every
// block of the grid in turn, its 384 threads as std::threads (escha_host_block.h), the producer's
// decode and swizzled stores, the trellis words' cp.async ring (sm_90's commit groups), the
// stage ring's mbarriers and the TMA copies of the activations, the consumers' wgmma from shared
// memory descriptors (escha_host_wgmma.h) and the epilogue (tests/test_gemm_host.py). Build with
// -DESCHA_HOST_SM90.
//
// usage: gemm_host IN OUT  with IN = int32 {M, IC, OC, rows, out_valid, has_s_out, has_bias,
// smem_bytes, tokens, out_bytes, share, ldy} in 64 bytes (rows: whole token blocks, whole clusters of
// share of them), then each part from a multiple of 16 bytes: xh [rows][IC]
// fp16 (the prep kernel's rows, then rows..M padding that only reaches tokens never stored), xh_exp
// [M] int32, int16 code [IC/16, OC/16, 16K], fp16 rout [OC], (fp32 s_out [OC]), (fp32 bias [OC]).
// OUT = y [M][ldy] in the output dtype's bits (out_bytes per value; ldy 0: OC).
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
    if (argc != 3) { std::fprintf(stderr, "usage: gemm_host IN OUT\n"); return 2; }
    escha::host::InputFile in(argv[1], 64);
    const int* h = in.header();
    const int M = h[0], IC = h[1], OC = h[2], rows = h[3], out_valid = h[4], has_s_out = h[5], has_bias = h[6];
    const int smem_bytes = h[7], tokens = h[8], out_bytes = h[9], share = h[10];
    const int ldy = h[11] ? h[11] : OC;
    auto part = [&](size_t n) { return in.part(n); };
    const half_t* xh = reinterpret_cast<const half_t*>(part((size_t)rows * IC * 2));
    const int* xh_exp = reinterpret_cast<const int*>(part((size_t)M * 4));
    const u16* code = reinterpret_cast<const u16*>(part((size_t)(IC / 16) * (OC / 16) * 16 * ESCHA_K2));
    const half_t* rout = reinterpret_cast<const half_t*>(part(2 * OC));
    const float* s_out = has_s_out ? reinterpret_cast<const float*>(part(4 * OC)) : nullptr;
    const float* bias = has_bias ? reinterpret_cast<const float*>(part(4 * OC)) : nullptr;
    // xh in boxes [tokens][64] (ops/gemm.py makes the driver's map of the same geometry)
    const escha::wg::TensorMap xmap{xh, rows, IC, IC, tokens, 64};
    std::vector<unsigned char> y((size_t)M * ldy * out_bytes, 0xFF);     // NaN bits until written
    auto kernel = [&] {
        ESCHA_KERNEL(xh, xh_exp, reinterpret_cast<out_t*>(y.data()), ldy, code, rout, s_out, bias, M, IC, OC,
                     out_valid, xmap);
    };
    // kernels/gemm.py grid: rows / tokens token blocks (whole clusters of share), along x with clusters
    if (share > 1)
        escha::host::launch(rows / tokens, OC / 128, 384, kernel, (size_t)smem_bytes, share);
    else
        escha::host::launch(OC / 128, rows / tokens, 384, kernel, (size_t)smem_bytes);
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(y.data()), (std::streamsize)y.size());
    return 0;
}

// Runs a rendered rowscale.hip.j2 kernel (stage "in" or "out") on the CPU: each row's block in
// turn (escha_host_block.h), the shuffles per wave (escha_host_matunit.h). Checks the row
// exponents, the weight bound, the rounding and the three access paths without a GPU
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
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "escha_host_platform.h"
#include "escha_host_matunit.h"
#include "escha_host_block.h"

using std::max;
using std::min;
#define __shared__ static                          // one block at a time: function statics are its shared memory
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
    typedef in_t src_t;
#if defined(ESCHA_STAGE_IN)
    typedef half_t dst_t;
#else
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
    escha::host::launch((int)M, 1, THREADS, [&] {
#if defined(ESCHA_STAGE_IN)
        ESCHA_KERNEL(s, lds, d, ldd, row_exp.data(), (int)n, (flags & 1) ? &wmax_bits : nullptr);
#else
        ESCHA_KERNEL(s, lds, d, ldd, (flags & 1) ? row_exp.data() : nullptr, (flags & 2) ? bias.data() : nullptr,
                     (int)n);
#endif
    });
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(d), sizeof(dst_t) * M * ldd);
#if defined(ESCHA_STAGE_IN)
    o.write(reinterpret_cast<const char*>(row_exp.data()), 4 * M);
#endif
    return 0;
}

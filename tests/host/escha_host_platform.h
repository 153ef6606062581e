// Host (g++ >= 12, x86-64) stand-in for platform_cuda.h / platform_hip.h: the small API of
// templates/include/escha/platform.h in plain C++, so tests can compile the vendor-neutral
// device code (trellis windows, codebooks, the WMMA B decoders) and run it lane by lane on the
// CPU. fp16 arithmetic is IEEE binary16 with one rounding per operation, as on the GPUs.
#pragma once
#include <atomic>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define ESCHA_HOST_PLATFORM 1
#define ESCHA_DEVICE inline
#define ESCHA_GLOBAL extern "C"
#define ESCHA_WAVE 32
#define ESCHA_ALIGN(n) alignas(n)
// The kernel's dynamic shared memory: its block's buffer (escha_host_block.h)
#define ESCHA_DYNAMIC_SHARED(T, name) T* const name = reinterpret_cast<T*>(escha::host::smem_base)

typedef unsigned int u32;
typedef int i32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef _Float16 half_t;
struct half2_t { _Float16 x, y; };
struct bf16_t { u16 bits; };

namespace escha {

struct alignas(16) u32x4 { u32 x, y, z, w; };
struct alignas(16) f32x4 { float x, y, z, w; };
struct alignas(8) f32x2 { float x, y; };

inline float half_to_float(half_t v) { return (float)v; }
inline float mul_rn(float a, float b) { return a * b; }     // x86-64 without -mfma: never fused
inline half_t float_to_half(float v) { return (half_t)v; }
inline float bf16_to_float(bf16_t v) { u32 b = (u32)v.bits << 16; float f; std::memcpy(&f, &b, 4); return f; }
inline bf16_t float_to_bf16(float v) {
    u32 b; std::memcpy(&b, &v, 4);
    b += 0x7FFFu + ((b >> 16) & 1u);       // round to nearest even (finite inputs)
    return bf16_t{(u16)(b >> 16)};
}

// Exact in double for binary16 operands (sums, and the codebooks' products and fmas), then one
// rounding to binary16.
inline half_t hmul(half_t a, half_t b) { return (half_t)((double)a * (double)b); }
inline half2_t hadd2(half2_t a, half2_t b) {
    return half2_t{(half_t)((double)a.x + (double)b.x), (half_t)((double)a.y + (double)b.y)};
}
inline half2_t hfma2(half2_t a, half2_t b, half2_t c) {
    return half2_t{(half_t)std::fma((double)a.x, (double)b.x, (double)c.x),
                   (half_t)std::fma((double)a.y, (double)b.y, (double)c.y)};
}
inline half_t low_half(half2_t v) { return v.x; }
inline half_t high_half(half2_t v) { return v.y; }

inline u32 funnel_r(u32 hi, u32 lo, u32 n) { n &= 31; return n ? (lo >> n) | (hi << (32 - n)) : lo; }
inline u32 funnel_l(u32 hi, u32 lo, u32 n) { n &= 31; return n ? (hi << n) | (lo >> (32 - n)) : hi; }
inline u32 funnel_l_kept(u32 hi, u32 lo, u32 n) { return funnel_l(hi, lo, n); }
inline u32 shl_on_mul(u32 x, u32 n) { return x << n; }
inline u32 mad_on_mul(u32 a, u32 b, u32 c) { return a * b + c; }
inline u32 pack_lo16(u32 a, u32 b) { return (a & 0xFFFFu) | (b << 16); }
inline u32 pack_hi16(u32 a, u32 b) { return (a >> 16) | (b & 0xFFFF0000u); }
inline u32 mid16(u32 a) { return (a >> 8) & 0xFFFFu; }
inline half2_t sum_halves2(u32 a, u32 b) {
    half2_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return half2_t{(half_t)((double)x.x + (double)x.y), (half_t)((double)y.x + (double)y.y)};
}
inline u32 hmax_abs2(u32 a, u32 b) {      // the magnitudes' max per half; sign bits cleared here
    const u32 x = a & 0x7FFF7FFFu, y = b & 0x7FFF7FFFu;
    return std::max(x & 0xFFFFu, y & 0xFFFFu) | std::max(x & 0xFFFF0000u, y & 0xFFFF0000u);
}
inline u32 dot4_u8(u32 a, u32 b, u32 c) {
    for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);
    return c;
}
// signed bytes of a times unsigned bytes of b, plus c
inline int dot4_s8u8(u32 a, u32 b, int c) {
    for (int i = 0; i < 4; ++i) c += (int)(signed char)(a >> (8 * i)) * (int)((b >> (8 * i)) & 0xFFu);
    return c;
}

}  // namespace escha

namespace escha {
// Cross-lane exchange has no meaning for one host "lane": declared so vendor-neutral code that
// uses it compiles; host tests drive the exchange themselves (wmma_decode.h relayout_send/recv).
u32 lane_gather(u32 v, int src);
// No cache to prefetch into on the host. A test that sets prefetch_lo / prefetch_hi (the bytes
// its kernel may prefetch from) gets the prefetches inside and outside them counted.
namespace host {
inline const void* prefetch_lo = nullptr;
inline const void* prefetch_hi = nullptr;
inline std::atomic<long long> prefetches_in{0}, prefetches_out{0};
}  // namespace host
inline void prefetch_l2(const void* p) {
    if (host::prefetch_lo != nullptr)
        (p >= host::prefetch_lo && p < host::prefetch_hi ? host::prefetches_in : host::prefetches_out)++;
}
}  // namespace escha

// Bit reinterpretation (CUDA / HIP device intrinsics) for the host build.
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }

// The one header every kernel includes first: picks the vendor's platform header.
// Both expose the same small API (types u32/u16/half_t/bf16_t, ESCHA_DEVICE, lane shuffles,
// funnel shifts, byte permutes, dot products); device code above this line is vendor-free.
#pragma once
#if defined(ESCHA_HOST)
// Host C++ (g++), for CPU tests of the device-independent parts (tests/host/escha_host_platform.h
// supplies the same small API in plain C++; not shipped, not used by any kernel).
#include "escha_host_platform.h"
#elif defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define ESCHA_NVIDIA 1
#include "escha/platform_cuda.h"
#else
#define ESCHA_AMD 1
#include "escha/platform_hip.h"
#endif

namespace escha {

// Reinterpret bits (both compilers turn this into a plain register move).
template <typename To, typename From>
ESCHA_DEVICE To bit_cast(const From& v) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
    return *reinterpret_cast<const To*>(&v);
}

// x, but opaque to the optimiser (no instruction is emitted): an address sum passed through it is
// not reassociated with the constant offsets added later, so those fold into the load's offset
// field. Needed on AMD, where LLVM otherwise hoists one (base + constant) VGPR per load out of
// the loop and adds the loop-variant part to each (2 VALU per ds_load); a no-op on NVIDIA.
ESCHA_DEVICE u32 opaque_u32(u32 x) {
#if defined(ESCHA_AMD)
    asm volatile("" : "+v"(x));
#endif
    return x;
}

// n / d and n % d for a divisor fixed at run time, without an integer division (~25 instructions
// on either vendor): q = trunc(float(n) * RN(1 / d)) is within one of n / d for 0 <= n < 2^22
// (float(n) exact, two roundings of 2^-24 relative each: an error below (n / d) * 2^-22.9 < 1 for
// d >= 2; d = 1 is exact), and one correction step makes it exact. tests/host/divmod_host.cpp.
struct DivMod {
    int d;
    float inv;
    ESCHA_DEVICE explicit DivMod(int divisor) : d(divisor), inv(1.f / (float)divisor) {}
    ESCHA_DEVICE void operator()(int n, int& q, int& r) const {
        q = (int)((float)n * inv);
        r = n - q * d;
        if (r < 0) {
            --q;
            r += d;
        } else if (r >= d) {
            ++q;
            r -= d;
        }
    }
};

// [addr, addr + bytes) into L2 (prefetch_l2 per 128-byte line; a no-op on AMD), the lines dealt
// out to `count` threads of which the caller is number `index` (a block, or every block of a grid).
ESCHA_DEVICE void prefetch_l2_range(const void* addr, int bytes, int index, int count) {
    const u64 a = reinterpret_cast<u64>(addr), first = a & ~u64(127);
    const int span = bytes + (int)(a - first);
    for (int o = 128 * index; o < span; o += 128 * count) prefetch_l2(reinterpret_cast<const void*>(first + o));
}

// The activation/output element types by template name.
template <int> struct dtype_of;
template <> struct dtype_of<0> { using type = half_t; };   // f16
template <> struct dtype_of<1> { using type = bf16_t; };   // bf16
template <> struct dtype_of<2> { using type = float; };    // f32

ESCHA_DEVICE float to_float(half_t v) { return half_to_float(v); }
ESCHA_DEVICE float to_float(bf16_t v) { return bf16_to_float(v); }
ESCHA_DEVICE float to_float(float v) { return v; }

template <typename T> ESCHA_DEVICE T from_float(float v);
template <> ESCHA_DEVICE half_t from_float<half_t>(float v) { return float_to_half(v); }
template <> ESCHA_DEVICE bf16_t from_float<bf16_t>(float v) { return float_to_bf16(v); }
template <> ESCHA_DEVICE float from_float<float>(float v) { return v; }

// Two floats rounded to nearest-even into one 32-bit word of two 16-bit T (half_t / bf16_t), a in
// the low half: one packed conversion on NVIDIA (F2FP) instead of two.
template <typename T>
ESCHA_DEVICE u32 pack2_rn(float a, float b) {
    static_assert(sizeof(T) == 2, "16-bit element types");
    return (u32)bit_cast<u16>(from_float<T>(a)) | ((u32)bit_cast<u16>(from_float<T>(b)) << 16);
}
#if defined(ESCHA_NVIDIA)
template <> ESCHA_DEVICE u32 pack2_rn<half_t>(float a, float b) { return bit_cast<u32>(__floats2half2_rn(a, b)); }
template <> ESCHA_DEVICE u32 pack2_rn<bf16_t>(float a, float b) { return bit_cast<u32>(__floats2bfloat162_rn(a, b)); }
#endif

// Four consecutive 2- or 4-byte elements (aligned to 4 elements) as raw 32-bit words, one vector
// load and no conversion (the caller converts later: loads of a batch stay in flight together).
template <typename T>
ESCHA_DEVICE void load_words4(const T* p, u32 (&w)[sizeof(T)]) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "2- or 4-byte elements");
    if constexpr (sizeof(T) == 2) {
        const u64 v = *reinterpret_cast<const u64*>(p);
        w[0] = (u32)v; w[1] = (u32)(v >> 32);
    } else {
        const f32x4 v = *reinterpret_cast<const f32x4*>(p);
        w[0] = bit_cast<u32>(v.x); w[1] = bit_cast<u32>(v.y); w[2] = bit_cast<u32>(v.z); w[3] = bit_cast<u32>(v.w);
    }
}

// Eight consecutive 2- or 4-byte elements at a 16-byte aligned p as raw 32-bit words: one 16-byte
// load for 16-bit T, two for float.
template <typename T>
ESCHA_DEVICE void load_words8(const T* p, u32 (&w)[2 * sizeof(T)]) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "2- or 4-byte elements");
    #pragma unroll
    for (int h = 0; h < (int)sizeof(T) / 2; ++h) {
        const u32x4 v = reinterpret_cast<const u32x4*>(p)[h];
        w[4 * h] = v.x; w[4 * h + 1] = v.y; w[4 * h + 2] = v.z; w[4 * h + 3] = v.w;
    }
}

// Element i of consecutive T held as raw 32-bit words (two per word for 16-bit T, the lower first),
// as float: shifts and masks on the word (bf16) or a conversion of its half (fp16), not a repack.
template <typename T> ESCHA_DEVICE float word_float(const u32* w, int i);
template <> ESCHA_DEVICE float word_float<half_t>(const u32* w, int i) {
    return half_to_float(bit_cast<half_t>((u16)(i & 1 ? w[i >> 1] >> 16 : w[i >> 1])));
}
template <> ESCHA_DEVICE float word_float<bf16_t>(const u32* w, int i) {
    return bit_cast<float>(i & 1 ? w[i >> 1] & 0xFFFF0000u : w[i >> 1] << 16);
}
template <> ESCHA_DEVICE float word_float<float>(const u32* w, int i) { return bit_cast<float>(w[i]); }

// Eight floats rounded to nearest-even into eight consecutive T at p (16-byte aligned): one 16-byte
// vector store of 16-bit T, two of float.
template <typename T>
ESCHA_DEVICE void store8(T* p, const float (&v)[8]) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "2- or 4-byte elements");
    if constexpr (sizeof(T) == 4) {
        reinterpret_cast<f32x4*>(p)[0] = f32x4{v[0], v[1], v[2], v[3]};
        reinterpret_cast<f32x4*>(p)[1] = f32x4{v[4], v[5], v[6], v[7]};
    } else {
        *reinterpret_cast<u32x4*>(p) = u32x4{pack2_rn<T>(v[0], v[1]), pack2_rn<T>(v[2], v[3]),
                                             pack2_rn<T>(v[4], v[5]), pack2_rn<T>(v[6], v[7])};
    }
}

// Eight halves (16 bytes, 16-byte aligned) as four raw 32-bit words, one vector load.
ESCHA_DEVICE void load_global16(u32 (&v)[4], const half_t* p) {
    const f32x4 w = *reinterpret_cast<const f32x4*>(p);
    v[0] = bit_cast<u32>(w.x); v[1] = bit_cast<u32>(w.y); v[2] = bit_cast<u32>(w.z); v[3] = bit_cast<u32>(w.w);
}

}  // namespace escha

// AMD (hipRTC / clang -x hip, gfx12 wave32): native types and builtins behind the common API.
// Self-contained on purpose: fp16/bf16 are the compiler's own _Float16 / __bf16 (no hip_fp16.h,
// which neither hipRTC without ROCm headers nor the offline clang route has).
#pragma once

#define ESCHA_DEVICE __device__ __forceinline__
#define ESCHA_GLOBAL extern "C" __global__
#define ESCHA_WAVE 32    // gfx12 kernels are compiled wave32
#define ESCHA_ALIGN(n) __attribute__((aligned(n)))

typedef unsigned int u32;
typedef int i32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef _Float16 half_t;
typedef _Float16 half2_t __attribute__((ext_vector_type(2)));
typedef __bf16 bf16_t;

namespace escha {

struct ESCHA_ALIGN(16) u32x4 { u32 x, y, z, w; };
struct ESCHA_ALIGN(16) f32x4 { float x, y, z, w; };

ESCHA_DEVICE float half_to_float(half_t v) { return (float)v; }
ESCHA_DEVICE half_t float_to_half(float v) { return (half_t)v; }     // round to nearest even
ESCHA_DEVICE float bf16_to_float(bf16_t v) { return (float)v; }
ESCHA_DEVICE bf16_t float_to_bf16(float v) { return (bf16_t)v; }

// fp16 arithmetic, each one IEEE operation with one rounding (v_pk_add_f16, v_pk_fma_f16)
ESCHA_DEVICE half_t hmul(half_t a, half_t b) { return a * b; }
ESCHA_DEVICE half2_t hadd2(half2_t a, half2_t b) { return a + b; }
ESCHA_DEVICE half2_t hfma2(half2_t a, half2_t b, half2_t c) { return __builtin_elementwise_fma(a, b, c); }
ESCHA_DEVICE half_t low_half(half2_t v) { return v.x; }
ESCHA_DEVICE half_t high_half(half2_t v) { return v.y; }

ESCHA_DEVICE void wave_sync() { __builtin_amdgcn_wave_barrier(); }
ESCHA_DEVICE bool wave_any(bool pred) { return __any(pred); }

ESCHA_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor(v, mask, ESCHA_WAVE); }
ESCHA_DEVICE u32 shfl_xor(u32 v, int mask) { return (u32)__shfl_xor((int)v, mask, ESCHA_WAVE); }

// v_alignbit_b32 computes ({hi, lo} >> n)[31:0]: the funnel shifts in one instruction each.
ESCHA_DEVICE u32 funnel_r(u32 hi, u32 lo, u32 n) { return __builtin_amdgcn_alignbit(hi, lo, n); }
ESCHA_DEVICE u32 funnel_l(u32 hi, u32 lo, u32 n) {
    return n == 0 ? hi : __builtin_amdgcn_alignbit(hi, lo, 32u - n);
}

// v_perm_b32 picks bytes from {src0 (bytes 4..7), src1 (bytes 0..3)}.
ESCHA_DEVICE u32 pack_lo16(u32 a, u32 b) { return __builtin_amdgcn_perm(b, a, 0x05040100u); }
ESCHA_DEVICE u32 pack_hi16(u32 a, u32 b) { return __builtin_amdgcn_perm(b, a, 0x07060302u); }

// High 32 bits of the 64-bit product (v_mul_hi_u32).
ESCHA_DEVICE u32 mul_hi(u32 a, u32 b) { return __umulhi(a, b); }

// v_dot4_u32_u8: c + sum of byte products.
ESCHA_DEVICE u32 dot4_u8(u32 a, u32 b, u32 c) { return __builtin_amdgcn_udot4(a, b, c, false); }

// A load that sees other blocks' writes made visible by __threadfence + atomics (device scope).
ESCHA_DEVICE f32x4 load_coherent(const f32x4* p) {
    const float* f = reinterpret_cast<const float*>(p);
    f32x4 r;
    r.x = __hip_atomic_load(f + 0, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    r.y = __hip_atomic_load(f + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    r.z = __hip_atomic_load(f + 2, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    r.w = __hip_atomic_load(f + 3, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    return r;
}

}  // namespace escha

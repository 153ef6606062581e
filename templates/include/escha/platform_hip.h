// AMD (hipRTC / clang -x hip, gfx12 wave32): native builtins behind the common API.
#pragma once
#if !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>

#define ESCHA_DEVICE __device__ __forceinline__
#define ESCHA_GLOBAL extern "C" __global__
#define ESCHA_WAVE 32    // gfx12 kernels are compiled wave32

typedef unsigned int u32;
typedef int i32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef __half half_t;
typedef __half2 half2_t;
typedef __hip_bfloat16 bf16_t;

namespace escha {

ESCHA_DEVICE float half_to_float(half_t v) { return __half2float(v); }
ESCHA_DEVICE half_t float_to_half(float v) { return __float2half(v); }   // round to nearest even
ESCHA_DEVICE float bf16_to_float(bf16_t v) { return __bfloat162float(v); }
ESCHA_DEVICE bf16_t float_to_bf16(float v) { return __float2bfloat16(v); }

ESCHA_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor(v, mask, ESCHA_WAVE); }
ESCHA_DEVICE u32 shfl_xor(u32 v, int mask) { return (u32)__shfl_xor((int)v, mask, ESCHA_WAVE); }
ESCHA_DEVICE void wave_sync() { __builtin_amdgcn_wave_barrier(); }

// v_alignbit_b32 computes ({hi, lo} >> n)[31:0]: the funnel shifts in one instruction each.
ESCHA_DEVICE u32 funnel_r(u32 hi, u32 lo, u32 n) { return __builtin_amdgcn_alignbit(hi, lo, n); }
ESCHA_DEVICE u32 funnel_l(u32 hi, u32 lo, u32 n) {
    return n == 0 ? hi : __builtin_amdgcn_alignbit(hi, lo, 32u - n);
}

// v_perm_b32 picks bytes from {src0 (bytes 4..7), src1 (bytes 0..3)}.
ESCHA_DEVICE u32 pack_lo16(u32 a, u32 b) { return __builtin_amdgcn_perm(b, a, 0x05040100u); }
ESCHA_DEVICE u32 pack_hi16(u32 a, u32 b) { return __builtin_amdgcn_perm(b, a, 0x07060302u); }

// v_dot4_u32_u8: c + sum of byte products.
ESCHA_DEVICE u32 dot4_u8(u32 a, u32 b, u32 c) { return __builtin_amdgcn_udot4(a, b, c, false); }


}  // namespace escha

namespace escha {
// A load that sees other blocks' writes made visible by __threadfence + atomics (device scope).
ESCHA_DEVICE float4 load_coherent(const float4* p) {
    const float* f = reinterpret_cast<const float*>(p);
    return make_float4(__hip_atomic_load(f + 0, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT),
                       __hip_atomic_load(f + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT),
                       __hip_atomic_load(f + 2, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT),
                       __hip_atomic_load(f + 3, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT));
}
}  // namespace escha

// NVIDIA (NVRTC): the HIP spellings the templates use, mapped onto CUDA.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define ESCHA_DEVICE __device__ __forceinline__
#define ESCHA_GLOBAL extern "C" __global__
#define ESCHA_WAVE 32

typedef unsigned int u32;
typedef int i32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef __half half_t;
typedef __half2 half2_t;
typedef __nv_bfloat16 bf16_t;
typedef __nv_bfloat162 bf162_t;
typedef __nv_bfloat16 __hip_bfloat16;   // HIP spelling

namespace escha {

ESCHA_DEVICE float half_to_float(half_t v) { return __half2float(v); }
ESCHA_DEVICE half_t float_to_half(float v) { return __float2half_rn(v); }
ESCHA_DEVICE float bf16_to_float(bf16_t v) { return __bfloat162float(v); }
ESCHA_DEVICE bf16_t float_to_bf16(float v) { return __float2bfloat16_rn(v); }

ESCHA_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
ESCHA_DEVICE u32 shfl_xor(u32 v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
ESCHA_DEVICE void wave_sync() { __syncwarp(); }

// Top 32 bits of the 64-bit (hi:lo) shifted left by n (0..31): one SHF.
ESCHA_DEVICE u32 funnel_l(u32 hi, u32 lo, u32 n) { return __funnelshift_l(lo, hi, n); }
// Low 32 bits of (hi:lo) >> n (0..31): one SHF.
ESCHA_DEVICE u32 funnel_r(u32 hi, u32 lo, u32 n) { return __funnelshift_r(lo, hi, n); }

// Low 16 bits of a, low 16 bits of b -> (b.lo << 16) | a.lo: one PRMT.
ESCHA_DEVICE u32 pack_lo16(u32 a, u32 b) { return __byte_perm(a, b, 0x5410); }
// High 16 bits of a, high 16 bits of b -> (b.hi << 16) | a.hi: one PRMT.
ESCHA_DEVICE u32 pack_hi16(u32 a, u32 b) { return __byte_perm(a, b, 0x7632); }

// c + sum of the four unsigned bytes of a * bytes of b: one IDP4A.
ESCHA_DEVICE u32 dot4_u8(u32 a, u32 b, u32 c) { return __dp4a(a, b, c); }

}  // namespace escha

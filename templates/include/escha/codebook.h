// Codebooks: 16-bit trellis state -> fp16 (FORMAT.md section 5). Integer-exact; the final fp16
// operation (HADD2 / HFMA2) rounds once, as the format prescribes.
#pragma once
#include "escha/platform.h"

namespace escha {

enum Codebook { CB_3INST = 0, CB_MCG = 1, CB_MUL1 = 2 };

// 3INST / mcg: x = s*a (+ b); y = (x & 0x8FFF8FFF) ^ 0x3B603B60; value = half(y.lo) + half(y.hi).
// `mask` is 0x8FFF8FFF; hot loops pass it in a register the compiler cannot see through (LOP3
// takes one immediate, and a visible constant is re-materialised with a MOV before every use).
#ifndef ESCHA_AMD_MUL24
#define ESCHA_AMD_MUL24 1
#endif

// s * C mod 2^32 for a 16-bit state s. On AMD RDNA a 32-bit integer multiply (v_mul_lo_u32) is a
// quarter-rate VALU op (4 issue cycles: Mesa ACO's RDNA cost model, aco_opcodes.py / aco_statistics.cpp
// class valu_quarter_rate32; LLVM's GFX12 model gives it latency 8 vs 5), so AMD kernels use
// two full-rate 24-bit multiplies and one shift-add (3 cycles) instead:
//     s*C = s*(C mod 2^24) + (s*(C >> 24) << 24)   (mod 2^32; exact for s < 2^16, C < 2^32).
// NOT measured on hardware; ESCHA_AMD_MUL24=0 restores the single v_mul_lo_u32. NVIDIA: IMAD.
template <u32 C>
ESCHA_DEVICE u32 state_mul(u32 s) {
#if defined(ESCHA_AMD) && ESCHA_AMD_MUL24
    return mul_u24<(C & 0xFFFFFFu)>(s) + (mul_u24<(C >> 24)>(s) << 24);
#else
    return s * C;
#endif
}

template <int CB>
ESCHA_DEVICE u32 lcg_bits(u32 s, u32 mask = 0x8FFF8FFFu) {
    u32 x = CB == CB_3INST ? state_mul<89226354u>(s) + 64248484u : state_mul<0xCBAC1FEDu>(s);
    return (x & mask) ^ 0x3B603B60u;     // one LOP3
}



// mul1: x = s*0x83DCD12D; 0x6400 + (sum of x's bytes) is the fp16 pattern of 1024 + B.
ESCHA_DEVICE u32 mul1_hash(u32 s) { return state_mul<0x83DCD12Du>(s); }
ESCHA_DEVICE u32 mul1_bits(u32 s) {
    return dot4_u8(mul1_hash(s), 0x01010101u, 0x6400u);
}
// The exact (pre-rounding) mul1 value is (MUL1_NUM * B - MUL1_OFF) / 2^18, B = the byte sum:
// half(0x1EEE) = 1774 / 2^18 and (1024 * 1774 - 2^18 * 10.3828125) = -905216 (FORMAT.md section 5).
constexpr float MUL1_SCALE = 1774.f / 262144.f;
constexpr float MUL1_OFFSET = 905216.f / 262144.f;      // 3.453125

// The swapped fp16 route's mul1 word (matunit_mma.h mma_sw): halves {lo, hi} = {1024 + B, -1534}
// from one IDP4A (B <= 1020: no carry into hi), so lo + hi = B - 510 exactly and the weight is
// MUL1_SCALE * (lo + hi) - MUL1_SWAP_OFFSET (MUL1_SWAP_OFFSET = 3.453125 - 510 * MUL1_SCALE = 476 / 2^18;
// the unit sums the halves in fp32, so the weight is not rounded to fp16 first: <= half an ulp).
constexpr u32 MUL1_SWAP_BIAS = 0xE5FE6400u;           // {fp16 -1534, fp16 1024}
constexpr float MUL1_SWAP_OFFSET = 476.f / 262144.f;
ESCHA_DEVICE u32 mul1_swap_word(u32 s) { return dot4_u8(mul1_hash(s), 0x01010101u, MUL1_SWAP_BIAS); }

// Two states -> two decoded values (a.lo = value of s0, a.hi = value of s1).
template <int CB>
ESCHA_DEVICE half2_t decode2(u32 s0, u32 s1, u32 mask = 0x8FFF8FFFu) {
    if constexpr (CB == CB_MUL1) {
        const half2_t scale = bit_cast<half2_t>(0x1EEE1EEEu);
        const half2_t add = bit_cast<half2_t>(0xC931C931u);
        return hfma2(bit_cast<half2_t>(pack_lo16(mul1_bits(s0), mul1_bits(s1))), scale, add);
    } else {
        u32 y0 = lcg_bits<CB>(s0, mask), y1 = lcg_bits<CB>(s1, mask);
        return sum_halves2(y0, y1);
    }
}

template <int CB>
ESCHA_DEVICE half_t decode1(u32 s) {
    return low_half(decode2<CB>(s, s));
}

}  // namespace escha

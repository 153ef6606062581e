// Codebooks: 16-bit trellis state -> fp16 (FORMAT.md section 5). Integer-exact; the final fp16
// operation (HADD2 / HFMA2) rounds once, as the format prescribes.
#pragma once
#include "escha/platform.h"

namespace escha {

enum Codebook { CB_3INST = 0, CB_MCG = 1, CB_MUL1 = 2 };

// 3INST / mcg: x = s*a (+ b); y = (x & 0x8FFF8FFF) ^ 0x3B603B60; value = half(y.lo) + half(y.hi).
// `mask` is 0x8FFF8FFF; hot loops pass it in a register the compiler cannot see through (LOP3
// takes one immediate, and a visible constant is re-materialised with a MOV before every use).
template <int CB>
ESCHA_DEVICE u32 lcg_bits(u32 s, u32 mask = 0x8FFF8FFFu) {
    u32 x = CB == CB_3INST ? s * 89226354u + 64248484u : s * 0xCBAC1FEDu;
    return (x & mask) ^ 0x3B603B60u;     // one LOP3
}



// mul1: x = s*0x83DCD12D; 0x6400 + (sum of x's bytes) is the fp16 pattern of 1024 + B.
ESCHA_DEVICE u32 mul1_bits(u32 s) {
    return dot4_u8(s * 0x83DCD12Du, 0x01010101u, 0x6400u);
}

// Two states -> two decoded values (a.lo = value of s0, a.hi = value of s1).
template <int CB>
ESCHA_DEVICE half2_t decode2(u32 s0, u32 s1, u32 mask = 0x8FFF8FFFu) {
    if constexpr (CB == CB_MUL1) {
        const half2_t scale = bit_cast<half2_t>(0x1EEE1EEEu);
        const half2_t add = bit_cast<half2_t>(0xC931C931u);
        return hfma2(bit_cast<half2_t>(pack_lo16(mul1_bits(s0), mul1_bits(s1))), scale, add);
    } else {
        u32 y0 = lcg_bits<CB>(s0, mask), y1 = lcg_bits<CB>(s1, mask);
        return hadd2(bit_cast<half2_t>(pack_lo16(y0, y1)), bit_cast<half2_t>(pack_hi16(y0, y1)));
    }
}

template <int CB>
ESCHA_DEVICE half_t decode1(u32 s) {
    return low_half(decode2<CB>(s, s));
}

}  // namespace escha

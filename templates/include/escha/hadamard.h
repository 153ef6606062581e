// 128-point Hadamard across one wave of 32 lanes: lane l holds elements 4l..4l+3 in fp32.
// Strides 1 and 2 are inside a lane, 4..64 across lanes (xor shuffles 1..16), in the order
// 1, 2, 4, ..., 64 of the reference runtime, so fp32 results are identical to it.
#pragma once
#include "escha/platform.h"

namespace escha {

constexpr float HAD128_SCALE = 0.088388347648f;   // 1/sqrt(128) as the runtime applies it

// 2^e for e in [-126, 127] (exact, no libm)
ESCHA_DEVICE float exp2i(int e) { return __int_as_float((127 + e) << 23); }

// Smallest e >= 0 with bound * 2^-e < 2^15, so values up to `bound` survive an fp16 cast.
ESCHA_DEVICE int fp16_safe_exponent(float bound) {
    int ex = ((__float_as_int(bound) >> 23) & 0xFF) - 127;   // floor(log2(bound)) for normal bounds
    return ex >= 15 ? ex - 14 : 0;
}

ESCHA_DEVICE void hadamard128_lane(float (&v)[4], int lane) {
    float a0 = v[0] + v[1], a1 = v[0] - v[1], a2 = v[2] + v[3], a3 = v[2] - v[3];   // stride 1
    v[0] = a0 + a2; v[1] = a1 + a3; v[2] = a0 - a2; v[3] = a1 - a3;                 // stride 2
    #pragma unroll
    for (int m = 1; m < 32; m <<= 1) {                                                 // strides 4..64
        const bool upper = (lane & m) != 0;
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            float o = shfl_xor(v[i], m);
            v[i] = upper ? o - v[i] : v[i] + o;
        }
    }
}

}  // namespace escha

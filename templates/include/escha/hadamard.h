// 128-point Hadamard across one wave of 32 lanes: lane l holds elements 4l..4l+3 in fp32.
// Strides 1 and 2 are inside a lane, 4..64 across lanes (xor shuffles 1..16), in the order
// 1, 2, 4, ..., 64 of the reference runtime, so fp32 results are identical to it.
#pragma once
#include "escha/platform.h"

namespace escha {

constexpr float HAD128_SCALE = 0.088388347648f;   // 1/sqrt(128) as the runtime applies it

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

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

// Whether this wave's rotated values (amax = this lane's max |v|) fit fp16 unscaled. If not, lane
// 0 calls raise(e) with the exponent the wave's max needs (>= 1; the caller redoes the row scaled
// by 2^-e once every item's raise is in); wave-uniform result.
template <typename Raise>
ESCHA_DEVICE bool fp16_fits_or(float amax, int lane, Raise raise) {
    if (!wave_any(!(amax < 32768.f))) return true;
    #pragma unroll
    for (int s = 16; s > 0; s >>= 1) amax = fmaxf(amax, shfl_xor(amax, s));
    if (lane == 0) raise(fp16_safe_exponent(amax));
    return false;
}
// The same, raising *row_e (atomicMax) to the row's exponent.
ESCHA_DEVICE bool fp16_fits_or_raise(float amax, int lane, int* row_e) {
    return fp16_fits_or(amax, lane, [&](int e) { atomicMax(row_e, e); });
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

// The sum over a wave of its lanes' 4 fp16 values each, in fp32 and a fixed order: a lane's 4 in
// order, then the lanes by xor 16, 8, 4, 2, 1 (every lane gets it). The swapped route's mul1 term
// per (row, 128-block), which the fused kernel's in-kernel prologue and the prep kernel's words
// variant both compute: one order, so that their sums agree.
ESCHA_DEVICE float wave_sum_halves4(const half_t (&h)[4]) {
    float sum = 0.f;
    #pragma unroll
    for (int i = 0; i < 4; ++i) sum += half_to_float(h[i]);
    #pragma unroll
    for (int s = 16; s > 0; s >>= 1) sum += shfl_xor(sum, s);
    return sum;
}

// The output factors of one lane's 4 features c .. c+3 (rout, s_out, bias): loaded together, once
// per block by callers that finish many rows of it (a load per row, behind the previous row's stores
// to y that may alias it, costs one memory latency per row).
struct OutFactors {
    float ro[4], so[4], bi[4];
};
ESCHA_DEVICE OutFactors out_factors(int c, const half_t* rout, const float* s_out, const float* bias) {
    OutFactors f;
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        f.ro[i] = half_to_float(rout[c + i]);
        f.so[i] = s_out ? s_out[c + i] : 1.f;
        f.bi[i] = bias ? bias[c + i] : 0.f;
    }
    return f;
}

// Output value of a lane's feature c + i after the Hadamard: v times scale, rout, s_out, plus bias
// (f = out_factors(c, ...); has_s / has_bias: s_out / bias given), in fp32 before the one rounding.
ESCHA_DEVICE float out_value(float v, int i, float scale, const OutFactors& f, bool has_s, bool has_bias) {
    float o = v * scale * f.ro[i];
    if (has_s) o *= f.so[i];
    if (has_bias) o += f.bi[i];
    return o;
}

// The Sylvester butterflies of strides 1, 2, .. N / 2, in this order, over N values one lane holds
// (element i of a block of N features, or index bits the caller maps to feature bits): an N-point
// Hadamard, unscaled, inside the lane.
template <int N>
ESCHA_DEVICE void hadamard_in_lane(float (&v)[N]) {
    #pragma unroll
    for (int s = 1; s < N; s <<= 1)
        #pragma unroll
        for (int i = 0; i < N; ++i)
            if ((i & s) == 0) {
                const float a = v[i], b = v[i + s];
                v[i] = a + b;
                v[i + s] = a - b;
            }
}

// Eight consecutive outputs c .. c+7 of one row (o: final values in fp32), rounded once into
// y[row_off + c ..] for c + i < out_valid: one vector store where all 8 are valid and their address is
// aligned to 8 elements, else one per element.
template <typename out_t>
ESCHA_DEVICE void store_outputs(const float (&o)[8], int c, int out_valid, out_t* y, long long row_off) {
    out_t* p = y + row_off + c;
    if (c + 8 <= out_valid && reinterpret_cast<u64>(p) % (8 * sizeof(out_t)) == 0) {
        store8(p, o);
    } else {
        #pragma unroll
        for (int i = 0; i < 8; ++i)
            if (c + i < out_valid) p[i] = from_float<out_t>(o[i]);
    }
}

// The output side of a coded linear for one row (token) and one 128-feature Hadamard block: v =
// this lane's 4 fp32 sums (features c = col0 + 4*lane .. +3 of the block) -> H128, times scale (the
// Hadamard's 1/sqrt(128), times the row's 2^e where the caller has not applied it), rout, s_out,
// plus bias (f = out_factors(c, ...); has_s / has_bias: s_out / bias given), rounded once into
// y[row_off + col] for col < out_valid.
template <typename out_t>
ESCHA_DEVICE void finish_row128(float (&v)[4], int lane, float scale, const OutFactors& f, bool has_s, bool has_bias,
                                int c, int out_valid, out_t* y, long long row_off) {
    hadamard128_lane(v, lane);
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float o = out_value(v[i], i, scale, f, has_s, has_bias);
        if (c + i < out_valid) y[row_off + c + i] = from_float<out_t>(o);
    }
}

}  // namespace escha

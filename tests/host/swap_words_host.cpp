// Host build of the swapped fp16 route's per-weight words (include/escha/codebook.h): for every
// 16-bit state, the two fp16 halves the matrix unit sums and the weight the route implies
// (mul1: MUL1_SCALE * (lo + hi) - MUL1_SWAP_OFFSET; LCG codebooks: lo + hi), in double, as binary
// [65536][3] doubles per codebook (3INST, mcg, mul1) on stdout. tests/test_swap_words.py compares
// them with escha_jit.codebook.table.
#include <cstdio>
#include "escha/platform.h"
#include "escha/codebook.h"

using namespace escha;

static double half_bits(u32 bits) {
    u16 b = (u16)bits;
    half_t h;
    std::memcpy(&h, &b, 2);
    return (double)h;
}

int main() {
    static double out[3][65536][3];
    for (u32 s = 0; s < 65536; ++s) {
        const u32 w[3] = {lcg_bits<CB_3INST>(s), lcg_bits<CB_MCG>(s), mul1_swap_word(s)};
        for (int cb = 0; cb < 3; ++cb) {
            const double lo = half_bits(w[cb] & 0xFFFFu), hi = half_bits(w[cb] >> 16);
            const double value = cb == CB_MUL1 ? (double)MUL1_SCALE * (lo + hi) - (double)MUL1_SWAP_OFFSET : lo + hi;
            out[cb][s][0] = lo;
            out[cb][s][1] = hi;
            out[cb][s][2] = value;
        }
    }
    return std::fwrite(out, sizeof(out), 1, stdout) == 1 ? 0 : 1;
}

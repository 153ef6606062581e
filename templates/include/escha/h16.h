// The 16-point Hadamard's entries as fp16 bits (unnormalised: +-1), for fragments of constants.
#pragma once
#include "escha/platform.h"

namespace escha {

// fp16 bits of H16[r][k] = (-1)^popcount(r & k) (0x6996: the parity of a 4-bit value)
ESCHA_DEVICE u32 h16_bits(int r, int k) { return ((0x6996u >> (r & k & 15)) & 1u) ? 0xBC00u : 0x3C00u; }

}  // namespace escha

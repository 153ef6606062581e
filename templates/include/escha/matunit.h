// The matrix unit of the target (the escha::mu interface: fragments, mma, accumulator layout,
// trellis decoders): NVIDIA mma.sync (matunit_mma.h), AMD gfx12 WMMA (matunit_wmma.h), or, for CPU
// tests, tests/host/escha_host_matunit.h (lane threads meeting per instruction; not shipped).
#pragma once
#if defined(ESCHA_HOST)
#include "escha_host_matunit.h"
#elif defined(ESCHA_NVIDIA)
#include "escha/matunit_mma.h"
#else
#include "escha/matunit_wmma.h"
#endif

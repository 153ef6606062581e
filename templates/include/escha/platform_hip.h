// AMD (hipRTC / clang -x hip, gfx12 wave32): native types and builtins behind the common API.
// Self-contained on purpose: fp16/bf16 are the compiler's own _Float16 / __bf16 (no hip_fp16.h,
// which neither hipRTC without ROCm headers nor the offline clang route has).
#pragma once

#define ESCHA_DEVICE __device__ __forceinline__
#define ESCHA_GLOBAL extern "C" __global__
#define ESCHA_WAVE 32    // gfx12 kernels are compiled wave32
#define ESCHA_ALIGN(n) __attribute__((aligned(n)))
// The kernel's dynamic shared memory as `T name[]` (16-byte aligned)
#define ESCHA_DYNAMIC_SHARED(T, name) extern __shared__ ESCHA_ALIGN(16) T name[]

typedef unsigned int u32;
typedef int i32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef _Float16 half_t;
typedef _Float16 half2_t __attribute__((ext_vector_type(2)));
typedef __bf16 bf16_t;

namespace escha {

struct ESCHA_ALIGN(16) u32x4 { u32 x, y, z, w; };
struct ESCHA_ALIGN(16) f32x4 { float x, y, z, w; };
struct ESCHA_ALIGN(8) f32x2 { float x, y; };

ESCHA_DEVICE float half_to_float(half_t v) { return (float)v; }
ESCHA_DEVICE half_t float_to_half(float v) { return (half_t)v; }     // round to nearest even
ESCHA_DEVICE float bf16_to_float(bf16_t v) { return (float)v; }
ESCHA_DEVICE bf16_t float_to_bf16(float v) { return (bf16_t)v; }
// a * b rounded, never fused with a later add into an fma (platform_cuda.h): the product carries
// no contract flag under the pragma, so no later add fuses with it
ESCHA_DEVICE float mul_rn(float a, float b) {
#pragma clang fp contract(off)
    return a * b;
}

// fp16 arithmetic, each one IEEE operation with one rounding (v_pk_add_f16, v_pk_fma_f16)
ESCHA_DEVICE half_t hmul(half_t a, half_t b) { return a * b; }
ESCHA_DEVICE half2_t hadd2(half2_t a, half2_t b) { return a + b; }
ESCHA_DEVICE half2_t hfma2(half2_t a, half2_t b, half2_t c) { return __builtin_elementwise_fma(a, b, c); }
ESCHA_DEVICE half_t low_half(half2_t v) { return v.x; }
ESCHA_DEVICE half_t high_half(half2_t v) { return v.y; }

// Per 16-bit half of two fp16 pairs: max(|a|, |b|) in the magnitude bits; the sign bits are
// unspecified (callers mask them). `a` is 0 or an earlier result (non-negative here): v_and_b32
// (b's abs) + v_pk_max_f16.
ESCHA_DEVICE u32 hmax_abs2(u32 a, u32 b) {
    const u32 x = a, y = b & 0x7FFF7FFFu;
    const half2_t m = __builtin_elementwise_max(*reinterpret_cast<const half2_t*>(&x),
                                                *reinterpret_cast<const half2_t*>(&y));
    return *reinterpret_cast<const u32*>(&m);
}

ESCHA_DEVICE void wave_sync() { __builtin_amdgcn_wave_barrier(); }
ESCHA_DEVICE bool wave_any(bool pred) { return __any(pred); }

ESCHA_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor(v, mask, ESCHA_WAVE); }
ESCHA_DEVICE u32 shfl_xor(u32 v, int mask) { return (u32)__shfl_xor((int)v, mask, ESCHA_WAVE); }
ESCHA_DEVICE float shfl_idx(float v, int src) { return __shfl(v, src, ESCHA_WAVE); }

// The index of this thread's wave in its block, in a scalar register (wave-uniform by construction).
ESCHA_DEVICE int wave_index() { return __builtin_amdgcn_readfirstlane((int)(threadIdx.x / ESCHA_WAVE)); }

// v_alignbit_b32 computes ({hi, lo} >> n)[31:0]: the funnel shifts in one instruction each.
ESCHA_DEVICE u32 funnel_r(u32 hi, u32 lo, u32 n) { return __builtin_amdgcn_alignbit(hi, lo, n); }
ESCHA_DEVICE u32 funnel_l(u32 hi, u32 lo, u32 n) {
    return n == 0 ? hi : __builtin_amdgcn_alignbit(hi, lo, 32u - n);
}

ESCHA_DEVICE u32 funnel_l_kept(u32 hi, u32 lo, u32 n) { return funnel_l(hi, lo, n); }
ESCHA_DEVICE u32 shl_on_mul(u32 x, u32 n) { return x << n; }
ESCHA_DEVICE u32 mad_on_mul(u32 a, u32 b, u32 c) { return a * b + c; }

// v_perm_b32 picks bytes from {src0 (bytes 4..7), src1 (bytes 0..3)}.
ESCHA_DEVICE u32 pack_lo16(u32 a, u32 b) { return __builtin_amdgcn_perm(b, a, 0x05040100u); }
ESCHA_DEVICE u32 pack_hi16(u32 a, u32 b) { return __builtin_amdgcn_perm(b, a, 0x07060302u); }
// Bits 8..23 of a, zero-extended: one v_bfe_u32.
ESCHA_DEVICE u32 mid16(u32 a) { return (a >> 8) & 0xFFFFu; }

// {lo(a) + hi(a), lo(b) + hi(b)} for two fp16 pairs, each sum rounded once: two v_perm + one
// v_pk_add_f16 (RDNA has one VALU: nothing to gain from moving work between pipes).
ESCHA_DEVICE half2_t sum_halves2(u32 a, u32 b) {
    const u32 lo = pack_lo16(a, b), hi = pack_hi16(a, b);
    return *reinterpret_cast<const half2_t*>(&lo) + *reinterpret_cast<const half2_t*>(&hi);
}

// Low 32 bits of a * C for a, C < 2^24: v_mul_u32_u24 (full rate). Inline asm because LLVM folds a
// hand-split 32-bit multiply back into one v_mul_lo_u32.
template <u32 C>
ESCHA_DEVICE u32 mul_u24(u32 a) {
    static_assert(C < (1u << 24), "v_mul_u32_u24 takes 24-bit operands");
    u32 r;
    asm("v_mul_u32_u24 %0, %1, %2" : "=v"(r) : "n"(C), "v"(a));
    return r;
}

// v_dot4_u32_u8: c + sum of byte products.
ESCHA_DEVICE u32 dot4_u8(u32 a, u32 b, u32 c) { return __builtin_amdgcn_udot4(a, b, c, false); }
// v_dot4_i32_iu8: c + sum of (signed byte of a) * (unsigned byte of b), no clamping.
ESCHA_DEVICE int dot4_s8u8(u32 a, u32 b, int c) { return __builtin_amdgcn_sudot4(true, (int)a, false, (int)b, c, false); }

// Split-K publication on gfx12: each wave's stores are released by that wave (a device-scope
// fence in every thread, then the barrier and one atomic), and the last block fences again before
// reading (the pattern HIP documents for __threadfence; kept as it was, not measured here).
ESCHA_DEVICE void partials_release() { __threadfence(); }
ESCHA_DEVICE void partials_acquire() { __threadfence(); }
ESCHA_DEVICE int atomic_add_acq_rel(int* p, int v) { return atomicAdd(p, v); }

// A load that sees other blocks' writes made visible by the fences + atomic above (device scope).
ESCHA_DEVICE f32x4 load_coherent(const f32x4* p) {
    const float* f = reinterpret_cast<const float*>(p);
    f32x4 r;
    r.x = __hip_atomic_load(f + 0, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    r.y = __hip_atomic_load(f + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    r.z = __hip_atomic_load(f + 2, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    r.w = __hip_atomic_load(f + 3, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    return r;
}


// ---- LDS, lane exchange and global -> LDS copies (gfx12)
// LDS is its own 32-bit address space (3) on AMD: an "LDS address" here is the offset inside the
// workgroup's allocation, the same number the ds_* instructions take.
typedef __attribute__((address_space(3))) unsigned char lds_u8;
typedef __attribute__((address_space(3))) u32 lds_u32;
typedef u32 u32v4 __attribute__((ext_vector_type(4)));      // 16 bytes in 4 VGPRs
typedef __attribute__((address_space(3))) u32v4 lds_u32v4;

// LDS address of a (generic) pointer into shared memory: addrspacecast to LDS, then its offset.
ESCHA_DEVICE u32 smem_addr(const void* p) {
    return (u32)(unsigned long long)(__attribute__((address_space(3))) const unsigned char*)p;
}
// A 32-bit word / 16 bytes of LDS by LDS address (ds_load_b32 / ds_load_b128).
ESCHA_DEVICE u32 lds32(u32 saddr) { return *(const lds_u32*)(unsigned long long)saddr; }
ESCHA_DEVICE u32v4 lds128(u32 saddr) { return *(const lds_u32v4*)(unsigned long long)saddr; }
ESCHA_DEVICE void sts128(u32 saddr, u32v4 v) { *(lds_u32v4*)(unsigned long long)saddr = v; }

// Value of `v` in lane `src` (0..31) of this wave: ds_bpermute_b32 (goes through the LDS crossbar
// but touches no LDS memory). The NVIDIA twin of this function is __shfl_sync.
ESCHA_DEVICE u32 lane_gather(u32 v, int src) { return (u32)__builtin_amdgcn_ds_bpermute(src << 2, (int)v); }

// gfx12 has no asynchronous global -> LDS copy: cp.async does not exist and the VMEM -> LDS loads
// (global_load_lds_*, feature vmem-to-lds-load-insts) are gfx9/gfx950/gfx1250 only, clang-22 rejects
// __builtin_amdgcn_global_load_lds for gfx1201. So the copy is SYNCHRONOUS: a 16-byte global load
// into VGPRs and a ds_store_b128; the wave waits for the load (s_waitcnt vmcnt) before the store.
// (An ordinary load: fused.h copies both the trellis and the shared x operand through here, and a
// non-temporal hint would also push x out of L2 for the next block.) Completion and
// visibility to the wave are immediate, so commit/wait only have to keep the compiler from moving
// LDS accesses across them (a wavefront-scope fence: no instruction is emitted).
// Memory latency is hidden by other resident waves, not by the stage pipeline of fused.h.
constexpr bool HAS_ASYNC_COPY = false;

// No programmatic dependent launch on AMD: kernels start after the previous one has ended.
ESCHA_DEVICE void grid_dependency_wait() {}
ESCHA_DEVICE void grid_dependents_launch() {}
// Nothing to hide an L2 prefetch behind (no dependent launch: the loads follow at once).
ESCHA_DEVICE void prefetch_l2(const void*) {}
// p (fused.h needs the optimiser barrier of platform_cuda.h's opaque_ptr only on NVIDIA)
template <typename T>
ESCHA_DEVICE T* opaque_ptr(T* p) { return p; }
// (platform_cuda.h's register pin: LLVM does not rematerialise those addresses)
ESCHA_DEVICE void keep_in_register(u32&) {}
ESCHA_DEVICE void keep_in_register(int&) {}

// No thread block clusters on RDNA (the fused kernel's CL > 1 is NVIDIA's; fused.h static_asserts
// it): these only let the shared source compile.
constexpr bool HAS_CLUSTERS = false;
ESCHA_DEVICE u32 cluster_rank() { return 0; }
ESCHA_DEVICE void cluster_barrier_after_init() {}

// What a kernel can do instead (docs/AMD_ESTIMATE.md, docs/amd_fused_h.diff): issue the 16-byte
// loads of a future trellis stage into VGPRs early, store them to LDS later, so the memory latency
// overlaps work instead of stalling the wave at the copy. Non-temporal: streamed once.
template <int N>
struct StagedCopy16 {
    u32v4 v[N];
    ESCHA_DEVICE void load(int i, const void* gmem) {
        v[i] = __builtin_nontemporal_load(reinterpret_cast<const u32v4*>(gmem));
    }
    ESCHA_DEVICE void store(int i, u32 saddr) const { sts128(saddr, v[i]); }
};
ESCHA_DEVICE void async_copy16(u32 saddr, const void* gmem) { sts128(saddr, *reinterpret_cast<const u32v4*>(gmem)); }
ESCHA_DEVICE void async_copy4(u32 saddr, const void* gmem) { *(lds_u32*)(unsigned long long)saddr = *reinterpret_cast<const u32*>(gmem); }
ESCHA_DEVICE void async_commit() { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront"); }
template <int N>
ESCHA_DEVICE void async_wait() { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront"); }

}  // namespace escha

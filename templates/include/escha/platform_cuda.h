// NVIDIA (NVRTC): the HIP spellings the templates use, mapped onto CUDA.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define ESCHA_DEVICE __device__ __forceinline__
#define ESCHA_GLOBAL extern "C" __global__
#define ESCHA_WAVE 32
#define ESCHA_ALIGN(n) __align__(n)
// The kernel's dynamic shared memory as `T name[]` (16-byte aligned)
#define ESCHA_DYNAMIC_SHARED(T, name) extern __shared__ ESCHA_ALIGN(16) T name[]

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

ESCHA_DEVICE void wave_sync() { __syncwarp(); }
ESCHA_DEVICE bool wave_any(bool pred) { return __any_sync(0xffffffffu, pred); }

struct ESCHA_ALIGN(16) u32x4 { u32 x, y, z, w; };
struct ESCHA_ALIGN(16) f32x4 { float x, y, z, w; };
struct ESCHA_ALIGN(8) f32x2 { float x, y; };

// fp16 arithmetic, each one IEEE operation with one rounding (HMUL2 / HADD2 / HFMA2)
ESCHA_DEVICE half_t hmul(half_t a, half_t b) { return __hmul(a, b); }
ESCHA_DEVICE half2_t hadd2(half2_t a, half2_t b) { return __hadd2(a, b); }
ESCHA_DEVICE half2_t hfma2(half2_t a, half2_t b, half2_t c) { return __hfma2(a, b, c); }
ESCHA_DEVICE half_t low_half(half2_t v) { return __low2half(v); }
ESCHA_DEVICE half_t high_half(half2_t v) { return __high2half(v); }

ESCHA_DEVICE float half_to_float(half_t v) { return __half2float(v); }
ESCHA_DEVICE half_t float_to_half(float v) { return __float2half_rn(v); }
ESCHA_DEVICE float bf16_to_float(bf16_t v) { return __bfloat162float(v); }
ESCHA_DEVICE bf16_t float_to_bf16(float v) { return __float2bfloat16_rn(v); }
// a * b rounded, never fused with a later add into an fma (a product whose rounding is part of
// the bits, e.g. the activations' x * rin before the Hadamard's first butterfly)
ESCHA_DEVICE float mul_rn(float a, float b) { return __fmul_rn(a, b); }

// Per 16-bit half of two fp16 pairs: max(|a|, |b|) in the magnitude bits; the sign bits are
// unspecified (callers mask them). `a` is 0 or an earlier result (non-negative here). sm_80+:
// __hmax2 with b's abs as an operand modifier; on sm_90 two nested calls become one 3-input VHMNMX.
ESCHA_DEVICE u32 hmax_abs2(u32 a, u32 b) {
#if __CUDA_ARCH__ >= 800
    const __half2 m = __hmax2(*reinterpret_cast<const __half2*>(&a), __habs2(*reinterpret_cast<const __half2*>(&b)));
    return *reinterpret_cast<const u32*>(&m);
#else
    const u32 x = a & 0x7FFF7FFFu, y = b & 0x7FFF7FFFu;   // non-negative fp16 order as their bits
    return max(x & 0xFFFFu, y & 0xFFFFu) | max(x & 0xFFFF0000u, y & 0xFFFF0000u);
#endif
}

ESCHA_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
ESCHA_DEVICE u32 shfl_xor(u32 v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
ESCHA_DEVICE float shfl_idx(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }

// The index of this thread's wave in its block, as a value ptxas knows to be the same in every lane
// of the wave (read from lane 0 by a shuffle, once, where the block's threads are converged). Loops
// and branches over it then count as wave-uniform: a shuffle inside them compiles to the SHFL alone,
// without the BRA.DIV test and the out-of-line WARPSYNC.COLLECTIVE copy that ptxas adds wherever the
// wave may be diverged (threadIdx.x / 32 does not tell it so).
ESCHA_DEVICE int wave_index() { return __shfl_sync(0xffffffffu, (int)(threadIdx.x / ESCHA_WAVE), 0); }

// Top 32 bits of the 64-bit (hi:lo) shifted left by n (0..31): one SHF.
ESCHA_DEVICE u32 funnel_l(u32 hi, u32 lo, u32 n) { return __funnelshift_l(lo, hi, n); }
// funnel_l as one value the compiler keeps (inline PTX: LLVM cannot see through it). Several
// 16-bit fields are cut from one shifted word; through __funnelshift_l LLVM rewrites each
// (x << s) >> 16 back into (x >> (16 - s)) & 0xFFFF, two instructions per field again.
ESCHA_DEVICE u32 funnel_l_kept(u32 hi, u32 lo, u32 n) {
    u32 r;
    asm("shf.l.wrap.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(n));
    return r;
}
// x << n as a multiply on the multiply pipe rather than SHF on the ALU pipe (IMAD.SHL where n is a
// constant after inlining; IMAD by a hoisted 1 << n where it is the lane's): inline PTX, so that LLVM
// keeps the multiply and does not fold it with a later shift into two ALU instructions again.
ESCHA_DEVICE u32 shl_on_mul(u32 x, u32 n) {
    u32 r;
    asm("mul.lo.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(1u << n));
    return r;
}
// a * b + c (low 32 bits) as one IMAD, kept from LLVM's rewrites like shl_on_mul.
ESCHA_DEVICE u32 mad_on_mul(u32 a, u32 b, u32 c) {
    u32 r;
    asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
// Low 32 bits of (hi:lo) >> n (0..31): one SHF.
ESCHA_DEVICE u32 funnel_r(u32 hi, u32 lo, u32 n) { return __funnelshift_r(lo, hi, n); }

// Low 16 bits of a, low 16 bits of b -> (b.lo << 16) | a.lo: one PRMT.
ESCHA_DEVICE u32 pack_lo16(u32 a, u32 b) { return __byte_perm(a, b, 0x5410); }
// High 16 bits of a, high 16 bits of b -> (b.hi << 16) | a.hi: one PRMT.
ESCHA_DEVICE u32 pack_hi16(u32 a, u32 b) { return __byte_perm(a, b, 0x7632); }
// Bits 8..23 of a, zero-extended: one PRMT (bytes 1, 2 and two zero bytes).
ESCHA_DEVICE u32 mid16(u32 a) { return __byte_perm(a, 0u, 0x4421); }

// {lo(a) + hi(a), lo(b) + hi(b)} for two fp16 pairs, each sum rounded once: three HFMA2 with
// half-broadcast operands (ptxas folds __low2half2 / __high2half2 into .H0_H0 / .H1_H1 operand
// selectors) instead of PRMT + PRMT + HADD2: the same count, two fewer on the integer ALU pipe
// that the state cuts and masks load (A/B on the H200: neutral overall, 0.5 % faster at M = 16,
// benchmarks/RESULTS.md session 8):
//   v = b * {-1, 1} + {lo(b), lo(b)} = {0, lo(b) + hi(b)}      (-x + x = +0 exactly)
//   u = {hi(a), hi(a)} * {1, 0} + v   = {hi(a), lo(b) + hi(b)}
//   r = a * {1, 0} + u                = {lo(a) + hi(a), lo(b) + hi(b)}
// (hi(a) * 0 is +-0 and x + +-0 == x unless x = -0; the codebooks' halves are never zero - their
// XOR sets exponent bits - so no sum is -0.)
ESCHA_DEVICE half2_t sum_halves2(u32 a, u32 b) {
    const half2_t ha = *reinterpret_cast<const half2_t*>(&a), hb = *reinterpret_cast<const half2_t*>(&b);
    const half2_t one_zero = __floats2half2_rn(1.f, 0.f);
    const half2_t v = __hfma2(hb, __floats2half2_rn(-1.f, 1.f), __low2half2(hb));
    const half2_t u = __hfma2(__high2half2(ha), one_zero, v);
    return __hfma2(ha, one_zero, u);
}

// c + sum of the four unsigned bytes of a * bytes of b: one IDP4A.
ESCHA_DEVICE u32 dot4_u8(u32 a, u32 b, u32 c) { return __dp4a(a, b, c); }
// c + sum of (signed byte of a) * (unsigned byte of b): dp4a.s32.u32
ESCHA_DEVICE int dot4_s8u8(u32 a, u32 b, int c) {
    int d;
    asm("dp4a.s32.u32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}


}  // namespace escha

// ---- matrix unit and async copies (NVIDIA sm_80+): mma.m16n8k16, ldmatrix, cp.async
namespace escha {

constexpr bool HAS_ASYNC_COPY = true;

// 16-byte global -> shared copy that completes asynchronously (cp.async.cg: bypasses L1).
ESCHA_DEVICE void async_copy16(u32 saddr, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(saddr), "l"(gmem));
}
// 4-byte global -> shared copy, asynchronous (cp.async.ca: the only kind for 4 bytes).
ESCHA_DEVICE void async_copy4(u32 saddr, const void* gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(saddr), "l"(gmem));
}
ESCHA_DEVICE void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
ESCHA_DEVICE void async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

// 32-bit shared-memory address of a pointer into shared memory.
ESCHA_DEVICE u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// A operand (16x16 fp16, row-major in shared memory) for mma.m16n8k16: lane l passes the
// shared address of row (l % 16), column 8 * (l / 16) of the tile.
ESCHA_DEVICE void load_a_frag(u32 (&a)[4], u32 saddr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(saddr));
}

// A 32-bit word of shared memory by its shared address (load, store).
ESCHA_DEVICE u32 lds32(u32 saddr) {
    u32 v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(saddr));
    return v;
}
ESCHA_DEVICE void sts32(u32 saddr, u32 v) { asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(saddr), "r"(v)); }

// c += A(16x16, fp16) * B(16x8, fp16), fp32 accumulate. b = {k rows 2t..2t+1, k rows 2t+8..2t+9}
// of column (lane / 4): exactly the two half2 a lane decodes for one n8 half of a trellis tile.
ESCHA_DEVICE void mma_16816(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 16 bytes of shared memory by shared address (ld.shared.v4).
ESCHA_DEVICE void lds128(u32 (&v)[4], u32 saddr) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(saddr));
}

// c += A(16x32, u8) * B(32x8, s8), s32 accumulate (wrapping, no saturation). Lane l (g = l/4,
// t = l%4): a = {row g k 4t..4t+3, row g+8 k 4t.., row g k 16+4t.., row g+8 k 16+4t..}, b0 = k
// 4t..4t+3 and b1 = k 16+4t..16+4t+3 of column g; c = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
ESCHA_DEVICE void mma_16832_u8s8(int (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace escha

namespace escha {
// Split-K publication: every thread's partial stores, a block barrier, then thread 0's acq_rel
// increment of the column group's counter (release is cumulative over what the barrier ordered
// before it); the block that reads S - 1 has acquired every other block's partials, and its
// threads read them after a barrier with loads that bypass L1 (load_coherent). No full fences:
// the per-thread hooks are empty here.
ESCHA_DEVICE void partials_release() {}
ESCHA_DEVICE void partials_acquire() {}
// *p += v at GPU scope with acquire-release semantics; returns the old value.
ESCHA_DEVICE int atomic_add_acq_rel(int* p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
// A load that sees other blocks' writes made visible by a release / acquire pair (L2, not L1).
ESCHA_DEVICE f32x4 load_coherent(const f32x4* p) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(p));
    return f32x4{v.x, v.y, v.z, v.w};
}
}  // namespace escha

// ---- programmatic dependent launch (sm_90; host: launches with the programmatic stream
// serialization attribute, ops/fused.py). A kernel so launched may start while the previous
// kernel of the stream is still running: it must call grid_dependency_wait() before it reads
// anything an earlier kernel wrote or writes anything an earlier kernel reads. Before that, only
// constant data (the layer's weights) may be touched. Without the attribute it is a no-op.
namespace escha {
ESCHA_DEVICE void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// Let the next kernel of the stream, if it is launched as a programmatic dependent, be scheduled
// before this grid ends (once every block of this grid has called this): its blocks take SM
// slots as this grid's blocks exit, stream their weights and wait in grid_dependency_wait. A
// no-op for a next kernel launched normally.
ESCHA_DEVICE void grid_dependents_launch() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// p, as an optimiser barrier (no instruction): a test of p after it is made anew, not kept from
// one before a long loop (ptxas spilled such a predicate of a 128-register kernel).
template <typename T>
ESCHA_DEVICE T* opaque_ptr(T* p) {
    asm volatile("" : "+l"(p));
    return p;
}
// x stays in a register from here on (no instruction): ptxas cannot recompute a value an asm
// defined, so it keeps it instead of rematerialising it at its uses (fused.h: the per-lane
// addresses of the multi-m-tile main loops, which it recomputed in every step otherwise).
ESCHA_DEVICE void keep_in_register(u32& x) { asm volatile("" : "+r"(x)); }
ESCHA_DEVICE void keep_in_register(int& x) { asm volatile("" : "+r"(x)); }
// Fetch the 128-byte line holding addr into L2 (no register written, nothing waited for). For the
// layer's own data (scales), issued before grid_dependency_wait: a load after the wait then hits
// L2 instead of paying an HBM miss on the critical path.
ESCHA_DEVICE void prefetch_l2(const void* addr) {
    asm volatile("prefetch.global.L2 [%0];\n" :: "l"(addr));
}
}  // namespace escha

// ---- thread block clusters (sm_90; host: launches with the cluster-dimension attribute,
// runtime/cuda.py): the fused kernel's blocks of one cluster share their in-kernel prologue, each
// writing its part of the A operand into every block's shared memory (fused.h, CL > 1).
namespace escha {
constexpr bool HAS_CLUSTERS = true;
// This block's rank in its cluster (0 without a cluster launch).
ESCHA_DEVICE u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every block of the cluster arrives, then waits for all of them; the arrival is
// relaxed: it orders only the mbarrier.init operations fenced by fence_mbar_init before it (the
// documented pattern for announcing mbarriers to a cluster; a release arrival, like any
// cluster-scope release, compiles to MEMBAR.ALL.GPU on sm_90).
ESCHA_DEVICE void cluster_barrier_after_init() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The same barrier in two halves, for a block that announces its mbarriers early and writes into
// another block only much later (fused.h SC): every thread arrives (relaxed, as above) at block
// start and waits before its first write into another block.
ESCHA_DEVICE void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
ESCHA_DEVICE void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
// The address in block `rank`'s shared memory of the same offset as this block's shared address
// `saddr` (the shared::cluster window).
ESCHA_DEVICE u32 cluster_map(u32 saddr, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(saddr), "r"(rank));
    return r;
}
// `v` into another block's shared memory (`caddr`, a cluster_map address), completing its 4 / 8
// bytes on that block's mbarrier `cbar` (also a cluster_map address): the receiver learns from its
// own mbarrier that the data has landed, and neither side fences (a cluster barrier's release is a
// MEMBAR.ALL.GPU on sm_90).
ESCHA_DEVICE void st_async_u32(u32 caddr, u32 v, u32 cbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n"
                 :: "r"(caddr), "r"(v), "r"(cbar) : "memory");
}
ESCHA_DEVICE void st_async_u64(u32 caddr, u64 v, u32 cbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];\n"
                 :: "r"(caddr), "l"(v), "r"(cbar) : "memory");
}
// 16 bytes (caddr 16-byte aligned), the same way. The values leave with the instruction: a sender
// may exit before they land (fused.h SC), as its own shared memory is not involved.
ESCHA_DEVICE void st_async_f32x4(u32 caddr, f32x4 v, u32 cbar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 :: "r"(caddr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(cbar) : "memory");
}
}  // namespace escha

// ---- shared-memory barriers (mbarrier) and bulk copies (sm_90): the coded GEMM's stage handshakes
// (wgmma.h) and the fused kernel's activation chunks (fused.h, XH)
namespace escha {
ESCHA_DEVICE void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// Initialized mbarriers visible to the async proxy (the copy engines complete transactions on them).
ESCHA_DEVICE void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One arrival (release: this thread's earlier shared-memory writes are visible to the waiters).
ESCHA_DEVICE void mbar_arrive(u32 bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" :: "r"(bar) : "memory");
}
// One arrival that also announces `bytes` to arrive by transaction (the phase completes when both
// the arrivals and the bytes are in).
ESCHA_DEVICE void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// Wait until the phase with this parity (0 for the first completion, 1, 0, ...) has completed.
ESCHA_DEVICE void mbar_wait(u32 bar, u32 parity) {
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// One arrival on the mbarrier `cbar` of a block of this cluster (a cluster_map address; this block's
// own too): a consumer warpgroup releasing a stage slot its cluster's producers all write (gemm.hip.j2).
ESCHA_DEVICE void mbar_arrive_cluster(u32 cbar) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(cbar) : "memory");
}
// Every thread of every block of the cluster arrives (release) and waits (acquire): after it no
// block of the cluster reads or writes another's shared memory any more.
ESCHA_DEVICE void cluster_sync() {
    asm volatile("barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
// `bytes` (a multiple of 16, both 16-byte aligned) of this block's shared memory at `src` into another
// block's at `cdst` (a cluster_map address) by the copy engine, completing them on that block's
// mbarrier `cbar`. The copy reads `src` through the async proxy: the writers of `src` fence first
// (fence.proxy.async), as for wgmma.
ESCHA_DEVICE void bulk_copy_to_peer(u32 cdst, u32 src, u32 bytes, u32 cbar) {
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(cdst), "r"(src), "r"(bytes), "r"(cbar) : "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) global -> shared by the copy engine,
// completing that many bytes on the mbarrier `bar` (the issuing thread does not wait).
ESCHA_DEVICE void bulk_copy_to_shared(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(reinterpret_cast<u64>(src)), "r"(bytes), "r"(bar) : "memory");
}
}  // namespace escha

"""Matrix-unit rate at 16 tokens under an integer decode load (NVIDIA sm_90a): which way of feeding
decoded trellis tiles to the tensor unit at M = 16 is bound by what. A synthetic loop per warp and
trellis tile (16 x 16 weights) issues a decode-like integer chain (per lane 8 states: SHF, IMAD,
LOP3 and `--extra` dependent LOP3 each; their words become the unit's weight operand) and then:

  sw2   2 mma.sync m16n8k16 (the swapped word route, 8 tokens: what M <= 8 runs today)
  sw4   4 mma.sync (the swapped word route at 16 tokens: session 4's slow variant)
  fp2   ldmatrix.x4 + pairing (3 HFMA2 per two words, as platform sum_halves2) + 2 mma.sync (the
        fp16 route at 16 tokens)
  nw4   2 ldmatrix.x4 of {x, x} tokens + 4 mma.sync with the words as B (the natural-orientation word
        route of session 6)
  wg    2 wgmma m64n16k16 per warpgroup with the words as register A, {x, x} tokens from shared
        memory as B, one group in flight (the proposed M = 16 word route)
  wg4   wg with three groups in flight (four tiles' A registers live)
  wg8   wg4 at 8 tokens (m64n8k16: against sw2, the M <= 8 route)
  sw1   sw2 with only the "lo" mma.sync (what one instruction per tile costs; the hi words
        folded by 4 FADD, which keeps their decode)
  sw2c  sw2 with the two instructions in two accumulator chains
  sw2h  sw2 with fp16 accumulators (2 registers of C / D instead of 4: register traffic)
  sw2i  sw2 as mma.sync m16n8k32 u8 x s8 -> s32 (the int8 route's instruction)
  ffma  no unit: per word lo + hi in fp32 (two conversions and an add) and one FFMA with the token's
        fp32 value (M = 1 without the matrix unit, fp32 sums)
  hfma  no unit: per word one HFMA2 {lo, hi} x {x, x} into an fp16 pair per column, flushed to fp32
        once per tile (2 HADD2.F32-class conversions + 2 FADD; fp16 partial products)
  none  the decode and the token loads alone (words folded by 8 FADD on the fp32 pipe: the
        integer work's own time)

and prints ns per tile per SM and SM cycles per tile at the SM clock measured under decode load
(1.755 GHz, RESULTS.md session 5). No correctness: operands are arbitrary, only the issue and unit
rates count.

    python benchmarks/bench_mma_rate.py --out mma_rate.json
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_linear import run_meta  # noqa: E402
from escha_jit.toolchain.nvrtc import NVRTCToolchain  # noqa: E402

SRC = r"""
#include <cuda_fp16.h>
typedef unsigned u32;
#define ROUTE_{{ROUTE}} 1
constexpr int EXTRA = {{EXTRA}};
constexpr bool EXTRA_IMAD = {{EXTRA_IMAD}};      // the extra integer work on the multiply pipe (IMAD) instead of the ALU (LOP3)
__device__ __forceinline__ u32 lop3(u32 a, u32 b, u32 c) {
    u32 d; asm volatile("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
__device__ __forceinline__ u32 shf(u32 lo, u32 hi, u32 s) {
    u32 d; asm("shf.r.wrap.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(lo), "r"(hi), "r"(s)); return d;
}
__device__ __forceinline__ void mma(float (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_h(u32 (&c)[2], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                 : "+r"(c[0]), "+r"(c[1]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_i(int (&c)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void lds128(u32 (&v)[4], u32 a) {
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm4(u32 (&v)[4], u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a));
}
__device__ __forceinline__ unsigned long long desc(u32 saddr) {
    unsigned long long d = (unsigned long long)((saddr & 0x3FFFFu) >> 4);
    d |= (unsigned long long)(128 >> 4) << 16;    // leading byte offset: next core matrix along k
    d |= (unsigned long long)(256 >> 4) << 32;    // stride byte offset: next 8 tokens
    return d;
}
#if defined(ROUTE_wg)
#define WG_N 16
#define WG_DEPTH 1
#define UNROLL 2
#elif defined(ROUTE_wg4)
#define WG_N 16
#define WG_DEPTH 3
#define UNROLL 4
#elif defined(ROUTE_wg8)
#define WG_N 8
#define WG_DEPTH 3
#define UNROLL 4
#else
#define UNROLL 2
#endif
#define STR_(x) #x
#define STR(x) STR_(x)
#define PRAGMA(x) _Pragma(#x)
__device__ __forceinline__ void wg(float (&d)[8], const u32 (&a)[4], unsigned long long b) {
#if WG_N == 8
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, 1, 1, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#else
    asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, 1, 1, 1, 0;"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#endif
}

// {lo(a) + hi(a), lo(b) + hi(b)} by three HFMA2 (the fp16 route's pairing, platform sum_halves2)
__device__ __forceinline__ u32 pair(u32 a, u32 b) {
    const __half2 ha = *reinterpret_cast<const __half2*>(&a), hb = *reinterpret_cast<const __half2*>(&b);
    const __half2 one_zero = __floats2half2_rn(1.f, 0.f);
    const __half2 v = __hfma2(hb, __floats2half2_rn(-1.f, 1.f), __low2half2(hb));
    const __half2 u = __hfma2(__high2half2(ha), one_zero, v);
    const __half2 r = __hfma2(ha, one_zero, u);
    return *reinterpret_cast<const u32*>(&r);
}
__device__ __forceinline__ void pin(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
// 8 decoded words of one tile for this lane from 4 raw words
__device__ __forceinline__ void decode(u32 (&y)[8], const u32 (&w)[4], u32 mul) {
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        u32 s = shf(w[j >> 1], w[((j >> 1) + 1) & 3], 5 * j + 3);
        #pragma unroll
        for (int e = 0; e < EXTRA; ++e)
            s = EXTRA_IMAD ? s * (0x9E3779B9u + 2 * e) + w[(j + e) & 3] : lop3(s, w[(j + e) & 3], 0x9E3779B9u + e);
        u32 h = s * mul;
        y[j] = lop3(h, 0x8FFF8FFFu, 0x3B603B60u);
    }
}

extern "C" __global__ void __launch_bounds__(256, 2) rate(float* out, u32 mul, int iters) {
    extern __shared__ __align__(1024) unsigned char sm[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < 8192; i += blockDim.x) ((u32*)sm)[i] = 0x3C003C00u ^ (i * 0x00010001u & 0x00FF00FFu);
    __syncthreads();
    const u32 base = (u32)__cvta_generic_to_shared(sm);
    float c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    u32 wa = base + 16 * ((lane + 7 * warp) & 255);        // raw words of the lane (varying per tile)
    const u32 xa = base + 16384 + 16 * lane;               // token operand (mma.sync routes)
    (void)xa;
#if defined(WG_N)
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
    // UNROLL tiles per trip: the wg routes' register A operands of consecutive tiles are then distinct
    // PTX registers (WG_DEPTH groups stay in flight while the next tile is decoded)
    PRAGMA(unroll UNROLL)
    for (int it = 0; it < iters; ++it) {
        u32 w[4];
        lds128(w, wa + ((it * 512) & 8191));
        u32 y[8];
        decode(y, w, mul);
        const u32 lo[4] = {y[0], y[4], y[1], y[5]}, hi[4] = {y[2], y[6], y[3], y[7]};
#if defined(ROUTE_sw1) || defined(ROUTE_sw2c) || defined(ROUTE_sw2h) || defined(ROUTE_sw2i)
        u32 x[4];
        lds128(x, xa + ((it * 1024) & 8191));
#if defined(ROUTE_sw1)
        mma(*reinterpret_cast<float (*)[4]>(&c[0]), lo, x[0], x[1]);
        #pragma unroll
        for (int q = 0; q < 4; ++q) c[4 + q] += __uint_as_float(hi[q]);      // keeps the hi words' decode live
#elif defined(ROUTE_sw2c)
        mma(*reinterpret_cast<float (*)[4]>(&c[0]), lo, x[0], x[1]);
        mma(*reinterpret_cast<float (*)[4]>(&c[4]), hi, x[2], x[3]);
#elif defined(ROUTE_sw2h)
        u32 (&ch)[2] = *reinterpret_cast<u32 (*)[2]>(&c[0]);
        mma_h(ch, lo, x[0], x[1]);
        mma_h(ch, hi, x[2], x[3]);
#else
        int (&ci)[4] = *reinterpret_cast<int (*)[4]>(&c[0]);
        mma_i(ci, lo, x[0], x[1]);
        mma_i(ci, hi, x[2], x[3]);
#endif
#elif defined(ROUTE_ffma)
        float xf[4];
        lds128(*reinterpret_cast<u32 (*)[4]>(xf), xa + ((it * 1024) & 8191));
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
            const __half2 h = *reinterpret_cast<const __half2*>(&y[j]);
            const float w = __low2float(h) + __high2float(h);
            c[(j >> 2) + 2 * (it & 1)] = fmaf(w, xf[j & 3], c[(j >> 2) + 2 * (it & 1)]);
        }
        (void)lo; (void)hi;
#elif defined(ROUTE_hfma)
        u32 x[4];
        lds128(x, xa + ((it * 1024) & 8191));
        #pragma unroll
        for (int col = 0; col < 2; ++col) {
            __half2 a = __hmul2(*reinterpret_cast<const __half2*>(&y[4 * col]), *reinterpret_cast<const __half2*>(&x[0]));
            #pragma unroll
            for (int q = 1; q < 4; ++q)
                a = __hfma2(*reinterpret_cast<const __half2*>(&y[4 * col + q]), *reinterpret_cast<const __half2*>(&x[q]), a);
            c[col] += __low2float(a) + __high2float(a);
        }
        (void)lo; (void)hi;
#elif defined(ROUTE_none)
        u32 x[4];
        lds128(x, xa + ((it * 1024) & 8191));
        #pragma unroll
        for (int j = 0; j < 8; ++j) c[j] += __uint_as_float(y[j]);            // FADD: off the integer pipes
        c[0] += __uint_as_float(x[0] ^ x[3]);
        (void)lo; (void)hi;
#elif defined(ROUTE_sw2) || defined(ROUTE_sw4)
        u32 x[4];
        lds128(x, xa + ((it * 1024) & 8191));
        float (&c0)[4] = *reinterpret_cast<float (*)[4]>(&c[0]);
        mma(c0, lo, x[0], x[1]);
        mma(c0, hi, x[2], x[3]);
#if defined(ROUTE_sw4)
        u32 x1[4];
        lds128(x1, xa + 512 + ((it * 1024) & 8191));
        float (&c1)[4] = *reinterpret_cast<float (*)[4]>(&c[4]);
        mma(c1, lo, x1[0], x1[1]);
        mma(c1, hi, x1[2], x1[3]);
#endif
#elif defined(ROUTE_fp2)
        u32 a[4];
        ldsm4(a, xa + ((it * 1024) & 8191));
        u32 b[4];
        #pragma unroll
        for (int q = 0; q < 4; ++q) b[q] = pair(y[2 * q], y[2 * q + 1]);
        float (&c0)[4] = *reinterpret_cast<float (*)[4]>(&c[0]);
        float (&c1)[4] = *reinterpret_cast<float (*)[4]>(&c[4]);
        mma(c0, a, b[0], b[1]);
        mma(c1, a, b[2], b[3]);
#elif defined(ROUTE_nw4)
        u32 a0[4], a1[4];
        ldsm4(a0, xa + ((it * 1024) & 8191));
        ldsm4(a1, xa + 512 + ((it * 1024) & 8191));
        float (&c0)[4] = *reinterpret_cast<float (*)[4]>(&c[0]);
        float (&c1)[4] = *reinterpret_cast<float (*)[4]>(&c[4]);
        mma(c0, a0, y[0], y[1]);
        mma(c0, a1, y[2], y[3]);
        mma(c1, a0, y[4], y[5]);
        mma(c1, a1, y[6], y[7]);
#elif defined(WG_N)
        const u32 xs = base + 16384 + ((it * 1024) & 8191);
        #pragma unroll
        for (int i = 0; i < 8; ++i) pin(c[i]);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        wg(c, lo, desc(xs));
        wg(c, hi, desc(xs + 512));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned " STR(WG_DEPTH) ";" ::: "memory");
        #pragma unroll
        for (int i = 0; i < 8; ++i) pin(c[i]);
#endif
    }
#if defined(WG_N)
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    #pragma unroll
    for (int i = 0; i < 8; ++i) pin(c[i]);
#endif
    float s = 0;
    #pragma unroll
    for (int i = 0; i < 8; ++i) s += c[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

ROUTES = ("sw2", "sw4", "fp2", "nw4", "wg", "wg4", "wg8", "sw1", "sw2c", "sw2h", "sw2i", "ffma", "hfma", "none")
CLOCK_GHZ = 1.755          # SM clock under decode load (Nsight Compute, RESULTS.md session 5)


def build(route: str, extra: int, extra_imad: bool = False):
    src = (SRC.replace("{{ROUTE}}", route).replace("{{EXTRA}}", str(extra))
           .replace("{{EXTRA_IMAD}}", "true" if extra_imad else "false"))
    co = NVRTCToolchain().compile(src, "sm_90a", name=f"rate_{route}_{extra}{'_imad' if extra_imad else ''}.cu")
    return co


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="mma_rate.json")
    ap.add_argument("--extra", default="0,1,2,3")
    ap.add_argument("--routes", default=",".join(ROUTES))
    ap.add_argument("--extra-imad", action="store_true", help="the extra integer work as dependent IMAD (multiply "
                    "pipe) instead of LOP3 (ALU pipe)")
    ap.add_argument("--iters", type=int, default=4096)
    ap.add_argument("--compile-only", action="store_true", help="compile every variant (no GPU) and print ptxas' resource lines")
    args = ap.parse_args(argv)
    extras = [int(e) for e in args.extra.split(",")]
    rows = []
    routes = [r for r in args.routes.split(",") if r]
    bad = [r for r in routes if r not in ROUTES]
    if bad:
        ap.error(f"--routes: unknown {bad}; known: {', '.join(ROUTES)}")
    if args.compile_only:
        for r in routes:
            for e in extras:
                co = build(r, e, args.extra_imad)
                print(r, e, co.log.strip().splitlines()[-2:], flush=True)
        return
    from escha_jit.runtime.cuda import CudaRuntime
    rt = CudaRuntime()
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    blocks, threads = 2 * sms, 256
    out = torch.empty(blocks * threads, device=dev)
    print(f"{'route':<6}{'extra':>6}{'int instr/tile/lane':>22}{'ns/tile/SM':>12}{'cycles/tile/SM':>16}", flush=True)
    for r in routes:
        for e in extras:
            co = build(r, e, args.extra_imad)
            fn = rt.get_function(rt.load_binary(dev.index or 0, co.binary), "rate")
            rt.set_max_dynamic_smem(fn, 32768)
            stream = torch.cuda.current_stream().cuda_stream
            vals = (out.data_ptr(), 0x83DCD12D, args.iters)
            types = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32)
            def launch():
                rt.launch(fn, (blocks, 1, 1), (threads, 1, 1), 32768, stream, vals, types, "rate")

            for _ in range(3):
                launch()
            torch.cuda.synchronize()
            times = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); launch(); b.record(); b.synchronize()
                times.append(a.elapsed_time(b) * 1e-3)
            t = sorted(times)[len(times) // 2]
            tiles_per_sm = blocks * (threads // 32) * args.iters / sms
            ns = t / tiles_per_sm * 1e9
            instr = 1 + 8 * (3 + e)
            rows.append(dict(route=r, extra=e, extra_op="imad" if args.extra_imad else "lop3", int_instr_per_tile_lane=instr, ns_per_tile_sm=ns,
                             cycles_per_tile_sm=ns * CLOCK_GHZ))
            print(f"{r:<6}{e:>6}{instr:>22}{ns:>12.3f}{ns * CLOCK_GHZ:>16.2f}", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), clock_ghz=CLOCK_GHZ, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()

"""JIT timings (PERF.md target 4): cold compile per specialization and warm readiness.

    python benchmarks/jit_times.py --out jit_times.json
    python benchmarks/jit_times.py --cold-only sm_90     # no GPU: the cold compiles alone, printed

1. cold: the representative subset of shipped specializations (one per op and codebook), plus
   for every rate and codebook the first untuned fused configuration and its swapped twin (fp16),
   each compiled once, one at a time, straight through the toolchain (wall seconds of the compile
   call). Each source gets a comment that makes it unique to this run, so that no cache can serve
   it: not escha_jit's, and not one inside the compiler or on the machine (session 37: on the H200
   host 51 of 79 rows of the older, cache-based version read 0.03-0.13 s, the specs that the GPU
   tests had compiled on that machine before). Then everything the model below needs is compiled
   into an empty cache, in parallel. Compile time depends on the rate: the trellis cut plan is K's
   (session 24: the swapped LCG kernels took 5-20 s each at e4b769b);
2. warm: a NEW process with ESCHA_JIT_NO_COMPILE=1 gets ready to run a 32-layer Llama-style
   model (7 coded projections per layer, K/codebook mix of escha_jit.synth.DEFAULT_RATES, fp16,
   every M bucket): for each of its 224 projections the kernels it needs are looked up in the
   disk cache and loaded on the GPU. Reported: seconds from the first lookup to all loaded.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

M_BUCKETS = (1, 16, 32, 64, 128, 256)


def model_specs(arch: str):
    from escha_jit.kernels import fused, hadamard, reconstruct
    from escha_jit.synth import DEFAULT_RATES
    out = []
    for layer in range(32):
        for leaf, (K, cb) in DEFAULT_RATES.items():
            for M in M_BUCKETS:
                s = fused.spec_for(arch, K, cb, "f16", "f16", fused.default_config(M))
                out.append((s, fused.render_extra(s), fused.ARGS))
            s = reconstruct.spec_for(arch, K, cb)
            out.append((s, reconstruct.render_extra(s), reconstruct.ARGS))
    for i, o in (("f16", "f16"), ("f16", "f32"), ("f32", "f16")):
        s = hadamard.spec_for(arch, i, o)
        out.append((s, hadamard.render_extra(s), hadamard.ARGS))
    return out


def cold_specs(arch: str) -> list:
    """The representative subset and every rate's first fused default config with its swapped twin."""
    from escha_jit.kernels import fused
    from escha_jit.kernels.registry import all_rate_codebooks, fused_default_configs, fused_fits, shipped_specs, with_swap
    from escha_jit.spec import vendor_of
    out = dict(shipped_specs(arch, full=False))
    for K, cb in all_rate_codebooks():
        cfg = fused_default_configs(vendor_of(arch), cb, K)[0]
        if fused_fits(arch, cfg, K):
            for c in with_swap(cfg, arch, cb):
                s = fused.spec_for(arch, K, cb, "f16", "f16", c)
                out.setdefault(s, fused.render_extra(s))
    return list(out.items())


def compile_cold(arch: str) -> list:
    """The cold set, each spec compiled once from a source no cache has seen: offline.CompileRows
    (``seconds``: the wall time of the toolchain's compile call; never ``cached``)."""
    from escha_jit.errors import EschaError
    from escha_jit.jit import compile_options, toolchain_for
    from escha_jit.offline import CompileRow
    from escha_jit.render import include_dir, render
    tc = toolchain_for(arch)
    tc.fingerprint()
    run = uuid.uuid4().hex
    rows = []
    for spec, extra in cold_specs(arch):
        # a comment changes no instruction (the SASS check below still runs on the result)
        source = render(spec, extra) + f"\n// escha_jit jit_times run {run}\n"
        t0 = time.perf_counter()
        try:
            code = tc.compile(source, spec.arch, compile_options(spec), name=spec.kernel_name() + ".hip",
                              include_dirs=[include_dir()])
        except EschaError as e:
            rows.append(CompileRow(str(spec), time.perf_counter() - t0, False, error=str(e)))
            continue
        rows.append(CompileRow.of_code(spec, time.perf_counter() - t0, False, code))
    return rows


def cold_summary(rows) -> dict:
    """Seconds of the compiles that succeeded: max, median, mean, sum, and the slowest specs."""
    cold = sorted(r.seconds for r in rows if r.error is None)
    return {"max": cold[-1], "median": cold[len(cold) // 2], "mean": sum(cold) / len(cold), "sum": sum(cold),
            "slowest": sorted(((round(r.seconds, 2), r.spec) for r in rows if r.error is None), reverse=True)[:5]}


def print_cold(arch: str) -> None:
    rows = compile_cold(arch)
    c = cold_summary(rows)
    print(f"{len(rows)} specs for {arch}, {sum(1 for r in rows if not r.ok)} failed: max {c['max']:.2f} s, "
          f"median {c['median']:.2f} s, sum {c['sum']:.1f} s")
    for t, spec in c["slowest"]:
        print(f"{t:6.2f} {spec}")
    for r in rows:
        if not r.ok:
            print(f"FAILED {r.spec}: {r.error or '; '.join(r.problems)}")


def warm_child() -> None:
    import torch
    from escha_jit.ops.common import arch_of, kernel_for
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)                      # CUDA context up before timing
    arch = arch_of(dev)
    specs = model_specs(arch)
    t0 = time.perf_counter()
    for spec, extra, args in specs:
        kernel_for(spec, dev, args, extra)
    torch.cuda.synchronize()
    print(json.dumps({"warm_ready_s": time.perf_counter() - t0, "lookups": len(specs),
                      "unique_specs": len({s for s, _, _ in specs})}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="jit_times.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cold-only", metavar="ARCH", help="only compile the cold set for ARCH, one at a time (no GPU)")
    args = ap.parse_args(argv)
    if args.child:
        return warm_child()
    if args.cold_only:
        return print_cold(args.cold_only)
    import torch
    from escha_jit.offline import compile_all
    from escha_jit.ops.common import arch_of
    arch = arch_of(torch.device("cuda"))
    rows = compile_cold(arch)
    cold = cold_summary(rows)
    with tempfile.TemporaryDirectory(prefix="escha-jit-times-") as d:
        uniq = {s: e for s, e, _ in model_specs(arch)}
        compile_all(arch, cache_dir=d, specs=list(uniq.items()))
        env = dict(os.environ, ESCHA_JIT_CACHE_DIR=d, ESCHA_JIT_NO_COMPILE="1")
        runs = []
        for _ in range(3):
            r = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
            if r.returncode:
                print(r.stdout, r.stderr)
                raise SystemExit("warm child failed")
            runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    res = {"arch": arch, "gpu": torch.cuda.get_device_name(), "specs": len(rows),
           "failed": [r.spec for r in rows if r.error],
           "problems": {r.spec: list(r.problems) for r in rows if r.problems}, "cold_compile_s": {
               "max": cold["max"], "median": cold["median"], "mean": cold["mean"],
               "per_spec": {r.spec: round(r.seconds, 4) for r in rows}},
           "warm": runs, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(json.dumps({k: v for k, v in res.items() if k != "cold_compile_s"} |
                     {"cold_max": cold["max"], "cold_median": cold["median"], "cold_slowest": cold["slowest"]}, indent=1))
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

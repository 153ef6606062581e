"""One dense-weight build (ops.dense.dense_weight, the prefill path's W) per problem, bracketed for a
profiler (NVIDIA, Nsight Compute), as benchmarks/profile_fused.py does for the fused kernel:

    ncu --profile-from-start off --section WarpStateStats --section SourceCounters ... \\
        python benchmarks/profile_dense.py --problems 8192x28672:2:mcg,8192x28672:4:mul1

Each problem's kernel is compiled and run once outside the profiled range; then ONE build per
problem runs between cudaProfilerStart / cudaProfilerStop. Prints the weights per build, so the
profiler's instruction counts turn into instructions per weight.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.ops.dense import dense_weight  # noqa: E402
from bench_linear import random_layers  # noqa: E402


def parse_problems(text: str) -> list[tuple[int, int, float, str]]:
    """'8192x28672:2:mcg,4096x4096:4:mul1' -> [(IC, OC, K, codebook), ...]"""
    out = []
    for p in text.split(","):
        shape, K, cb = p.split(":")
        IC, OC = (int(v) for v in shape.split("x"))
        out.append((IC, OC, float(K), cb))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=parse_problems, default=parse_problems("8192x28672:2:mcg,8192x28672:4:mul1"))
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16"))
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    runs = []
    for IC, OC, K, cb in args.problems:
        w = random_layers(IC, OC, K, cb, 1, dev)[0]
        W = torch.empty(IC, OC, dtype=dt, device=dev)
        dense_weight(w, dt, out=W)                # compile / load outside the profiled range
        runs.append((w, W))
        print(f"{IC}x{OC} K{K:g} {cb}: {IC * OC} weights per build", flush=True)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for w, W in runs:
        dense_weight(w, dt, out=W)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()

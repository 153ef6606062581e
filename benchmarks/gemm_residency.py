"""How many of the coded GEMM's blocks the GPU holds at once for each cluster size (kernels.gemm
share 1 / 2 / 4: token blocks per cluster), and how many rounds ("waves") a call of M rows then
takes per layer shape: the driver's counts (cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs,
cuOccupancyMaxActiveClusters x share), no timing. Clusters must sit inside one GPC, so where a GPC's
SM count is not a multiple of the cluster size some SMs stay idle. Prints a table, writes JSON.

    python benchmarks/gemm_residency.py --shapes 4096x4096,4096x14336 --ms 1024,4096 --out gemm_residency.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.kernels import gemm  # noqa: E402
from escha_jit.ops.common import arch_of, kernel_for  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4096x4096,4096x14336,14336x4096,8192x28672", help="ICxOC,...")
    ap.add_argument("--ms", default="512,1024,4096", help="rows per call")
    ap.add_argument("--shares", default="1,2,4")
    ap.add_argument("--out", default=None, help="JSON file")
    args = ap.parse_args()
    dev = torch.device("cuda")
    arch, sms = arch_of(dev), torch.cuda.get_device_properties(dev).multi_processor_count
    resident = {}
    single = gemm.spec_for(arch, 2, "mcg", "f16")
    for share in (int(s) for s in args.shares.split(",")):
        spec = gemm.spec_for(arch, 2, "mcg", "f16", share=share)
        k = kernel_for(spec, dev, gemm.ARGS, gemm.render_extra(spec))
        smem = gemm.smem_bytes(spec)
        per_sm = k.max_active_blocks(gemm.THREADS, smem)
        clusters = k.max_active_clusters((gemm.THREADS,), smem, share) if share > 1 else per_sm * sms
        resident[share] = dict(blocks_per_sm=per_sm, clusters=clusters, blocks=clusters * share, smem=smem)
        print(f"share {share}: {per_sm} block(s) per SM, {clusters} clusters = {clusters * share} blocks "
              f"resident on {sms} SMs ({smem} B shared memory per block)")
    rows = []
    print(f"{'shape':>12} {'M':>5} " + " ".join(f"{'waves s' + str(s):>9}" for s in resident))
    for shape in args.shapes.split(","):
        IC, OC = (int(v) for v in shape.split("x"))
        for M in (int(m) for m in args.ms.split(",")):
            tb = gemm.token_blocks(single, M)
            blocks = tb * (OC // gemm.COLS)
            waves = {s: blocks / r["blocks"] for s, r in resident.items() if tb % s == 0}   # as share_for pairs them
            rows.append(dict(IC=IC, OC=OC, M=M, blocks=blocks, waves=waves))
            print(f"{shape:>12} {M:>5} " + " ".join(f"{waves[s]:>9.2f}" if s in waves else f"{'-':>9}"
                                                   for s in resident))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(dev), sms=sms, resident=resident, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()

"""The coded GEMM's SASS without a GPU (NVRTC + cuobjdump: the ``cuda`` and ``sass`` extras): per
specialization its registers, spills and innermost loops - the producer's decode, the consumers'
wgmma, the epilogue's row steps - with their instruction counts and the opcodes that bound them
(shuffles, shared-memory and global accesses), and what changed against an earlier run. Run it on
both trees before spending GPU time on an A/B of the GEMM (benchmarks/RESULTS.md session 58):

    python benchmarks/gemm_sass.py --out before.json             # on the old tree
    python benchmarks/gemm_sass.py --compare before.json         # on the new one
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.jit import compile_spec  # noqa: E402
from escha_jit.kernels import gemm  # noqa: E402
from escha_jit.toolchain.sass import disassemble, innermost_loops  # noqa: E402

WATCH = ("HGMMA", "SHFL", "LDS", "STS", "STG", "LDG", "FADD", "FFMA", "FMUL", "LOP3", "IMAD")


def loop_role(opcodes: dict) -> str:
    """What a loop of the GEMM does, by the instructions it holds."""
    names = " ".join(opcodes)
    if "HGMMA" in names:
        return "wgmma"
    if "SHFL" in names and "STG" in names:
        return "epilogue"
    if "STS" in names and "LOP3" in names:
        return "producer"
    return "other"


def stats(spec, cache=None) -> dict:
    """Registers, spill bytes and the innermost loops (role, instruction count, watched opcodes) of
    ``spec`` (a kernels.gemm spec), compiled into ``cache`` (default: escha_jit's)."""
    entry = compile_spec(spec, gemm.render_extra(spec), cache=cache)
    res = next(iter(entry.code.resources.values()))
    loops = []
    for lp in innermost_loops(disassemble(entry.code.binary), min_instructions=32):
        ops = lp["opcodes"]
        watch = {w: sum(n for o, n in ops.items() if o.split(".")[0] == w) for w in WATCH}
        loops.append(dict(role=loop_role(ops), instructions=lp["instructions"], **{k: v for k, v in watch.items() if v}))
    return dict(registers=res["registers"], spill_bytes=res["spill_bytes"], loops=loops)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--Ks", default="2,4,8")
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--outs", default="bf16,f32", help="output dtypes")
    ap.add_argument("--variants", default=";share=2;tokens=192;stages=2,tokens=64",
                    help="';'-separated tile variants of kernels.gemm.spec_for ('' = the defaults)")
    ap.add_argument("--compare", default="", help="an earlier run's JSON: print what changed")
    ap.add_argument("--out", default="gemm_sass.json")
    args = ap.parse_args(argv)
    before = json.load(open(args.compare))["kernels"] if args.compare else {}
    kernels = {}
    for K in (float(k) for k in args.Ks.split(",")):
        for cb in args.codebooks.split(","):
            for out in args.outs.split(","):
                for v in args.variants.split(";"):
                    tile = {k: int(x) for k, x in (p.split("=") for p in v.split(",") if p)}
                    spec = gemm.spec_for("sm_90", K, cb, out, **tile)
                    name = spec.kernel_name()
                    s = kernels[name] = stats(spec)
                    loops = "  ".join(f"{lp['role']} {lp['instructions']} ({', '.join(f'{w} {lp[w]}' for w in WATCH if w in lp and w in ('HGMMA', 'SHFL', 'LDS', 'STS', 'STG'))})"
                                      for lp in s["loops"])
                    was = before.get(name)
                    change = "" if was is None else ("  same" if was == s else
                                                     f"  was {was['registers']} regs, loops {[lp['instructions'] for lp in was['loops']]}")
                    print(f"{name:58} {s['registers']:4} regs {s['spill_bytes']:4} spill  {loops}{change}", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(arch="sm_90", kernels=kernels), f, indent=1)


if __name__ == "__main__":
    main()

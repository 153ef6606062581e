"""The prep kernels' machine code without a GPU: per specialization (sm_90: the lane, words and
groups variants; gfx1201: the lane variant) its registers, spills, innermost loops with their
instruction counts, and the fused multiply-adds in it - sm_90 FFMA, gfx1201 v_fma_mix_f32 /
v_fma_f32. The rotation's products x * rin must be rounded before the first butterfly adds them
(`mul_rn`); in the groups kernel every FFMA is a shuffle stage's `o + (+-1) v` (64 per step copy),
the lane kernels have none (benchmarks/RESULTS.md session 59). Needs NVRTC + cuobjdump (the
``cuda`` and ``sass`` extras) and, for gfx1201, the offline AMD route (scripts/setup_amd_toolchain.sh).

    python benchmarks/prep_sass.py --out prep_sass.json
    python benchmarks/prep_sass.py --archs sm_90 --compare prep_sass.json     # on another tree
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.jit import compile_spec  # noqa: E402
from escha_jit.kernels import prep  # noqa: E402
from escha_jit.spec import vendor_of  # noqa: E402
from escha_jit.toolchain.sass import disassemble, innermost_loops  # noqa: E402

FMA = {"nvidia": ("FFMA",), "amd": ("v_fma_mix_f32", "v_fma_f32")}


def specs(arch: str) -> list:
    out = []
    for dt in ("f16", "bf16", "f32"):
        out += prep.specs_for(arch, dt)
        if vendor_of(arch) == "nvidia" and "groups" in prep.spec_for.__code__.co_varnames:   # since session 59
            out.append(prep.spec_for(arch, dt, groups=True))
    return out


def stats(spec, cache=None) -> dict:
    """Registers, spill bytes, fused multiply-adds (``fma``) and, on NVIDIA, the innermost loops of
    100+ instructions of ``spec`` (a kernels.prep spec), compiled into ``cache`` (default: escha_jit's)."""
    entry = compile_spec(spec, prep.render_extra(spec), cache=cache)
    res = next(iter(entry.code.resources.values()))
    row = dict(registers=res["registers"], spill_bytes=res["spill_bytes"])
    if vendor_of(spec.arch) == "nvidia":
        sass = disassemble(entry.code.binary)
        row["loops"] = [dict(instructions=lp["instructions"], SHFL=lp["opcodes"].get("SHFL.BFLY", 0),
                             FFMA=lp["opcodes"].get("FFMA", 0))
                        for lp in innermost_loops(sass, min_instructions=100)]
        row["fma"] = sum(len(re.findall(rf"\b{f}\b", sass)) for f in FMA["nvidia"])
    else:
        from escha_jit.toolchain.amd_elf import disassemble as amd_disassemble
        isa = amd_disassemble(entry.code.binary, spec.arch)
        row["fma"] = sum(len(re.findall(rf"\b{f}\b", isa)) for f in FMA["amd"])
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="sm_90,gfx1201")
    ap.add_argument("--compare", default="", help="an earlier run's JSON: print what changed")
    ap.add_argument("--out", default="prep_sass.json")
    args = ap.parse_args(argv)
    before = json.load(open(args.compare))["kernels"] if args.compare else {}
    rows = {}
    for arch in args.archs.split(","):
        for s in specs(arch):
            rows[str(s)] = r = stats(s)
            loops = " ".join(f"[{lp['instructions']} instr, {lp['SHFL']} shfl, {lp['FFMA']} ffma]"
                             for lp in r.get("loops", []))
            print(f"{str(s):<52} {r['registers']:>4} regs {r['spill_bytes']:>3} spill {r['fma']:>4} fma  {loops}",
                  flush=True)
            if str(s) in before and before[str(s)] != r:
                print(f"  changed: was {before[str(s)]}")
    with open(args.out, "w") as f:
        json.dump(dict(kernels=rows), f, indent=1)


if __name__ == "__main__":
    main()

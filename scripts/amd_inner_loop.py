#!/usr/bin/env python3
"""Count the instructions of the fused kernel's inner loop on AMD gfx12, from the disassembly.

    python scripts/amd_inner_loop.py --K 4 --codebook mcg --M 1            # compile + count
    python scripts/amd_inner_loop.py --K 4 --codebook mul1 --M 1 --route shuffle
    python scripts/amd_inner_loop.py --hsaco k.hsaco --weights-per-lane 128  # a code object
    python scripts/amd_inner_loop.py ... --json out.json --listing

The inner loop is found structurally: every backward branch (s_branch / s_cbranch_* whose target
lies before it) closes a loop [target, branch]; the inner loop is the smallest such range that
contains v_wmma instructions (fused.h's main loop: wait, copy the next stage, decode RB x TPW
tiles, multiply). Everything in the range is counted, conditional parts included (the stage copy
runs on all but the last STAGES-1 iterations).

Classes (RDNA4 ISA): VALU (v_*; a v_dual_* VOPD pair is ONE issue of two ops), WMMA (v_wmma_*),
SALU (s_* computation), SMEM (s_load_*/s_buffer_load_*), LDS (ds_*), VMEM (global_/buffer_/flat_/
scratch_), WAIT (s_wait_*/s_waitcnt*/s_delay_alu/s_nop/s_barrier*/scheduling hints) and BRANCH.
Per-weight numbers are per lane: instructions / (8 weights per lane per tile x tiles per iteration),
the same convention as the NVIDIA SASS counts (one thread's instructions per decoded weight).

Needs the clang-22 route (scripts/setup_amd_toolchain.sh) or any llvm-objdump for --hsaco.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

LINE = re.compile(r"^\s+([a-z_0-9]+)(.*?)\s*//\s*([0-9A-Fa-f]+):")
TARGET = re.compile(r"<[^>+]+\+0x([0-9a-f]+)>")
FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:")
WAIT_PREFIXES = ("s_wait", "s_delay_alu", "s_nop", "s_barrier", "s_clause", "s_setprio", "s_sleep",
                 "s_sched", "s_singleuse", "s_set_inst_prefetch")
VMEM_PREFIXES = ("global_", "buffer_", "flat_", "scratch_")


def classify(mn: str) -> str:
    if mn.startswith("v_wmma") or mn.startswith("v_swmmac"):
        return "WMMA"
    if mn.startswith("v_"):
        return "VALU"
    if mn.startswith("ds_"):
        return "LDS"
    if mn.startswith(VMEM_PREFIXES):
        return "VMEM"
    if mn.startswith("s_load") or mn.startswith("s_buffer_load"):
        return "SMEM"
    if mn.startswith("s_branch") or mn.startswith("s_cbranch") or mn in ("s_setpc_b64", "s_endpgm"):
        return "BRANCH"
    if mn.startswith(WAIT_PREFIXES):
        return "WAIT"
    if mn.startswith("s_"):
        return "SALU"
    return "OTHER"


def parse(asm: str, kernel: Optional[str] = None) -> list[dict]:
    """[{addr, mnemonic, operands, target}] of one function (the first, or `kernel`)."""
    out: list[dict] = []
    base = None
    for line in asm.splitlines():
        m = FUNC.match(line)
        if m:
            if base is not None and out:
                break                      # next function: done
            if kernel is None or m.group(2) == kernel:
                base = int(m.group(1), 16)
            continue
        if base is None:
            continue
        m = LINE.match(line)
        if not m:
            continue
        mn, ops, addr = m.group(1), m.group(2).strip(), int(m.group(3), 16)
        if mn == "s_code_end":          # padding after the last s_endpgm
            continue
        t = TARGET.search(line)
        out.append({"addr": addr, "mnemonic": mn, "operands": ops,
                    "target": base + int(t.group(1), 16) if t and classify(mn) == "BRANCH" else None})
    return out


def inner_loop(insns: list[dict]) -> tuple[int, int]:
    """Index range [lo, hi] (inclusive) of the smallest loop that contains a v_wmma. A loop is
    [header, last backward branch to that header] (the compiler may close one loop with several
    back edges, e.g. after rotating the next stage's copy to the bottom of the body)."""
    idx = {x["addr"]: i for i, x in enumerate(insns)}
    ends: dict[int, int] = {}
    for i, x in enumerate(insns):
        t = x["target"]
        if t is not None and t <= x["addr"] and t in idx:
            ends[idx[t]] = max(ends.get(idx[t], i), i)
    best = None
    for lo, hi in ends.items():
        if not any(insns[j]["mnemonic"].startswith(("v_wmma", "v_dot4_i32_iu8")) for j in range(lo, hi + 1)):
            continue
        if best is None or hi - lo < best[1] - best[0]:
            best = (lo, hi)
    if best is None:
        raise ValueError("no loop containing v_wmma (or the int8 dot route's v_dot4_i32_iu8) found")
    return best


def count(insns: list[dict], lo: int, hi: int) -> dict:
    cls = collections.Counter()
    mns = collections.Counter()
    vopd = 0
    for x in insns[lo:hi + 1]:
        c = classify(x["mnemonic"])
        cls[c] += 1
        mns[x["mnemonic"]] += 1
        if x["mnemonic"].startswith("v_dual_"):
            vopd += 1
    return {"classes": dict(cls), "mnemonics": dict(mns.most_common()), "vopd_pairs": vopd,
            "total": hi - lo + 1}


def analyse(binary: bytes, arch: str, weights_per_lane: int, kernel: Optional[str] = None,
            whole: bool = False) -> dict:
    """Counts of the inner loop (or, with whole=True, of every instruction of the kernel: for the
    loop-free reconstruct / hadamard kernels, where each wave handles one tile / one 128-block)."""
    from escha_jit.toolchain.amd_elf import disassemble, inspect_hsaco
    asm = disassemble(binary, arch)
    insns = parse(asm, kernel)
    lo, hi = (0, len(insns) - 1) if whole else inner_loop(insns)
    c = count(insns, lo, hi)
    per_w = {k: v / weights_per_lane for k, v in c["classes"].items()}
    issue = sum(v for k, v in c["classes"].items() if k in ("VALU", "WMMA", "SALU", "LDS", "VMEM", "SMEM", "BRANCH"))
    info = inspect_hsaco(binary)
    meta = next(iter(info["kernels"].values())) if kernel is None else info["kernels"][kernel]
    return {"loop": [insns[lo]["addr"], insns[hi]["addr"]], "counts": c, "weights_per_lane": weights_per_lane,
            "per_weight": per_w, "issued_per_weight": issue / weights_per_lane,
            "valu_ops_per_weight": (c["classes"].get("VALU", 0) + c["vopd_pairs"]) / weights_per_lane,
            "vgpr_count": meta.get("vgpr_count"), "sgpr_count": meta.get("sgpr_count"),
            "lds_static": meta.get("group_segment_fixed_size"), "scratch": meta.get("private_segment_fixed_size"),
            "wavefront": meta.get("wavefront_size"), "listing": [f"{x['addr']:x}: {x['mnemonic']} {x['operands']}"
                                                                 for x in insns[lo:hi + 1]]}


def compile_simple(op: str, K: float, codebook: str, dtype: str, arch: str) -> tuple[bytes, int, str]:
    """reconstruct (one 16x16 tile per wave: 8 weights per lane) or hadamard (one 128-block per
    wave: 4 elements per lane)."""
    from escha_jit.kernels import hadamard, reconstruct
    from escha_jit.render import include_dir, render
    from escha_jit.toolchain.clang_amd import ClangAMDToolchain
    if op == "reconstruct":
        spec, extra, per_lane = reconstruct.spec_for(arch, K, codebook), reconstruct.render_extra(None), 8
    else:
        spec = hadamard.spec_for(arch, dtype, dtype)
        extra, per_lane = hadamard.render_extra(spec), 4
    co = ClangAMDToolchain().compile(render(spec, extra), arch, ["-O3"], name=spec.kernel_name() + ".hip",
                                     include_dirs=[include_dir()])
    return co.binary, per_lane, str(spec)


def compile_fused(K: float, codebook: str, M: int, dtype: str, route: str, arch: str,
                  include: tuple = (), defines: tuple = (), act_quant=None) -> tuple[bytes, int, object]:
    from escha_jit.kernels import fused
    from escha_jit.render import include_dir, render
    from escha_jit.toolchain.clang_amd import ClangAMDToolchain
    cfg = fused.default_config_i8(M, "amd") if act_quant == "int8" else fused.default_config(M, "amd")
    spec = fused.spec_for(arch, K, codebook, dtype, dtype, cfg, act_quant)
    src = render(spec, fused.render_extra(spec))
    opts = ["-O3"] + (["-DESCHA_WMMA_B_ROUTE=1"] if route == "shuffle" else []) + [f"-D{d}" for d in defines]
    co = ClangAMDToolchain().compile(src, arch, opts, name=spec.kernel_name() + ".hip",
                                     include_dirs=[*include, include_dir()])
    tiles = cfg.rows_per_stage * (8 // cfg.warps)
    return co.binary, 8 * tiles, cfg


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hsaco", help="count this code object instead of compiling")
    ap.add_argument("--weights-per-lane", type=int, help="with --hsaco: weights one lane decodes per iteration")
    ap.add_argument("--kernel", help="with --hsaco: kernel symbol (default: the first)")
    ap.add_argument("--op", choices=("fused", "reconstruct", "hadamard"), default="fused",
                    help="reconstruct / hadamard: whole kernel (no loop), per tile / per 128-block")
    ap.add_argument("--K", type=float, default=4.0)
    ap.add_argument("--codebook", default="mcg")
    ap.add_argument("--M", type=int, default=1)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--route", choices=("direct", "shuffle"), default="direct")
    ap.add_argument("--act-quant", choices=("int8",), help="the opt-in int8-activation kernel (mul1)")
    ap.add_argument("--arch", default="gfx1201")
    ap.add_argument("-I", dest="include", action="append", default=[],
                    help="extra include dir searched first (e.g. a modified escha/fused.h to evaluate)")
    ap.add_argument("-D", dest="defines", action="append", default=[], help="extra macro, e.g. ESCHA_AMD_MUL24=1")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--listing", action="store_true", help="print the loop's instructions")
    a = ap.parse_args(argv)
    if a.hsaco:
        if not a.weights_per_lane:
            ap.error("--hsaco needs --weights-per-lane")
        with open(a.hsaco, "rb") as f:
            binary = f.read()
        wpl, what = a.weights_per_lane, a.hsaco
    elif a.op != "fused":
        binary, wpl, what = compile_simple(a.op, a.K, a.codebook, a.dtype, a.arch)
    else:
        binary, wpl, cfg = compile_fused(a.K, a.codebook, a.M, a.dtype, a.route, a.arch, tuple(a.include),
                                         tuple(a.defines), a.act_quant)
        what = (f"fused{'_i8' if a.act_quant else ''} K={a.K:g} {a.codebook} M={a.M} {a.dtype} route={a.route} {cfg}"
                + (f" -I{a.include} -D{a.defines}" if a.include or a.defines else ""))
    r = analyse(binary, a.arch, wpl, a.kernel, whole=a.op != "fused")
    r["what"] = what
    cls = r["counts"]["classes"]
    print(what)
    print(f"  {'inner loop' if a.op == 'fused' else 'whole kernel'} 0x{r['loop'][0]:x}..0x{r['loop'][1]:x}: "
          f"{r['counts']['total']} instructions, {wpl} {'elements' if a.op == 'hadamard' else 'weights'} per lane; VGPRs {r['vgpr_count']}, SGPRs {r['sgpr_count']}, "
          f"scratch {r['scratch']}, wave{r['wavefront']}")
    print("  " + "  ".join(f"{k} {cls.get(k, 0)} ({cls.get(k, 0) / wpl:.2f}/w)"
                           for k in ("VALU", "WMMA", "SALU", "SMEM", "LDS", "VMEM", "WAIT", "BRANCH")))
    print(f"  VOPD pairs {r['counts']['vopd_pairs']}; VALU ops/weight {r['valu_ops_per_weight']:.2f}; "
          f"issued (non-wait) instructions/weight {r['issued_per_weight']:.2f}")
    top = list(r["counts"]["mnemonics"].items())[:24]
    print("  " + ", ".join(f"{k} {v}" for k, v in top))
    if a.listing:
        print("\n".join("    " + s for s in r["listing"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

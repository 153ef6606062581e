"""Registers, spills and the main loop of every kernel a tuning table dispatches, from the SASS
(no GPU: NVRTC + cuobjdump, the ``cuda`` and ``sass`` extras), and what changed against an earlier
run of this script.

An edit anywhere in a fused kernel can move ptxas's allocation of all of it: in session 20 an
epilogue change took one K2 mul1 kernel from 114 to 135 registers (2 blocks per SM became 1, that
shape's call 1.27x slower) and added 17 instructions to another's main loop (benchmarks/RESULTS.md).
Run this on both trees before spending GPU time on an A/B:

    python benchmarks/sass_stats.py --out before.json            # on the old tree
    python benchmarks/sass_stats.py --compare before.json        # on the new one

Per kernel: registers, spill bytes, blocks per SM that its registers allow (65536 per SM, per-thread
counts rounded up to 8), and the innermost loop holding a matrix / dot-unit instruction (the main
loop: instructions per step and per decoded weight, commonest opcodes). Writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.table import TuningTable, parse_key, shipped_table_path  # noqa: E402
from escha_jit.cache import KernelCache  # noqa: E402
from escha_jit.jit import compile_spec  # noqa: E402
from escha_jit.kernels import fused  # noqa: E402
from escha_jit.toolchain.sass import disassemble, find_cuobjdump, main_loop  # noqa: E402

SM_REGISTERS = 65536


def blocks_by_registers(registers: int, threads: int) -> int:
    """Blocks of ``threads`` threads one SM's register file holds at ``registers`` per thread."""
    return SM_REGISTERS // (-(-registers // 8) * 8 * threads)


def dispatched_specs(table: TuningTable, arch: str, shapes: set) -> dict:
    """Spec name -> (spec, the table keys that dispatch it): each entry's config as its M bucket
    runs it (M <= 8 on NVIDIA: the swapped route, kernels.fused.swap_route)."""
    out: dict = {}
    for key, e in sorted(table.entries.items()):
        k = parse_key(key)
        if k.op != "fused" or (shapes and f"{k.IC}x{k.OC}" not in shapes):
            continue
        cfg = fused.swap_route(e.cfg, "nvidia", k.codebook, k.M)
        spec = fused.spec_for(arch, k.K, k.codebook, k.dtype, k.dtype, cfg)
        out.setdefault(str(spec), (spec, []))[1].append(key)
    return out


def instructions_per_weight(loop_instructions: int, params: dict) -> float:
    """Lane instructions per decoded weight of a main-loop step: a wave's step covers
    rows_per_stage tile rows x (8 / waves across the tile columns) tiles of 256 weights, 32 lanes
    issuing each instruction (16 waves: two K slices of 8 waves, each wave one tile column)."""
    tiles = params["rows_per_stage"] * (8 // min(params["warps"], 8))
    return loop_instructions * 32 / (256 * tiles)


def stats(spec, cache: KernelCache, tool: str) -> dict:
    entry = compile_spec(spec, fused.render_extra(spec), cache=cache)
    res = entry.code.resources.get(spec.kernel_name(), {})
    regs = res.get("registers") or 0
    loop = main_loop(disassemble(entry.code.binary, tool)) or {}
    return dict(registers=regs, spill_bytes=res.get("spill_bytes") or 0,
                blocks_by_registers=blocks_by_registers(regs, 32 * spec.params["warps"]) if regs else None,
                loop_instructions=loop.get("instructions"),
                instructions_per_weight=(instructions_per_weight(loop["instructions"], spec.params)
                                         if loop else None),
                loop_opcodes=loop.get("opcodes", {}))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--table", default="", help="tuning table (default: the shipped one of --arch)")
    ap.add_argument("--shapes", default="", help="ICxOC list: only the entries of these shapes")
    ap.add_argument("--cache-dir", default=None, help="kernel cache (default: escha_jit's)")
    ap.add_argument("--compare", default="", help="an earlier run's JSON: print what changed")
    ap.add_argument("--out", default="sass_stats.json")
    args = ap.parse_args(argv)
    tool = find_cuobjdump()
    if not tool:
        sys.exit("cuobjdump not found: pip install 'escha_jit[sass]'")
    table = TuningTable.load(args.table or shipped_table_path(args.arch))
    specs = dispatched_specs(table, args.arch, set(filter(None, args.shapes.split(","))))
    old = {}
    if args.compare:
        with open(args.compare) as f:
            old = json.load(f)["kernels"]
    cache = KernelCache(args.cache_dir)
    rows = {}
    moved = fewer_blocks = 0
    print(f"{'kernel':<96} {'regs':>4} {'spill':>5} {'blk/SM':>6} {'loop':>5} {'i/w':>5}  was")
    for name, (spec, keys) in specs.items():
        r = stats(spec, cache, tool)
        r["table_keys"] = keys
        rows[name] = r
        was = old.get(name)
        note = "  (new)" if old and not was else ""
        if was and (was["registers"], was["loop_instructions"]) != (r["registers"], r["loop_instructions"]):
            note = f"  {was['registers']} regs, loop {was['loop_instructions']}"
            moved += 1
            fewer_blocks += (r["blocks_by_registers"] or 0) < (was["blocks_by_registers"] or 0)
        print(f"{name:<96} {r['registers']:>4} {r['spill_bytes']:>5} {r['blocks_by_registers'] or '-':>6} "
              f"{r['loop_instructions'] or '-':>5} {r['instructions_per_weight'] or 0:>5.2f}{note}", flush=True)
    if old:
        print(f"\n{moved} of {len(rows)} kernels changed registers or main loop; "
              f"{fewer_blocks} fit fewer blocks per SM by registers")
    with open(args.out, "w") as f:
        json.dump(dict(arch=args.arch, kernels=rows), f, indent=1)


if __name__ == "__main__":
    main()

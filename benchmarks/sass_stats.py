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
loop: instructions per step and per decoded weight, the registers it names (``lregs``: well below
``regs``, another part of the kernel set its register count - session 39 found the split-K
finishing block doing so in most kernels), commonest opcodes, and SM cycles per trellis tile by
issue slots and by pipe - the busiest is the loop's bound before the matrix unit's own time, see
pipe_cycles). Writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.table import TuningTable, entry_key, parse_key, shipped_table_path  # noqa: E402
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


def tiles_per_step(params: dict) -> int:
    """Trellis tiles a wave decodes in one main-loop step: rows_per_stage tile rows x (8 / waves
    across the tile columns) (16 waves: two K slices of 8 waves, each wave one tile column)."""
    return params["rows_per_stage"] * (8 // min(params["warps"], 8))


def instructions_per_weight(loop_instructions: int, params: dict) -> float:
    """Lane instructions per decoded weight of a main-loop step (32 lanes issue each instruction)."""
    return loop_instructions * 32 / (256 * tiles_per_step(params))


# sm_90 lanes per SM and cycle (CUDA C++ Programming Guide, arithmetic instruction throughput, compute
# capability 9.0): 32-bit integer add, shift, logic, compare and multiply(-add) 64 (half the 128 of
# the four schedulers' issue), fp32 and packed fp16 arithmetic 128. The integer ops split over two
# pipes: IMAD / IDP on the FMA pipe's heavy half, the rest on the ALU pipe. Uniform-datapath (U*),
# control and memory instructions cost an issue slot here; shared-memory loads their bytes at 128
# per cycle.
ALU_OPS = {"LOP3", "SHF", "PRMT", "ISETP", "IADD3", "SEL", "LEA", "MOV", "VIADD", "FSEL", "IMNMX", "FMNMX",
           "FSETP", "SGXT", "BMSK", "P2R", "R2P", "PLOP3", "IABS", "FLO", "POPC"}
FMA_HEAVY_OPS = {"IMAD", "IMUL", "IDP"}
SMEM_BYTES = {"LDS": 128, "LDS.64": 256, "LDS.128": 512, "LDSM.16.M88.4": 512, "LDSM.16.M88.2": 256, "STS": 128,
              "STS.64": 256, "STS.128": 512}


def pipe_cycles(opcodes: dict, tiles: float) -> dict:
    """SM cycles per trellis tile (256 weights) of a main-loop step of ``tiles`` tiles (one wave's step,
    all four schedulers busy with such steps): issue (one instruction per scheduler and cycle), the
    ALU and FMA-heavy pipes (half rate; IDP counts there, as the decode's byte sums), shared memory;
    ``bound`` is the largest of them, ``unit`` the matrix-unit instructions (HMMA / IMMA) per tile
    (their time comes on top: benchmarks/RESULTS.md session 21 measured 1.9-2.7 SM cycles per
    HMMA.16816 of the swapped route at M = 1)."""
    c = dict(issue=0.0, alu=0.0, fma_heavy=0.0, smem=0.0, unit=0.0)
    for op, n in opcodes.items():
        base = op.split(".")[0]
        c["issue"] += n / 4
        if base in ALU_OPS:
            c["alu"] += 2 * n / 4
        elif base in FMA_HEAVY_OPS:
            c["fma_heavy"] += (4 if op.startswith("IMAD.WIDE") else 2) * n / 4
        elif base in ("HMMA", "IMMA"):
            c["unit"] += n
        c["smem"] += SMEM_BYTES.get(op, 0) * n / 128
    out = {k: v / tiles for k, v in c.items()}
    out["bound"] = max(("issue", "alu", "fma_heavy", "smem"), key=lambda k: out[k])
    return out


SMS, SM_MHZ = 132, 1780        # H200: SMs, and the SM clock under this load (RESULTS.md session 5)


def measured_vs_model(rows: dict, bench_rows: list[dict], shape: str) -> list[dict]:
    """Per decode cell of ``shape`` in a bench_linear.py JSON whose table entry dispatched one of
    ``rows``' kernels: the SM cycles per trellis tile it took (its time less the fitted floor of its
    series, decode_model.py, spread over the H200's SMs at SM_MHZ) against the pipe model, and
    the rest per matrix-unit instruction (what the unit costs on top of the busiest pipe)."""
    from benchmarks.decode_model import fit_series
    floors = {(m["codebook"], m["K"], m["M"], m["dtype"]): m["floor_us"] for m in fit_series(bench_rows)}
    by_key = {k: r for r in rows.values() for k in r["table_keys"]}
    IC, OC = (int(v) for v in shape.split("x"))
    out = []
    for b in bench_rows:
        if b["codebook"] == "bf16" or (b["IC"], b["OC"]) != (IC, OC):
            continue
        r = by_key.get(entry_key("fused", b["K"], b["codebook"], IC, OC, b["dtype"], b["M"]))
        if r is None or not r["pipes"]:
            continue
        pc = r["pipes"]
        floor = floors[(b["codebook"], float(b["K"]), b["M"], b["dtype"])]
        cycles = 256 * SM_MHZ / (IC * OC / (b["us"] - floor) / SMS)
        out.append(dict(K=b["K"], codebook=b["codebook"], M=b["M"], dtype=b["dtype"], measured=cycles,
                        bound=pc["bound"], bound_cycles=pc[pc["bound"]], unit=pc["unit"],
                        rest_per_unit=(cycles - pc[pc["bound"]]) / pc["unit"] if pc["unit"] else None))
    return out


def stats(spec, cache: KernelCache, tool: str) -> dict:
    entry = compile_spec(spec, fused.render_extra(spec), cache=cache)
    res = entry.code.resources.get(spec.kernel_name(), {})
    regs = res.get("registers") or 0
    loop = main_loop(disassemble(entry.code.binary, tool)) or {}
    return dict(registers=regs, spill_bytes=res.get("spill_bytes") or 0,
                blocks_by_registers=blocks_by_registers(regs, 32 * spec.params["warps"]) if regs else None,
                loop_instructions=loop.get("instructions"), loop_registers=loop.get("registers"),
                instructions_per_weight=(instructions_per_weight(loop["instructions"], spec.params)
                                         if loop else None),
                pipes=pipe_cycles(loop["opcodes"], tiles_per_step(spec.params)) if loop else None,
                loop_opcodes=loop.get("opcodes", {}))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--table", default="", help="tuning table (default: the shipped one of --arch)")
    ap.add_argument("--shapes", default="", help="ICxOC list: only the entries of these shapes")
    ap.add_argument("--cache-dir", default=None, help="kernel cache (default: escha_jit's)")
    ap.add_argument("--compare", default="", help="an earlier run's JSON: print what changed")
    ap.add_argument("--out", default="sass_stats.json")
    ap.add_argument("--measured", default="", help="a bench_linear.py decode JSON: its cells of --measured-shape "
                    "against the pipe model")
    ap.add_argument("--measured-shape", default="8192x28672", help="ICxOC whose cells --measured compares "
                    "(a large one: its time is mostly the main loop)")
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
    print(f"{'kernel':<96} {'regs':>4} {'spill':>5} {'blk/SM':>6} {'loop':>5} {'lregs':>5} {'i/w':>5} "
          f"{'cyc/tile':>8} {'bound':>9} {'unit':>4}  was")
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
        pc = r["pipes"] or dict(bound="-", unit=0)
        cyc = pc[pc["bound"]] if r["pipes"] else 0
        print(f"{name:<96} {r['registers']:>4} {r['spill_bytes']:>5} {r['blocks_by_registers'] or '-':>6} "
              f"{r['loop_instructions'] or '-':>5} {r['loop_registers'] or '-':>5} "
              f"{r['instructions_per_weight'] or 0:>5.2f} {cyc:>8.2f} "
              f"{pc['bound']:>9} {pc['unit']:>4g}{note}", flush=True)
    if old:
        print(f"\n{moved} of {len(rows)} kernels changed registers or main loop; "
              f"{fewer_blocks} fit fewer blocks per SM by registers")
    out = dict(arch=args.arch, kernels=rows)
    if args.measured:
        with open(args.measured) as f:
            cells = measured_vs_model(rows, json.load(f)["rows"], args.measured_shape)
        out["measured"] = cells
        print(f"\n{args.measured_shape}: SM cycles per tile, measured ({SMS} SMs at {SM_MHZ} MHz, the series' "
              "fitted floor taken off) against the busiest pipe; the rest per matrix-unit instruction")
        for c in cells:
            print(f"  K{c['K']:g} {c['codebook']:<5} M{c['M']:<3} {c['dtype']:<4} measured {c['measured']:5.1f}  "
                  f"{c['bound']:<9} {c['bound_cycles']:5.1f}  unit {c['unit']:g}  rest per unit "
                  f"{c['rest_per_unit'] if c['rest_per_unit'] is not None else float('nan'):5.2f}")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

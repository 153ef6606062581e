"""A/B of the dispatched fused configuration against variants of it, per problem: each variant is
the tuned (config, launch) with some fields replaced, timed interleaved with it (ROUNDS rounds,
the median of each), fp16 and / or bf16 activations. Prints a table and writes JSON.

    python benchmarks/bench_variants.py --problems 4096x4096:2:mcg:16,4096x4096:3:mul1:16 \\
        --variants "xh=0,swap=0,cluster=2" --out cluster.json
    python benchmarks/bench_variants.py --problems 8192x28672:2:mcg:1 --variants "diag=3" --dtypes f16

A variant is comma-separated FusedConfig fields (``splits=N`` sets the launch's split count,
``blocks_per_sm=N`` caps the blocks that share an SM: FusedLaunch.blocks_per_sm; a cap that leaves
the dispatched kernel's occupancy as it is gets skipped, it would time the same launch again);
several variants are separated by ';'. ``--adopt TABLE`` writes the shipped table of the GPU's arch
with every problem's entry replaced by its fastest variant where that is at least ``--min-gain``
faster and keeps to registers (medians of the interleaved rounds; the configuration it replaced
becomes its runner-up). Both files are rewritten after every problem, so a run cut short keeps what
it measured. ``diag=3`` times the kernel without its x prologue's work (include/escha/fused.h
ESCHA_FUSED_DIAG, timing studies only). Timing: a CUDA graph over distinct weight copies
(escha_jit.autotune.measure.time_chain, the tuner's timer).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.bench_linear import run_meta  # noqa: E402
from escha_jit.autotune.measure import Problem, copies_for, random_weights, time_chain  # noqa: E402
from escha_jit.autotune.table import Entry, TuningTable, entry_key, shipped_table_path  # noqa: E402
from escha_jit.ops.common import arch_of  # noqa: E402
from escha_jit.kernels.fused import FusedLaunch  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.trellis import tile_words  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
log = logging.getLogger("bench_variants")


def parse_variant(text: str) -> dict:
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        if not value:
            raise ValueError(f"variant item {item!r}: expected field=value")
        out[name.strip()] = int(value)
    return out


def apply(cfg, launch, over: dict):
    over = dict(over)
    splits = over.pop("splits", launch.splits)
    blocks = over.pop("blocks_per_sm", launch.blocks_per_sm)
    return dataclasses.replace(cfg, **over), FusedLaunch(splits, blocks)


def blocks_per_sm(plan) -> int:
    """The blocks of ``plan``'s launch one SM holds (the driver's count at its shared memory)."""
    return plan.kernel.max_active_blocks(32 * plan.cfg.warps, plan.smem)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", required=True, help="IC x OC : K : codebook : M, comma separated")
    ap.add_argument("--variants", required=True, help="';'-separated variants of 'field=value,...'")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="bench_variants.json")
    ap.add_argument("--adopt", default="", metavar="TABLE_OUT",
                    help="write the shipped table with each entry replaced by its fastest variant where faster")
    ap.add_argument("--min-gain", type=float, default=0.03, help="--adopt: the least time saved, as a fraction")
    args = ap.parse_args(argv)
    variants = {v.strip(): parse_variant(v) for v in args.variants.split(";") if v.strip()}
    dev = torch.device("cuda")
    torch.manual_seed(0)
    rows, adopted = [], {}
    meta = run_meta()
    table = TuningTable.load(shipped_table_path(arch_of(dev))) if args.adopt else None
    for spec in args.problems.split(","):
        shape, K, cb, M = spec.split(":")
        IC, OC = (int(s) for s in shape.split("x"))
        K, M = float(K), int(M)
        ws = random_weights(Problem(IC, OC, K, cb, M), copies_for(IC * OC // 256 * tile_words(K) * 2), dev)
        for dn in args.dtypes.split(","):
            x = torch.randn(M, IC, device=dev, dtype=DTYPES[dn])
            out = torch.empty(M, OC, device=dev, dtype=DTYPES[dn])
            plan = F.plan_for(dev, K, cb, IC, OC, dn, dn, M)
            runs = {"tuned": (plan.cfg, plan.launch)}
            tuned_blocks = blocks_per_sm(plan)
            skipped = {}
            for name, over in variants.items():
                cfg, launch = apply(plan.cfg, plan.launch, over)
                try:                     # a variant this problem's route cannot take is reported, not fatal
                    vplan = F.plan_for(dev, K, cb, IC, OC, dn, dn, M, cfg, launch)
                    if "blocks_per_sm" in over and cfg == plan.cfg and launch.splits == plan.launch.splits \
                            and blocks_per_sm(vplan) == tuned_blocks:
                        raise ValueError(f"the kernel holds {tuned_blocks} blocks per SM already")
                    runs[name] = (cfg, launch)
                except ValueError as e:
                    skipped[name] = str(e)
                    log.warning("%s %s: variant %r skipped: %s", spec, dn, name, e)
            times = {name: [] for name in runs}
            for r in range(args.rounds):
                # every other round in reverse order: what runs later in a round can read faster
                # (an A/A of bench_linear runs, benchmarks/RESULTS.md session 46)
                for name, (cfg, launch) in (reversed(runs.items()) if r % 2 else runs.items()):
                    calls = [lambda w=w, c=cfg, la=launch: F.fused_linear(x, w, out=out, cfg=c, launch=la) for w in ws]
                    times[name].append(time_chain(calls, 20) * 1e6)
            us = {name: statistics.median(v) for name, v in times.items()}
            c = plan.cfg
            print(f"{spec:<22} {dn:<4} {plan.source} w{c.warps} r{c.rows_per_stage} s{c.stages} b{c.min_blocks} "
                  f"x{c.xh} c{c.cluster} S{plan.launch.splits} {tuned_blocks}/SM {us['tuned']:7.2f} | " +
                  "  ".join(f"{n}: {us[n]:7.2f} ({us[n] / us['tuned']:.3f})" if n in us else f"{n}: skipped"
                            for n in variants), flush=True)
            rows.append(dict(problem=spec, dtype=dn, source=plan.source, cfg=dataclasses.asdict(c),
                             splits=plan.launch.splits, blocks_per_sm=tuned_blocks, us=us, skipped=skipped,
                             ratio={n: us[n] / us["tuned"] for n in variants if n in us}))
            best = adoptable(us, runs, args.min_gain, arch_of(dev), K, cb, dn) if args.adopt else None
            if best is not None:
                cfg, launch = runs[best]
                # the configuration it replaced is its runner-up: what dispatch takes where this
                # machine's compiler makes the adopted kernel spill (ops.fused.table_choice)
                adopted[entry_key("fused", K, cb, IC, OC, dn, M)] = Entry(cfg, launch, us[best], {
                    "adopted": f"bench_variants {best!r}: {us[best] / us['tuned']:.3f}x the time of the "
                               f"{plan.source} configuration (its runner_up here)",
                    "runner_up": {"config": dataclasses.asdict(plan.cfg), "launch": dataclasses.asdict(plan.launch),
                                  "us": round(us["tuned"], 3)}})
        del ws
        torch.cuda.empty_cache()
        # after every problem: a run cut short (the device's per-call limit) keeps what it measured
        write_results(args, meta, rows, variants, table, adopted)
    if args.adopt:
        print(f"{len(adopted)} of {len(rows)} entries adopted a variant: {args.adopt}")


def adoptable(us: dict, runs: dict, min_gain: float, arch: str, K: float, cb: str, dn: str):
    """The fastest variant at least ``min_gain`` faster than the dispatched configuration whose kernel
    keeps to registers under this machine's compiler (the tuner rejects spilling kernels, and so
    does dispatch: ops.fused.table_choice), or None."""
    for name in sorted(us, key=us.get):
        if name == "tuned" or us[name] > (1 - min_gain) * us["tuned"]:
            return None
        spilled = F.local_memory_bytes(arch, K, cb, dn, dn, runs[name][0])
        if not spilled:
            return name
        log.warning("%s %s: variant %r spills %d bytes: not adopted", K, cb, name, spilled)
    return None


def write_results(args, meta: dict, rows: list, variants: dict, table, adopted: dict) -> None:
    """The rows so far as JSON (``--out``) and, with ``--adopt``, ``table`` (the shipped one, loaded
    once) with the entries adopted so far."""
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, variants=variants, rows=rows), f, indent=1)
    if args.adopt:
        for key, e in adopted.items():
            # the tuner's time of the heuristic configuration stays with the entry (every shipped entry
            # is held to it: tests/test_autotune.py); where the heuristic itself was replaced, its time here
            old = table.entries.get(key)
            heur = old.extra.get("heuristic_us") if old is not None else None
            e.extra.setdefault("heuristic_us", heur if heur is not None else e.extra["runner_up"]["us"])
        table.entries.update(adopted)
        table.save(args.adopt)


if __name__ == "__main__":
    main()

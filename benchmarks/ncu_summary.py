"""Summaries of scripts/ncu_fused.sh's Nsight Compute CSV exports (runs anywhere, no GPU).

Per profiled kernel: duration, SM clock, issued instructions and instructions per decoded weight
(from the plans file), issue-slot use, warps per scheduler, each pipe's active cycles and the
warp-state samples by stall reason, also split by code region (before / inside / after the innermost loop
that issues the matrix unit: prologue, main loop, epilogue; every other loop outside it on its own, such
as a warp-specialized kernel's producer loop); with ``--hot N`` the N SASS instructions with the most
samples and their main reasons.

    python benchmarks/ncu_summary.py DIR [--hot 20] [--json summary.json]
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import re

DETAILS = ("Duration", "SM Frequency", "Issued Instructions", "Issue Slots Busy", "Active Warps Per Scheduler",
           "Eligible Warps Per Scheduler", "No Eligible", "Registers Per Thread", "DRAM Throughput", "Grid Size")


def read_details(path: str) -> list[dict]:
    kernels: "collections.OrderedDict[str, dict]" = collections.OrderedDict()
    for r in csv.DictReader(open(path)):
        k = kernels.setdefault(r["ID"], {"kernel": r["Kernel Name"], "grid": r["Grid Size"]})
        if r["Metric Name"]:
            k[r["Metric Name"]] = r["Metric Value"]
            k[r["Metric Name"] + " unit"] = r["Metric Unit"]
    return list(kernels.values())


PIPES = ("alu", "fma", "tensor", "shared")      # sm__pipe_<p>_cycles_active, % of peak while the SM is active


def read_pipes(path: str) -> list[dict]:
    """Per kernel (profiling order) the pipes' active cycles, % of peak (the raw page's export)."""
    rows = list(csv.reader(open(path)))
    hdr = rows[0]
    cols = {p: hdr.index(f"sm__pipe_{p}_cycles_active.avg.pct_of_peak_sustained_active") for p in PIPES
            if f"sm__pipe_{p}_cycles_active.avg.pct_of_peak_sustained_active" in hdr}
    return [{p: round(num(r[i]), 1) for p, i in cols.items()} for r in rows[2:]]


def read_source(path: str) -> list[tuple[str, list[dict]]]:
    """[(kernel name, rows of its SASS with per-instruction samples)] in profiling order."""
    out: list[tuple[str, list[dict]]] = []
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith('"Kernel Name"'):
            name = next(csv.reader([lines[i]]))[1]
            j = i + 1
            while j < len(lines) and not lines[j].startswith('"Kernel Name"'):
                j += 1
            out.append((name, list(csv.DictReader(lines[i + 1:j]))))
            i = j
        else:
            i += 1
    return out


def num(s: str) -> float:
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return 0.0


def stall_totals(rows: list[dict]) -> dict[str, int]:
    tot: collections.Counter = collections.Counter()
    for r in rows:
        for k, v in r.items():
            if k and k.startswith("stall_") and "(Not Issued)" not in k:
                tot[k[6:]] += int(num(v))
    return dict(tot.most_common())


_MATRIX_OP = re.compile(r"\b(HMMA|HGMMA|IMMA|IGMMA)\b")    # not HFMA2.MMA (an FMA-pipe move)


def _branch_target(sass: str) -> int | None:
    """The absolute target address of a branch instruction (ncu prints `BRA 0x7f...`), else None."""
    if "BRA" not in sass:
        return None
    t = sass.replace(";", " ").split()[-1]
    return int(t, 16) if t.startswith("0x") else None


# Loops shorter than this outside the main loop are spin waits (an mbarrier's try-wait and its branch
# back), whose samples belong to the code around them; longer ones are reported on their own.
MIN_OTHER_LOOP = 8


def _loops(rows: list[dict], addr: list[int], where: dict) -> list[tuple[int, int]]:
    """Every backward branch's span (first row, branch row), in row indices; not the branches after
    the kernel's last EXIT (the out-of-line retries of spin waits that ptxas places there jump back
    to where they were called from)."""
    exits = [i for i, r in enumerate(rows) if re.search(r"\bEXIT\b", r["Source"])]
    end = exits[-1] if exits else len(rows)
    out = []
    for i, r in enumerate(rows[:end]):
        t = _branch_target(r["Source"])
        if t is not None and t < addr[i] and t in where:
            out.append((where[t], i))
    return out


def regions(rows: list[dict]) -> dict[str, dict]:
    """Samples before, inside and after the innermost backward-branching loop that issues the matrix
    unit (HMMA / HGMMA / IMMA), with every other loop of at least MIN_OTHER_LOOP instructions outside
    it split out as "loop +0x<offset>" (a warp-specialized kernel's producer loop: its samples are not
    the epilogue's): {region: {"share": fraction of the kernel's samples, "instructions": count,
    "stalls": top reasons as fractions of the region's samples}}; {} when there is no such loop."""
    addr = [int(r["Address"], 16) for r in rows]
    where = {a: i for i, a in enumerate(addr)}
    spans = _loops(rows, addr, where)
    best = None
    for lo, i in spans:
        if any(_MATRIX_OP.search(rows[j]["Source"]) for j in range(lo, i + 1)) and (best is None or i - lo < best[1] - best[0]):
            best = (lo, i)
    if best is None:
        return {}
    # the other loops: spans clear of the main loop, overlapping ones merged into their union
    others: list[list[int]] = []
    for lo, hi in sorted(s for s in spans if s[1] < best[0] or s[0] > best[1]):
        if others and lo <= others[-1][1]:
            others[-1][1] = max(others[-1][1], hi)
        else:
            others.append([lo, hi])
    others = [o for o in others if o[1] - o[0] + 1 >= MIN_OTHER_LOOP]
    loop_names = [f"loop +0x{addr[lo] - addr[0]:x}" for lo, _ in others]
    label = ["prologue" if i < best[0] else "main loop" if i <= best[1] else "epilogue" for i in range(len(rows))]
    for (lo, hi), name in zip(others, loop_names):
        label[lo:hi + 1] = [name] * (hi + 1 - lo)
    parts = {name: [r for r, lab in zip(rows, label) if lab == name]
             for name in ["prologue", "main loop", "epilogue"] + loop_names}
    total = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows) or 1.0
    out = {}
    for name, part in parts.items():
        n = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in part)
        st = stall_totals(part)
        out[name] = {"share": round(n / total, 3), "instructions": len(part),
                     "stalls": {k: round(v / (n or 1), 2) for k, v in list(st.items())[:4]}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="folder with ncu_details.csv, ncu_source.csv, ncu_plans.json")
    ap.add_argument("--hot", type=int, default=0, help="list the N instructions with the most samples")
    ap.add_argument("--json", default="", help="write the summary here")
    args = ap.parse_args()
    details = read_details(os.path.join(args.dir, "ncu_details.csv"))
    src_path = os.path.join(args.dir, "ncu_source.csv")
    sources = read_source(src_path) if os.path.exists(src_path) else []
    raw_path = os.path.join(args.dir, "ncu_raw.csv")
    pipes = read_pipes(raw_path) if os.path.exists(raw_path) else []
    plans_path = os.path.join(args.dir, "ncu_plans.json")
    plans = json.load(open(plans_path)) if os.path.exists(plans_path) else []
    it = iter(plans)                       # one fused kernel per plan, in profiling order
    summary = []
    for n, k in enumerate(details):
        plan = next(it, None) if k["kernel"].startswith("escha_fused") else None
        instr = num(k.get("Issued Instructions", 0))
        row = {"kernel": k["kernel"], "problem": plan["problem"] if plan else "", **{d: k.get(d, "") for d in DETAILS}}
        w = plan["weights"] if plan else None
        if w:
            row["lane instructions per weight"] = round(instr * 32 / w, 2)
        if n < len(pipes):
            row["pipe active %"] = pipes[n]
        if n < len(sources) and sources[n][0] == k["kernel"]:
            st = stall_totals(sources[n][1])
            total = sum(st.values()) or 1
            row["stall share"] = {s: round(v / total, 3) for s, v in st.items() if v / total >= 0.01}
            row["regions"] = regions(sources[n][1])
            if args.hot:
                hot = sorted(sources[n][1], key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:args.hot]
                row["hot"] = []
                for r in hot:
                    reasons = {kk[6:]: int(num(v)) for kk, v in r.items()
                               if kk and kk.startswith("stall_") and "(Not Issued)" not in kk and num(v) > 0}
                    top = sorted(reasons.items(), key=lambda t: -t[1])[:3]
                    row["hot"].append(f"{int(num(r['Warp Stall Sampling (All Samples)'])):6d} {r['Source'].strip()[:60]:<60} "
                                      + " ".join(f"{a}:{b}" for a, b in top))
        summary.append(row)
        print(f"== {row['problem'] or '(prep)'}  {k['kernel'][:70]}  grid {k['grid']}")
        print("   " + "; ".join(f"{d} {k.get(d, '')}{k.get(d + ' unit', '')}" for d in DETAILS[:-1]))
        if "lane instructions per weight" in row:
            print(f"   lane instructions per weight {row['lane instructions per weight']}")
        if "pipe active %" in row:
            print("   pipes active (% of peak): " + ", ".join(f"{p} {v}" for p, v in row["pipe active %"].items()))
        if "stall share" in row:
            print("   stalls: " + ", ".join(f"{s} {v:.0%}" for s, v in row["stall share"].items()))
        for name, reg in row.get("regions", {}).items():
            print(f"   {name:<12} {reg['share']:.0%} of samples, {reg['instructions']} instructions: "
                  + ", ".join(f"{s} {v:.0%}" for s, v in reg["stalls"].items()))
        for h in row.get("hot", []):
            print("     " + h)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()

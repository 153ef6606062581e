"""SM clock, board power and per-call time of decode cases, in the benchmark's short bursts and
sustained for seconds (NVIDIA; nvidia-smi samples the card in the background). Prints a table and
writes JSON.

Why: bench_linear.py times each case in ~10-50 ms bursts (20 graph replays). An H200 that runs an
integer-bound kernel for seconds may hold a lower clock than it does in a burst (its power limit),
and a memory-bound GEMV may not; the PERF.md ratios are burst figures. This measures, per case,
the burst time (as bench_linear), the time over `--seconds` of back-to-back replays, the clock /
power / clock-event reasons nvidia-smi reports during the sustained window, and the clock the SMs
ran at by a clock64 probe (cycles counted over event-timed microseconds) inside that window.

    python benchmarks/bench_clocks.py --out clocks.json
    python benchmarks/bench_clocks.py --cases "4096x4096:bf16:1,8192x28672:2:mcg:16" --seconds 2

A case is SHAPE:bf16:M (dense bf16 cuBLAS, as bench_linear's baseline) or SHAPE:K:CODEBOOK:M
(the coded linear, fp16 activations).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_linear import capture_graph, n_copies, random_layers, replay_us, run_meta  # noqa: E402
from escha_jit.ops.linear import linear  # noqa: E402

DEFAULT_CASES = ",".join(f"{s}:{c}:{m}" for s in ("4096x4096", "8192x28672")
                         for c in ("bf16", "2:mcg", "4:mul1") for m in (1, 4, 16))
# nvidia-smi's clock event bits (nvml.h nvmlClocksEventReasons): the ones that slow a busy card
REASONS = {0x1: "idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal",
           0x40: "hw_thermal", 0x80: "hw_power_brake"}
FIELDS = "timestamp,clocks.sm,power.draw,temperature.gpu,{reasons}"
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")   # new name, old name


def parse_case(s: str) -> dict:
    p = s.split(":")
    IC, OC = (int(v) for v in p[0].split("x"))
    if len(p) == 3 and p[1] == "bf16":
        return dict(IC=IC, OC=OC, kind="bf16", M=int(p[2]))
    if len(p) == 4:
        return dict(IC=IC, OC=OC, kind="coded", K=float(p[1]), codebook=p[2], M=int(p[3]))
    raise ValueError(f"case {s!r}: expected SHAPE:bf16:M or SHAPE:K:CODEBOOK:M")


def build_calls(case: dict, dev) -> tuple[list, list]:
    """The case's calls over distinct weights (more bytes than the L2), and what keeps them alive."""
    IC, OC, M = case["IC"], case["OC"], case["M"]
    if case["kind"] == "bf16":
        n = n_copies(2 * IC * OC)
        ws = [torch.randn(IC, OC, device=dev, dtype=torch.bfloat16) for _ in range(n)]
        x = torch.randn(M, IC, device=dev, dtype=torch.bfloat16)
        ys = [torch.empty(M, OC, device=dev, dtype=torch.bfloat16) for _ in range(n)]
        return [lambda w=w, y=y: torch.matmul(x, w, out=y) for w, y in zip(ws, ys)], [ws, x, ys]
    K = case["K"]
    layers = random_layers(IC, OC, K, case["codebook"], n_copies(int(IC * OC * K // 8)), dev)
    x = torch.randn(M, IC, device=dev).half()
    ys = [torch.empty(M, OC, device=dev, dtype=torch.float16) for _ in layers]
    return [lambda w=w, y=y: linear(x, w, out=y) for w, y in zip(layers, ys)], [layers, x, ys]


def sustained(g, n_calls: int, seconds: float, probe_cycles: int) -> dict:
    """Back-to-back replays for `seconds` (host timestamps of the window, s since the epoch), and
    meanwhile, on a side stream, one thread spinning for `probe_cycles` SM clock cycles
    (torch.cuda._sleep, a clock64 loop) timed by events: cycles per microsecond = the clock the SMs
    actually ran at under this load, a second reading next to nvidia-smi's."""
    torch.cuda.synchronize()
    t0 = time.time()
    a = torch.cuda.Event(enable_timing=True)
    a.record()
    side = torch.cuda.Stream()
    p0, p1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps, prev, probing = 0, None, False
    while time.time() - t0 < seconds or (probing and not p1.query()):
        for _ in range(8):
            g.replay()
        reps += 8
        if not probing:                 # once the card is busy: the spin shares an SM with the work
            with torch.cuda.stream(side):
                p0.record()
                torch.cuda._sleep(probe_cycles)
                p1.record()
            probing = True
        done = torch.cuda.Event()
        done.record()
        if prev is not None:
            prev.synchronize()      # at most two batches queued, and the GPU never waits for the host
        prev = done
    b = torch.cuda.Event(enable_timing=True)
    b.record()
    b.synchronize()
    p1.synchronize()
    return dict(t0=t0, t1=time.time(), replays=reps, us=a.elapsed_time(b) * 1e3 / (reps * n_calls),
                probe_mhz=probe_cycles / (p0.elapsed_time(p1) * 1e3))


def start_sampler(path: str, period_ms: int) -> subprocess.Popen:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise SystemExit("bench_clocks: nvidia-smi is not on PATH; it is what samples the clocks")
    for name in REASON_FIELDS:
        fields = FIELDS.format(reasons=name)
        probe = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            break
    else:
        raise SystemExit(f"bench_clocks: nvidia-smi answers none of {REASON_FIELDS}: {probe.stdout}{probe.stderr}")
    f = open(path, "w")
    return subprocess.Popen([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits", f"-lms={period_ms}"],
                            stdout=f, stderr=subprocess.STDOUT)


def read_samples(path: str) -> list[dict]:
    out = []
    for line in open(path):
        p = [v.strip() for v in line.split(",")]
        if len(p) != 5:
            continue
        try:
            t = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append(dict(t=t, sm_mhz=float(p[1]), power_w=float(p[2]), temp_c=float(p[3]),
                            reasons=int(p[4], 16)))
        except ValueError:
            continue
    return out


def window_stats(samples: list[dict], t0: float, t1: float, skip: float) -> dict:
    """Medians over the samples inside [t0 + skip, t1] (the first `skip` seconds: the ramp)."""
    w = [s for s in samples if t0 + skip <= s["t"] <= t1]
    if not w:
        return dict(samples=0)
    bits = 0
    for s in w:
        bits |= s["reasons"]
    return dict(samples=len(w), sm_mhz=statistics.median(s["sm_mhz"] for s in w),
                sm_mhz_min=min(s["sm_mhz"] for s in w), power_w=statistics.median(s["power_w"] for s in w),
                temp_c=max(s["temp_c"] for s in w),
                reasons=[name for bit, name in REASONS.items() if bits & bit])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--seconds", type=float, default=1.5, help="sustained window per case")
    ap.add_argument("--skip", type=float, default=0.3, help="seconds of each window left out of the clock medians")
    ap.add_argument("--sample-ms", type=int, default=20)
    ap.add_argument("--probe-cycles", type=float, default=1.5e9,
                    help="SM cycles the clock probe spins for (~0.75 s at 1980 MHz; keep it under --seconds)")
    ap.add_argument("--out", default="bench_clocks.json")
    args = ap.parse_args(argv)
    cases = [parse_case(c) for c in args.cases.split(",") if c]
    dev = torch.device("cuda")
    torch.manual_seed(0)
    log_path = os.path.join(tempfile.mkdtemp(prefix="bench_clocks_"), "smi.csv")
    proc = start_sampler(log_path, args.sample_ms)
    rows, probe_alone = [], None
    try:
        time.sleep(0.5)                                     # an idle reading before the first case
        p0, p1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        p0.record()
        torch.cuda._sleep(int(args.probe_cycles) // 4)        # the probe alone on the card
        p1.record()
        p1.synchronize()
        probe_alone = int(args.probe_cycles) // 4 / (p0.elapsed_time(p1) * 1e3)
        print(f"clock probe alone: {probe_alone:.0f} MHz", flush=True)
        for case in cases:
            calls, keep = build_calls(case, dev)
            g = capture_graph(calls)
            for _ in range(3):
                g.replay()
            row = dict(case, burst_us=replay_us(g, len(calls)))      # bench_linear's figure
            row.update(sustained(g, len(calls), args.seconds, int(args.probe_cycles)))
            row["burst_after_us"] = replay_us(g, len(calls))    # the burst figure again, on a hot card
            rows.append(row)
            del g, calls, keep
            torch.cuda.empty_cache()
    finally:
        proc.terminate()
        proc.wait()
    samples = read_samples(log_path)
    idle = window_stats(samples, 0.0, rows[0]["t0"] if rows else 0.0, 0.0) if samples else {}
    print(f"{'case':>28} {'burst us':>9} {'sust. us':>9} {'after us':>9} {'MHz':>6} {'min':>6} {'probe':>6} {'W':>6} reasons")
    for r in rows:
        r["clocks"] = window_stats(samples, r["t0"], r["t1"], args.skip)
        c = r["clocks"]
        name = f"{r['IC']}x{r['OC']} " + ("bf16" if r["kind"] == "bf16" else f"K{r['K']:g} {r['codebook']}") + f" M{r['M']}"
        print(f"{name:>28} {r['burst_us']:>9.2f} {r['us']:>9.2f} {r['burst_after_us']:>9.2f} "
              f"{c.get('sm_mhz', float('nan')):>6.0f} {c.get('sm_mhz_min', float('nan')):>6.0f} {r['probe_mhz']:>6.0f} "
              f"{c.get('power_w', float('nan')):>6.0f} {','.join(c.get('reasons', []))}", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), args=vars(args), idle=idle, probe_alone_mhz=probe_alone, rows=rows, samples=samples), f, indent=1)


if __name__ == "__main__":
    main()

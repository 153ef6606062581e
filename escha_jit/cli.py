"""The ``escha-jit`` command line: info, demo (and the JIT commands of later modules)."""
from __future__ import annotations

import argparse
import logging
import platform
import sys
import tempfile
import time
from typing import Callable, Optional, Sequence

from . import __version__, env
from .autotune.table import ROUTE_BUCKETS, check_route_buckets

log = logging.getLogger("escha_jit")


def _gpus() -> list[str]:
    import torch
    out = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            arch = getattr(p, "gcnArchName", None) or f"sm_{p.major}{p.minor}"
            out.append(f"cuda:{i} {p.name} ({arch}, {p.multi_processor_count} SMs/CUs, {p.total_memory >> 30} GiB)")
    return out


def cmd_info(args: argparse.Namespace) -> int:
    import torch
    from .toolchain import describe_toolchains
    print(f"escha_jit   {__version__}")
    print(f"python      {platform.python_version()} ({sys.executable})")
    print(f"torch       {torch.__version__} (cuda {torch.version.cuda}, hip {torch.version.hip})")
    gpus = _gpus()
    print(f"gpus        {', '.join(gpus) if gpus else 'none seen'}")
    for name, desc in describe_toolchains():
        print(f"{name:<11} {desc}")
    from .provenance import git_commit, source_digest
    print(f"sources     digest {source_digest()} (git {git_commit()})")
    print(f"cache dir   {env.cache_dir()}")
    print(f"no-compile  {'on' if env.no_compile() else 'off'} (ESCHA_JIT_NO_COMPILE)")
    try:
        route = env.prefill_route()
    except ValueError as e:
        route = f"INVALID: {e}"
    print(f"prefill     {route} (ESCHA_JIT_PREFILL: calls above 256 rows)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import torch
    from .format import open_checkpoint
    from .nn import EschaLinear
    from .reference import dense_weight
    from .synth import make_checkpoint

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory(prefix="escha-demo-") as d:
        t0 = time.perf_counter()
        make_checkpoint(d, args.kind, num_layers=2, hidden=args.hidden, intermediate=2 * args.hidden, seed=args.seed)
        ckpt = open_checkpoint(d)
        print(f"wrote and validated an {args.kind} checkpoint with {len(ckpt.coded)} coded projections "
              f"in {time.perf_counter() - t0:.2f} s ({d})")
        print(f"{'projection':<34} {'K':>4} {'codebook':>8} {'IC x OC':>11} {'backend':>9} "
              f"{'ms':>8} {'rel err vs fp64':>16}")
        g = torch.Generator().manual_seed(args.seed)
        worst = 0.0
        for prefix in ckpt.coded:
            lin = EschaLinear.from_checkpoint(ckpt, prefix).to(device)
            x = torch.randn(args.batch, lin.in_features, generator=g).to(torch.float16).to(device)
            y = lin(x)                                            # first call: decode / compile
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t = time.perf_counter()
            y = lin(x)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            ms = (time.perf_counter() - t) * 1e3
            w64 = dense_weight(ckpt.layer(prefix))
            ref = x.double().cpu() @ w64
            b = ckpt.layer(prefix).bias
            if b is not None:
                ref = ref + b.double()
            err = float((y.double().cpu() - ref).norm() / ref.norm())
            worst = max(worst, err)
            print(f"{prefix:<34} {lin.K:>4g} {lin.codebook:>8} {lin.in_features:>5}x{lin.out_features:<5} "
                  f"{lin.resolved_backend(x):>9} {ms:>8.2f} {err:>16.2e}")
    ok = worst < 2e-3
    print(f"worst relative error {worst:.2e} ({'ok' if ok else 'TOO LARGE'}: fp16 output rounding gives ~3e-4)")
    return 0 if ok else 1


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="write a small checkpoint, load it and run every projection")
    p.add_argument("--kind", choices=("escha", "exl3"), default="escha")
    p.add_argument("--hidden", type=int, default=256, help="hidden size (multiple of 128)")
    p.add_argument("--batch", type=int, default=4, help="rows of x")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_demo)


def cmd_compile(args: argparse.Namespace) -> int:
    import json
    import tempfile
    from .offline import compile_all, format_table, unchecked
    specs = None
    if args.only:
        from .kernels.registry import shipped_specs
        specs = [(s, e) for s, e in shipped_specs(args.arch, args.all) if args.only in str(s)]
        if not specs:
            raise SystemExit(f"--only {args.only!r}: no {'' if args.all else 'representative '}specialization "
                             f"for {args.arch} has it in its name (e.g. dense, fused, gemm, prep)")
    cache_dir = args.cache_dir
    tmp = None
    if args.fresh:
        tmp = tempfile.TemporaryDirectory(prefix="escha-compile-")
        cache_dir = tmp.name
    done = [0]

    def progress(row):
        done[0] += 1
        if not row.ok:
            log.error("%s: %s", row.spec, row.error or "; ".join(row.problems))
        elif args.verbose:
            log.info("[%d] %s %.2fs", done[0], row.spec, row.seconds)

    t0 = time.perf_counter()
    rows = compile_all(args.arch, full=args.all, cache_dir=cache_dir, jobs=args.jobs, toolchain=args.toolchain,
                       specs=specs, progress=progress)
    wall = time.perf_counter() - t0
    print(format_table(rows))
    bad = [r for r in rows if not r.ok]
    compiled = [r.seconds for r in rows if not r.cached and r.error is None]
    print(f"{len(rows)} specializations for {args.arch}: {len(rows) - len(bad)} ok, {len(bad)} failed; "
          f"wall {wall:.1f} s" + (f", slowest compile {max(compiled):.2f} s, mean {sum(compiled) / len(compiled):.2f} s"
                                  if compiled else ""))
    if (why := unchecked(args.arch)):
        print(why)
        log.warning("%s", why)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.__dict__ for r in rows], f, indent=1)
    if tmp:
        tmp.cleanup()
    return 1 if bad else 0


def _add_compile(sub) -> None:
    p = sub.add_parser("compile", help="compile shipped kernel specializations offline for an arch (no GPU needed)")
    p.add_argument("--arch", required=True, help="target: sm_90, gfx1201, ...")
    p.add_argument("--all", action="store_true", help="every specialization (default: a representative subset)")
    p.add_argument("--cache-dir", default=None, help="write into this cache dir (default: the user cache)")
    p.add_argument("--fresh", action="store_true", help="compile into a temporary cache (times cold compiles)")
    p.add_argument("--only", default="", metavar="TEXT",
                   help="only the specializations whose name contains TEXT, e.g. dense (a kernel change's "
                        "registers and spills under another NVRTC in seconds)")
    p.add_argument("--toolchain", default=None, choices=("nvrtc", "hiprtc", "clang-amdgpu"))
    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel compiler processes (default: CPUs)")
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    p.set_defaults(fn=cmd_compile)


def cmd_prebuild(args: argparse.Namespace) -> int:
    from .offline import format_table
    from .prebuild import prebuild
    dtypes = args.dtypes.split(",")
    rows, table = prebuild(args.checkpoint, args.arch, args.out, dtypes=dtypes, jobs=args.jobs,
                           toolchain=args.toolchain)
    bad = [r for r in rows if not r.ok]
    if args.verbose or bad:
        print(format_table(rows))
    print(f"prebuilt {len(rows) - len(bad)}/{len(rows)} specializations for {args.arch} into {args.out} "
          f"(tuned table: {table}); deploy with ESCHA_JIT_CACHE_DIR={args.out} ESCHA_JIT_NO_COMPILE=1")
    return 1 if bad else 0


def _ints(option: str, text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"escha-jit: {option} {text!r}: expected comma-separated integers") from None


def cmd_tune(args: argparse.Namespace) -> int:
    import torch
    from .autotune.api import tune
    from .autotune.shapes import checkpoint_shapes
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}
    m_buckets = _ints("--m-buckets", args.m_buckets)
    try:                                  # before the checkpoint is read or a GPU touched
        route_buckets = check_route_buckets(_ints("--route-buckets", args.route_buckets), "--route-buckets")
    except ValueError as e:
        raise SystemExit(f"escha-jit: {e}") from None
    rep = tune(None, shapes=checkpoint_shapes(args.checkpoint), m_buckets=m_buckets,
               dtypes=[dt[d] for d in args.dtypes.split(",")], budget_s=args.budget, save=not args.dry_run,
               route_buckets=route_buckets)
    print(rep.summary())
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from .cache import default_cache
    c = default_cache()
    if args.action == "clear":
        print(f"removed {c.clear()} code objects from {c.directory}")
        return 0
    entries = c.entries()
    for e in entries:
        print(f"{e.get('describe', '?'):<80} {e['bytes']:>8} B {'ok' if e['valid'] else 'CORRUPT'}")
    print(f"{len(entries)} code objects in {c.directory}")
    return 0


def _add_jit_commands(sub) -> None:
    p = sub.add_parser("prebuild", help="compile what a checkpoint needs for an arch into a shippable cache dir")
    p.add_argument("checkpoint")
    p.add_argument("--arch", required=True)
    p.add_argument("--out", required=True, help="the cache directory to create")
    p.add_argument("--dtypes", default="f16,bf16", help="activation dtypes to cover")
    p.add_argument("--toolchain", default=None, choices=("nvrtc", "hiprtc", "clang-amdgpu"))
    p.add_argument("-j", "--jobs", type=int, default=None)
    p.set_defaults(fn=cmd_prebuild)
    p = sub.add_parser("tune", help="tune every coded projection of a checkpoint on this GPU")
    p.add_argument("checkpoint")
    p.add_argument("--m-buckets", default="1,2,4,8,16,32,64,128,256",
                   help="M buckets whose fused-kernel configuration is tuned")
    p.add_argument("--route-buckets", default=",".join(map(str, ROUTE_BUCKETS)),
                   help="M buckets where the fused kernel, the coded GEMM (Hopper) and the dense-weight path "
                        "are timed against each other and the fastest recorded ('' to skip)")
    p.add_argument("--dtypes", default="f16")
    p.add_argument("--budget", type=float, default=20.0, help="seconds of search per problem")
    p.add_argument("--dry-run", action="store_true", help="measure but do not write the user table")
    p.set_defaults(fn=cmd_tune)
    p = sub.add_parser("cache", help="list or clear the kernel cache")
    p.add_argument("action", choices=("list", "clear"))
    p.set_defaults(fn=cmd_cache)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="escha-jit", description=__doc__)
    ap.add_argument("--version", action="version", version=f"escha_jit {__version__}")
    ap.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, GPUs, toolchains, cache dir").set_defaults(fn=cmd_info)
    _add_demo(sub)
    _add_compile(sub)
    _add_jit_commands(sub)
    for extra in _EXTRA_COMMANDS:
        extra(sub)
    return ap


_EXTRA_COMMANDS: list[Callable] = []


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else env.log_level(),
                        format="%(levelname)s %(name)s: %(message)s")
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

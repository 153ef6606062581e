"""How often does this host's NVRTC leave ptxas' resource lines out of the compile log? Compiles
the same specializations N times each (fresh programs, no cache) and counts logs without a
resource line for the kernel, with their sizes and the NVRTC version. (The H200 host's NVRTC 13.0
reported no resources for 7 / 11 of 75 specs in two runs of jit_times.py, a different set each
time; CI's and this machine's print them every time.)

    python benchmarks/nvrtc_log_probe.py --n 5 --out probe.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.kernels.registry import shipped_specs  # noqa: E402
from escha_jit.render import include_dir, render  # noqa: E402
from escha_jit.toolchain.base import parse_ptxas_log  # noqa: E402
from escha_jit.toolchain.nvrtc import NVRTCToolchain  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--specs", type=int, default=6, help="how many of the shipped sm_90 specs (small ones first)")
    ap.add_argument("--out", default="nvrtc_log_probe.json")
    a = ap.parse_args(argv)
    tc = NVRTCToolchain()
    specs = [(s, e) for s, e in shipped_specs("sm_90", False) if s.op in ("prep", "rowscale", "hadamard")][:a.specs]
    rows = []
    for s, e in specs:
        src = render(s, e)
        for i in range(a.n):
            co = tc.compile(src, "sm_90", include_dirs=[include_dir()])
            in_log = parse_ptxas_log(co.log).get(s.kernel_name())
            res = co.resources.get(s.kernel_name())        # the log's, else the cubin's (cubin_info)
            rows.append(dict(spec=str(s), attempt=i, log_bytes=len(co.log), log_has_line=bool(in_log),
                             resources=res, log_tail=co.log[-300:] if not in_log else ""))
            print(f"{s} #{i}: log {len(co.log)} bytes, resource line {'yes' if in_log else 'NO'}, "
                  f"resources {res}", flush=True)
    missing = sum(1 for r in rows if not r["log_has_line"])
    unresolved = sum(1 for r in rows if not r["resources"])
    print(f"{tc.version()}: {missing} of {len(rows)} compiles without the kernel's resource line in the log; "
          f"{unresolved} without resources after the cubin fallback")
    with open(a.out, "w") as f:
        json.dump(dict(version=tc.version(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()

"""benchmarks/ncu_summary.py: the split of a kernel's stall samples into prologue / main loop /
epilogue around its innermost matrix-unit loop (Nsight Compute's per-SASS export, no GPU)."""
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "ncu_summary.py")
_spec = importlib.util.spec_from_file_location("ncu_summary", _PATH)
ncu_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_summary)


def _row(addr, sass, samples, **stalls):
    r = {"Address": hex(addr), "Source": sass, "Warp Stall Sampling (All Samples)": str(samples)}
    r.update({f"stall_{k}": str(v) for k, v in stalls.items()})
    r["stall_wait (Not Issued)"] = "999"                       # never counted
    return r


def _kernel():
    return [_row(0x100, "LDG.E R2, [R4.64]", 6, long_sb=6),
            _row(0x110, "HFMA2.MMA R17, -RZ, RZ, 0, 0", 0),     # an FMA-pipe move, not the unit
            _row(0x120, "LDS R8, [R3]", 2, short_sb=2),          # outer loop: 0x120 .. 0x170
            _row(0x130, "HMMA.16816.F32 R8, R12, R14, R8", 5, math=3, selected=2),
            _row(0x140, "@!P0 BRA 0x120", 1, branch_resolving=1),   # innermost unit loop: 0x120 .. 0x140
            _row(0x150, "HMMA.16816.F32 R8, R12, R14, R8", 1, math=1),
            _row(0x160, "@P1 BRA 0x120", 1, wait=1),
            _row(0x170, "BAR.SYNC.DEFER_BLOCKING 0x0", 4, barrier=4),
            _row(0x180, "EXIT", 0)]


def test_regions_split_around_the_innermost_unit_loop():
    reg = ncu_summary.regions(_kernel())
    assert [reg[k]["instructions"] for k in ("prologue", "main loop", "epilogue")] == [2, 3, 4]
    assert reg["prologue"]["share"] == 0.3 and reg["main loop"]["share"] == 0.4 and reg["epilogue"]["share"] == 0.3
    assert reg["prologue"]["stalls"] == {"long_sb": 1.0}
    assert reg["main loop"]["stalls"] == {"math": 0.38, "short_sb": 0.25, "selected": 0.25, "branch_resolving": 0.12}
    assert reg["epilogue"]["stalls"]["barrier"] == 0.67


def test_no_unit_loop_no_regions():
    rows = [r for r in _kernel() if "HMMA." not in r["Source"]]
    assert ncu_summary.regions(rows) == {}

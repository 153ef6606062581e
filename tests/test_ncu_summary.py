"""benchmarks/ncu_summary.py: the split of a kernel's stall samples into prologue / main loop /
epilogue around its innermost matrix-unit loop, and its other loops on their own (Nsight Compute's
per-SASS export, no GPU)."""
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


def test_other_loops_split_out_and_spin_wait_retries_ignored():
    # a warp-specialized kernel: the consumers' unit loop, their epilogue, the producer's loop of 8
    # instructions (its own region, not the epilogue's), a 2-instruction spin wait (the epilogue's),
    # and after the last EXIT the out-of-line retry of a wait that branches back into the producer
    rows = [_row(0x100, "LDC R1, c[0x0][0x28]", 0),
            _row(0x110, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R4", 1, long_sb=1),   # unit loop 0x110 .. 0x130
            _row(0x120, "HGMMA.64x256x16.F32 R24, gdesc[UR12], R24", 2, wait=2),
            _row(0x130, "@P1 BRA 0x110", 5, long_sb=5),
            _row(0x140, "STS [R2], R24", 1, short_sb=1),
            _row(0x150, "SHFL.BFLY PT, R3, R4, 0x1, 0x1f", 1, short_sb=1),           # spin-wait-sized loop
            _row(0x160, "@!P2 BRA 0x150", 2, short_sb=2),
            _row(0x170, "EXIT", 0)]
    rows += [_row(0x180 + 16 * i, "LOP3.LUT R5, R6, R7, R8, 0x96, !PT", 1, selected=1) for i in range(7)]
    rows += [_row(0x1f0, "@P3 BRA 0x180", 1, dispatch=1),                              # producer loop 0x180 .. 0x1f0
             _row(0x200, "EXIT", 0),
             _row(0x210, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R4", 0),
             _row(0x220, "@!P0 BRA 0x210", 0),
             _row(0x230, "BRA 0x190", 0)]
    reg = ncu_summary.regions(rows)
    assert list(reg) == ["prologue", "main loop", "epilogue", "loop +0x80"]
    # the epilogue: its 4 rows, the producer's EXIT and the 3 retry rows after it
    assert [reg[k]["instructions"] for k in reg] == [1, 3, 8, 8]
    assert [reg[k]["share"] for k in reg] == [0.0, 0.4, 0.2, 0.4]
    assert reg["loop +0x80"]["stalls"] == {"selected": 0.88, "dispatch": 0.12}
    assert reg["epilogue"]["stalls"] == {"short_sb": 1.0}

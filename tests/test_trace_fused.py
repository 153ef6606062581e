"""benchmarks/trace_fused.py's reading of in-kernel timestamps (the tracing itself needs a GPU):
the critical path is the last block's time at each point, after the first dependency-wait release."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _trace_fused():
    spec = importlib.util.spec_from_file_location("trace_fused", os.path.join(ROOT, "benchmarks", "trace_fused.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_critical_path_takes_each_points_last_block_and_ignores_stale_slots():
    TF = _trace_fused()
    us = 1000                                   # timestamps are ns
    base = 10_000_000
    # start, dep_wait, a_ready, main_done, written, counter, last_done, smid
    tr = [[base, base + 2 * us, base + 3 * us, base + 9 * us, base + 10 * us, base + 11 * us, 0, 0],
          [base + us, base + 1 * us, base + 4 * us, base + 8 * us, base + 9 * us, base + 12 * us,
           base + 14 * us, 1],
          # not last this call: its finishing slot holds an earlier call's timestamp
          [base + us, base + 2 * us, base + 3 * us, base + 7 * us, base + 8 * us, base + 9 * us, base - 50 * us, 2]]
    cp = TF.critical_path(tr)
    assert cp == pytest.approx({"dep_wait": 1.0, "a_ready": 3.0, "main_done": 8.0, "written": 9.0,
                                "counter": 11.0, "last_done": 13.0})

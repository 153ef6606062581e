"""benchmarks/bench_linear.py's summary: the PERF.md figures of a run, from its rows (no GPU)."""
import importlib.util
import json
import math
import os

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("bench_linear", os.path.join(_ROOT, "benchmarks", "bench_linear.py"))
bench_linear = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_linear)

RUN = os.path.join(_ROOT, "benchmarks", "results", "2026-12-06_h200_bench_decode_s51_r1.json")


def test_perfmd_bf16_table_covers_the_decode_cells():
    table = bench_linear.perfmd_bf16()
    assert set(table) == {(IC, OC, M) for IC, OC in bench_linear.SHAPES for M in (1, 4, 16)}
    assert table[(4096, 4096, 1)] == 13.2 and table[(8192, 28672, 16)] == 109.2
    assert all(10 < us < 120 for us in table.values())


def test_summary_of_a_recorded_run_matches_its_own_and_divides_by_the_fixed_table():
    with open(RUN) as f:
        run = json.load(f)
    rows, table = run["rows"], bench_linear.perfmd_bf16()
    got = bench_linear.summarize(rows, table)
    for k in ("decode_geomean_vs_bf16", "decode_geomean_vs_ref", "decode_min_vs_bf16", "decode_min_vs_ref"):
        assert got[k] == pytest.approx(run["summary"][k], rel=1e-12), k
    coded = [r for r in rows if r["codebook"] != "bf16"]
    assert len(coded) == 144
    logs = [math.log(table[(r["IC"], r["OC"], r["M"])] / r["us"]) for r in coded]
    assert got["decode_geomean_vs_perfmd_bf16"] == pytest.approx(math.exp(sum(logs) / len(logs)), rel=1e-12)
    assert got["decode_min_vs_perfmd_bf16"] == pytest.approx(math.exp(min(logs)), rel=1e-12)
    # that run's dense bf16 was slower than PERF.md's: the fixed figure reads lower than the run's own
    assert got["decode_geomean_vs_perfmd_bf16"] < got["decode_geomean_vs_bf16"]


def test_summary_buckets_and_cells_outside_the_table():
    def row(IC, OC, M, us, act="none", bf16_us=20.0):
        return dict(IC=IC, OC=OC, M=M, us=us, act=act, speedup_bf16=bf16_us / us, speedup_ref=None)
    table = bench_linear.perfmd_bf16()
    rows = [row(4096, 4096, 1, 6.6), row(4096, 4096, 16, 13.2), row(4096, 4096, 4, 5.0, act="int8"),
            row(4096, 4096, 1024, 50.0, bf16_us=40.0)]
    s = bench_linear.summarize(rows, table)
    assert s["decode_geomean_vs_perfmd_bf16"] == pytest.approx(math.sqrt(2.0))   # 13.2 / 6.6 and 13.2 / 13.2
    assert s["decode_min_vs_perfmd_bf16"] == pytest.approx(1.0)
    assert s["int8_decode_geomean_vs_bf16"] == pytest.approx(4.0)                  # kept apart
    assert s["prefill_geomean_vs_bf16"] == pytest.approx(0.8)
    s = bench_linear.summarize(rows + [row(5120, 5120, 1, 10.0)], table)         # a shape PERF.md lacks
    assert "decode_geomean_vs_perfmd_bf16" not in s and s["decode_geomean_vs_bf16"] > 0

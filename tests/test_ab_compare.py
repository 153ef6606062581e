"""benchmarks/ab_compare.py: the per-cell medians and ratios an interleaved A/B reports, for
bench_linear.py's decode cells, bench_gemm_parts.py's coded GEMM calls and bench_dense_weight.py's
weight builds."""
import importlib.util
import json
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "ab_compare.py")
_spec = importlib.util.spec_from_file_location("ab_compare", _PATH)
ab_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab_compare)


def _write(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text(json.dumps({"meta": {}, "rows": rows}))
    return str(p)


def _linear(us1, us16):
    return [dict(IC=4096, OC=4096, K=2.0, codebook="mcg", M=1, dtype="f16", us=us1),
            dict(IC=4096, OC=4096, K=2.0, codebook="mcg", M=16, dtype="f16", us=us16),
            dict(IC=4096, OC=4096, K=16, codebook="bf16", M=1, dtype="bf16", us=99.0)]   # not a coded cell


def _gemm(us):
    return [dict(IC=4096, OC=4096, K=2.0, codebook="mcg", M=1024, gemm_us=us, prep_us=8.0, bf16_us=45.0)]


def test_linear_cells_median_over_rounds(tmp_path, capsys):
    files = [_write(tmp_path, "a1.json", _linear(10.0, 20.0)), _write(tmp_path, "b1.json", _linear(9.0, 22.0)),
             _write(tmp_path, "a2.json", _linear(10.0, 20.0)), _write(tmp_path, "b2.json", _linear(9.0, 22.0))]
    ab_compare.main(files)
    out = capsys.readouterr().out
    assert "B/A M = 1: geomean 0.9000" in out and "B/A M = 16: geomean 1.1000" in out
    assert f"B/A all: geomean {(0.9 * 1.1) ** 0.5:.4f} over 2 cells" in out       # the bf16 row is left out


def test_gemm_parts_rows_compare_whole_calls(tmp_path, capsys):
    files = [_write(tmp_path, "a.json", _gemm(80.0)), _write(tmp_path, "b.json", _gemm(76.0))]
    ab_compare.main(files)
    out = capsys.readouterr().out
    assert "B/A M = 1024: geomean 0.9500" in out and "80.00    76.00  0.950" in out


def test_dense_weight_builds_compare_per_dtype(tmp_path, capsys):
    def rows(us16, us_bf):
        return [dict(IC=4096, OC=14336, K=2.0, codebook="mul1", dtype="f16", us=us16, weights_per_s=1.0, gb_s=1.0),
                dict(IC=4096, OC=14336, K=2.0, codebook="mul1", dtype="bf16", us=us_bf, weights_per_s=1.0, gb_s=1.0)]
    files = [_write(tmp_path, "a.json", rows(80.0, 90.0)), _write(tmp_path, "b.json", rows(60.0, 72.0))]
    ab_compare.main(files)
    out = capsys.readouterr().out
    assert "B/A M = 0: geomean 0.7746" in out and "80.00    60.00  0.750" in out and "90.00    72.00  0.800" in out


def test_wrong_file_count_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="multiple of N"):
        ab_compare.main(["--trees", "3", _write(tmp_path, "a.json", _gemm(1.0)), _write(tmp_path, "b.json", _gemm(1.0))])

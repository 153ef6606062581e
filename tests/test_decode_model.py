"""benchmarks/decode_model.py: the fixed / per-weight split of decode times and the floor cut a
speedup target needs, on cells generated from known lines."""
import importlib.util
import json
import math
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "decode_model.py")
_spec = importlib.util.spec_from_file_location("decode_model", _PATH)
decode_model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(decode_model)

SHAPES = ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 28672))


def _rows(floor, rate_tw_s, bf16_floor=6.0, bf16_rate=2.3, M=1):
    """Cells exactly on t = floor + W / rate (us), dense bf16 on its own line."""
    rows = []
    for ic, oc in SHAPES:
        w = ic * oc
        rows.append(dict(IC=ic, OC=oc, K=2.0, codebook="mcg", M=M, dtype="f16", us=floor + w / (rate_tw_s * 1e6)))
        rows.append(dict(IC=ic, OC=oc, K=16, codebook="bf16", M=M, dtype="bf16", us=bf16_floor + w / (bf16_rate * 1e6)))
    return rows


def test_fit_recovers_floor_and_rate():
    models = {m["codebook"]: m for m in decode_model.fit_series(_rows(5.0, 4.0))}
    assert models["mcg"]["floor_us"] == pytest.approx(5.0, rel=1e-9)
    assert models["mcg"]["rate_tw_s"] == pytest.approx(4.0, rel=1e-9)
    assert models["bf16"]["floor_us"] == pytest.approx(6.0, rel=1e-9)
    assert models["bf16"]["rate_tw_s"] == pytest.approx(2.3, rel=1e-9)
    assert models["mcg"]["max_rel_residual"] < 1e-9 and models["mcg"]["shapes"] == 4
    (b,) = decode_model.by_bucket(list(models.values()))
    assert b["M"] == 1 and b["rate_vs_bf16"] == pytest.approx(4.0 / 2.3)


def test_residual_reports_what_two_numbers_miss():
    rows = _rows(5.0, 4.0)
    rows[2]["us"] *= 1.2                                   # 4096x14336 slower than its weight count says
    (m,) = [m for m in decode_model.fit_series(rows) if m["codebook"] == "mcg"]
    assert m["max_rel_residual"] > 0.05


def test_floor_cut_reaches_the_target():
    rows = _rows(5.0, 4.0)
    models = decode_model.fit_series(rows)
    measured = math.exp(sum(math.log(b["us"] / c["us"]) for c, b in zip(rows[::2], rows[1::2])) / len(SHAPES))
    assert decode_model.speedup_geomean(rows, models) == pytest.approx(measured)
    target = decode_model.speedup_geomean(rows, models, floor_cut_us=1.25)
    assert target > measured
    assert decode_model.floor_cut_for(rows, models, target) == pytest.approx(1.25, abs=1e-6)
    assert decode_model.floor_cut_for(rows, models, measured * 0.9) == 0.0
    assert decode_model.floor_cut_for(rows, models, 1e6) == math.inf
    faster = decode_model.speedup_geomean(rows, models, rate_gain=1.3)
    assert decode_model.rate_gain_for(rows, models, faster) == pytest.approx(1.3, abs=1e-6)
    assert decode_model.rate_gain_for(rows, models, measured * 0.9) == 1.0
    # the rates alone cannot beat bf16 by more than its floor allows: floor 5 us vs bf16's 6 + W / 2.3
    assert decode_model.rate_gain_for(rows, models, 50.0) == math.inf


def test_cli_writes_json(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"meta": {"gpu": "test"}, "rows": _rows(5.0, 4.0) + _rows(7.0, 3.0, M=16)}))
    out = tmp_path / "model.json"
    decode_model.main([str(bench), "--out", str(out), "--target", "1.5"])
    got = json.loads(out.read_text())
    assert [b["M"] for b in got["buckets"]] == [1, 16]
    assert got["buckets"][1]["floor_us"] == pytest.approx(7.0)
    assert got["floor_cut_us"] >= 0 and got["rate_gain"] >= 1
    assert "needs every coded floor" in capsys.readouterr().out


def test_one_weight_count_is_refused():
    with pytest.raises(ValueError, match="two distinct"):
        decode_model.fit_line([(1.0, 2.0), (1.0, 3.0)])

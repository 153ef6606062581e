"""bench_variants.py --adopt: which variant a shipped table takes, and what the entry carries (the
script writes tuning tables that ship; the timing itself needs a GPU)."""
import argparse
import importlib.util
import json
import os

from escha_jit.autotune.table import Entry, TuningTable, shipped_table_path
from escha_jit.kernels.fused import FusedConfig, FusedLaunch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench_variants():
    path = os.path.join(ROOT, "benchmarks", "bench_variants.py")
    spec = importlib.util.spec_from_file_location("bench_variants", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_adopt_takes_the_fastest_variant_that_keeps_to_registers(monkeypatch):
    BV = _bench_variants()
    cfgs = {n: FusedConfig(warps=w, m_tiles=4, xh=1, x_ring=3) for n, w in (("a", 8), ("b", 16), ("c", 4))}
    runs = {"tuned": (FusedConfig(m_tiles=4, xh=1), FusedLaunch(4)),
            **{n: (c, FusedLaunch(4)) for n, c in cfgs.items()}}
    spills = {cfgs["a"]: 16, cfgs["b"]: 0, cfgs["c"]: 0}
    monkeypatch.setattr(BV.F, "local_memory_bytes", lambda arch, K, cb, i, o, cfg: spills[cfg])
    us = {"tuned": 100.0, "a": 80.0, "b": 90.0, "c": 99.0}
    assert BV.adoptable(us, runs, 0.03, "sm_90", 2.0, "mcg", "f16") == "b"        # a spills
    assert BV.adoptable(us, runs, 0.15, "sm_90", 2.0, "mcg", "f16") is None        # b not 15 % faster
    spills[cfgs["b"]] = 8
    assert BV.adoptable(us, runs, 0.03, "sm_90", 2.0, "mcg", "f16") is None        # c only 1 % faster
    assert BV.adoptable(dict(us, tuned=70.0), runs, 0.0, "sm_90", 2.0, "mcg", "f16") is None


def test_adopted_entries_keep_the_heuristic_time_and_their_runner_up(tmp_path):
    BV = _bench_variants()
    shipped = TuningTable.load(shipped_table_path("sm_90"))
    key = next(k for k in sorted(shipped.entries) if k.endswith("|M64") and "4096x14336" in k)
    new_key = "fused|K2|mcg|256x768|f16|M64"                   # not in the shipped table: the heuristic's
    assert new_key not in shipped.entries
    replaced = {"config": {"warps": 8, "m_tiles": 4, "xh": 1}, "launch": {"splits": 4}, "us": 60.0}
    adopted = {k: Entry(FusedConfig(warps=8, m_tiles=4, min_blocks=2, xh=1, x_ring=3), FusedLaunch(4), 50.0,
                        {"adopted": "test", "runner_up": dict(replaced)}) for k in (key, new_key)}
    args = argparse.Namespace(out=str(tmp_path / "rows.json"), adopt=str(tmp_path / "table.json"))
    BV.write_results(args, {"gpu": "test"}, [{"problem": "p"}], {}, TuningTable.load(shipped_table_path("sm_90")),
                     adopted)
    assert json.loads((tmp_path / "rows.json").read_text())["rows"] == [{"problem": "p"}]
    table = TuningTable.load(args.adopt)
    assert table.entries[key].extra["heuristic_us"] == shipped.entries[key].extra["heuristic_us"]
    assert table.entries[new_key].extra["heuristic_us"] == 60.0
    ru = table.entries[key].runner_up()
    assert ru.cfg == FusedConfig(warps=8, m_tiles=4, xh=1) and ru.launch == FusedLaunch(4)
    assert table.entries.keys() == shipped.entries.keys() | {new_key}


def test_variants_set_the_launch_fields_and_keep_the_rest():
    BV = _bench_variants()
    cfg, launch = FusedConfig(warps=8, min_blocks=2), FusedLaunch(4, blocks_per_sm=3)
    assert BV.apply(cfg, launch, BV.parse_variant("blocks_per_sm=1")) == (cfg, FusedLaunch(4, blocks_per_sm=1))
    assert BV.apply(cfg, launch, BV.parse_variant("splits=2, warps=16")) == \
        (FusedConfig(warps=16, min_blocks=2), FusedLaunch(2, blocks_per_sm=3))
    for bad in ("blocks_per_sm", "blocks_per_sm=x"):
        try:
            BV.parse_variant(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} parsed")

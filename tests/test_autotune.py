"""Autotuning on the CPU: search with an injected timer, tables, candidates, prebuild + load."""
import itertools
import json
import logging
import os

import pytest

from escha_jit import env
from escha_jit.autotune.candidates import fused_candidates
from escha_jit.autotune.search import successive_halving
from escha_jit.autotune.shapes import LayerShape, checkpoint_shapes, model_specs
from escha_jit.autotune.table import (M_BUCKETS, Entry, TableError, Tables, TuningTable, entry_key, m_bucket,
                                      shipped_table_path, user_table_path)
from escha_jit.cache import KernelCache
from escha_jit.errors import CompileForbiddenError, ToolchainUnavailable
from escha_jit.kernels.fused import FusedConfig, FusedLaunch, smem_layout
from escha_jit.synth import make_checkpoint


# ---------------------------------------------------------------- search

def test_successive_halving_picks_fastest_and_is_deterministic():
    cands = list(range(20))
    true = {c: 1.0 + ((c * 7) % 20) / 10 for c in cands}          # 0 is fastest
    calls = []

    def timer(c, n):
        calls.append((c, n))
        return true[c] + (0.5 if n == 3 and c == 13 else 0.0)      # noisy first round for 13

    r1 = successive_halving(cands, timer, repeats=(3, 10, 25), keep=0.34)
    r2 = successive_halving(cands, timer, repeats=(3, 10, 25), keep=0.34)
    assert r1.best.candidate == 0 and [x.candidate for x in r1.ranked] == [x.candidate for x in r2.ranked]
    assert sum(1 for c, n in calls[:len(calls) // 2] if n == 3) == 20      # round 1: everyone
    assert r1.best.rounds == 3 and r1.measured == 20 + 7 + 2
    assert [x.candidate for x in r1.ranked[:3]] == [0, 3, 6]


def test_failing_candidates_are_dropped_not_fatal(caplog):
    def timer(c, n):
        if c % 3 == 0:
            raise RuntimeError(f"launch failed for {c}")
        return float(c)
    with caplog.at_level(logging.INFO):
        rep = successive_halving(list(range(9)), timer)
    assert rep.best.candidate == 1
    assert len(rep.failed) == 3 and "launch failed" in rep.failed[0][1]
    assert "dropped" in caplog.text


def test_budget_stops_after_first_round():
    t = [0.0]

    def clock():
        t[0] += 100.0
        return t[0]
    rep = successive_halving(list(range(10)), lambda c, n: float(10 - c), budget_s=1.0, clock=clock)
    assert rep.best.candidate == 9 and all(r.rounds == 1 for r in rep.ranked)


def test_ties_keep_candidate_order():
    rep = successive_halving(["a", "b", "c"], lambda c, n: 1.0)
    assert [r.candidate for r in rep.ranked] == ["a", "b", "c"]


# ---------------------------------------------------------------- candidates

def test_candidates_fit_the_smem_formula():
    for M in (1, 4, 16, 64, 256):
        cands = fused_candidates("sm_90", 4.0, 8192, 28672, M, 132)
        assert cands, M
        for c in cands:
            kr = 8192 // c.launch.splits
            assert kr % 128 == 0 and kr % (16 * c.cfg.rows_per_stage) == 0
            assert smem_layout(c.cfg, 4.0, M, kr).total * c.cfg.min_blocks <= 227 * 1024
            assert 16 * c.cfg.m_tiles >= M
        assert len({c.key() for c in cands}) == len(cands)


def test_x_ring_candidates_only_where_measured():
    """A operand rings are searched on sm_90 with xh 1 above one m tile (where they were measured),
    each fitting the shared memory its ring needs, and they let 8 waves at 2 blocks per SM fit at
    M = 64 where the whole K range does not; every candidate's kernel is a valid spec."""
    from escha_jit.autotune.api import TUNE_GRID
    from escha_jit.kernels import fused
    grid = dict(TUNE_GRID, cluster=(1,))          # the default grid searches rings of 3
    for M in (1, 4, 16):
        assert not any(c.cfg.x_ring for c in fused_candidates("sm_90", 2.0, 4096, 14336, M, 132, **grid)), M
    assert not any(c.cfg.x_ring for c in fused_candidates("gfx1201", 2.0, 4096, 14336, 64, 32, **grid))
    cands = fused_candidates("sm_90", 2.0, 4096, 14336, 64, 132, **grid)
    rings = [c for c in cands if c.cfg.x_ring]
    assert rings and all(c.cfg.x_ring == 3 and c.cfg.xh == 1 and c.cfg.cluster == 1 for c in rings)
    for c in rings:
        kr = 4096 // c.launch.splits
        assert smem_layout(c.cfg, 2.0, 64, kr).total * c.cfg.min_blocks <= 227 * 1024
        fused.spec_for("sm_90", 2.0, "mcg", "f16", "f16", c.cfg)
    # the measured winner (4096x14336 M = 64, 4 splits): with the ring only
    win = {(c.cfg.warps, c.cfg.rows_per_stage, c.cfg.stages, c.cfg.min_blocks, c.cfg.x_ring, c.launch.splits)
           for c in cands}
    assert (8, 8, 2, 2, 3, 4) in win and (8, 8, 2, 2, 0, 4) not in win
    assert len({c.key() for c in cands}) == len(cands) and any("_xr3" in c.key() for c in rings)


def test_untuned_split_cluster_twins_are_shipped_where_they_may_run():
    """The untuned choice at M <= 8 may run the split-cluster twin of its routed (swapped)
    configuration (kernels.fused.split_cluster_twin): one m tile, no column-group clusters or ring,
    not above the swapped route's M, at split counts of 2..8 that tile IC and fit shared memory.
    Every such twin is shipped for sm_90 at every rate, codebook and activation dtype (CI compiles
    them), none for sm_80 / sm_89 / gfx1201."""
    import dataclasses
    from escha_jit.kernels import fused
    from escha_jit.kernels.registry import all_rate_codebooks, shipped_specs
    base = FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=2, swap=1)
    twin = dataclasses.replace(base, split_cluster=1)
    assert fused.split_cluster_twin(base, 1) == twin and fused.split_cluster_twin(base, 8) == twin
    assert fused.split_cluster_twin(base, 9) is None
    for other in (dict(cluster=2, swap=0), dict(m_tiles=2, swap=0), dict(x_ring=3, m_tiles=2, xh=1, swap=0),
                  dict(split_cluster=1)):
        assert fused.split_cluster_twin(dataclasses.replace(base, **other), 1) is None, other
    # 3584 = 28 x 128: 2 and 7 splits tile 16-row stages (4 does not: 896 features); 1024: 2, 4 (8 = 128 < 256)
    assert fused.split_cluster_counts(twin, 2.0, 3584, 1, "sm_90") == [2, 7]
    assert fused.split_cluster_counts(twin, 2.0, 4096, 1, "sm_90") == [2, 4, 8]
    assert fused.split_cluster_counts(twin, 2.0, 1024, 1, "sm_90") == [2, 4]
    for M in (1, 4, 8):
        configs = fused.default_configs(M, "nvidia", "mul1", 3.0)
        plain = [c for c in configs if not c.split_cluster]
        assert [c for c in configs if c.split_cluster] == \
            [dataclasses.replace(fused.swap_route(c, "nvidia", "mul1", M), split_cluster=1) for c in plain]
    assert not any(c.split_cluster for M in (9, 16, 32) for c in fused.default_configs(M, "nvidia"))
    assert not any(c.split_cluster for c in fused.default_configs(1, "amd"))
    sc = {(s.K, s.codebook, s.in_dtype) for s, _ in shipped_specs("sm_90") if s.op == "fused" and s.params.get("split_cluster")}
    assert sc == {(K, cb, dt) for K, cb in all_rate_codebooks() for dt in ("f16", "bf16")}
    for arch in ("sm_80", "sm_89", "gfx1201"):
        assert not any(s.op == "fused" and s.params.get("split_cluster") for s, _ in shipped_specs(arch)), arch


@pytest.mark.parametrize("IC,OC,M,resident,want", [
    # the H100's counts of resident clusters (cluster_residency.py --untuned, session 48) and what
    # bench_variants measured there: all resident at the untuned count -> that count (0.78-0.89x)
    (3584, 3584, 1, {2: 124, 7: 32}, 7),
    (5120, 5120, 4, {2: 124, 4: 62, 5: 47}, 5),
    # 8 splits: 384 blocks, 30 clusters resident; 4: 48 groups of 62 -> 4 (0.79-0.92x the untuned time)
    (4096, 6144, 1, {2: 124, 4: 62, 8: 30}, 4),
    # not all resident at the untuned count, and 2 splits of 128 blocks rated slower (1.40-1.59x): none
    (8192, 8192, 1, {2: 124, 4: 62, 8: 30}, None),
    (13824, 5120, 1, {2: 124, 6: 39}, None),
])
def test_untuned_split_cluster_count_from_the_drivers_residency(IC, OC, M, resident, want):
    """kernels.fused.split_cluster_splits: of the split counts whose clusters the driver holds all at
    once, the one the SM-balance model rates fastest at SPLIT_CLUSTER_GAIN of its time, where that
    beats the untuned count without clusters (benchmarks/RESULTS.md session 48)."""
    from escha_jit.kernels import fused
    cfg = fused.swap_route(fused.default_config_for(2.0, "mcg", IC, OC, M, 132, "sm_90"), "nvidia", "mcg", M)
    launch = fused.default_launch(cfg, 2.0, IC, OC, M, 132)
    counts = fused.split_cluster_counts(fused.split_cluster_twin(cfg, M), 2.0, IC, M, "sm_90")
    assert set(resident) <= set(counts), (counts, resident)
    assert fused.split_cluster_splits(cfg, 2.0, IC, OC, M, 132, launch.splits, resident) == want
    # no cluster resident anywhere: never
    assert fused.split_cluster_splits(cfg, 2.0, IC, OC, M, 132, launch.splits, {S: 0 for S in resident}) is None


def test_driver_probes_hold_every_kernel_an_untuned_plan_asks_about():
    """tune() compiles kernels.fused.driver_probe_configs in its pool: every configuration whose
    count of resident clusters the untuned choice asks the driver for, whatever the driver answers
    (default_config_for's cluster_slots at M = 9..16), and the split-cluster twin where
    untuned_split_cluster asks (M <= 8, split counts that fit); nothing off sm_90."""
    from escha_jit.kernels import fused
    seen_m16 = seen_twin = 0
    for (IC, OC), M, K, cb in itertools.product([(4096, 4096), (4096, 14336), (14336, 4096), (3584, 18944), (1024, 4096)],
                                                (1, 4, 8, 9, 12, 16, 32), (2.0, 3.0, 4.0), ("mcg", "mul1")):
        probes = fused.driver_probe_configs(K, cb, IC, OC, M, 132, "sm_90")
        assert len(set(probes)) == len(probes)
        for answer in (0, 1, 3, 10 ** 6):
            asked = []
            fused.default_config_for(K, cb, IC, OC, M, 132, "sm_90",
                                     lambda cfg, S: asked.append(cfg) or answer)
            assert set(asked) <= set(probes), (IC, OC, M, K, cb, answer)
            seen_m16 += bool(asked)
        routed = fused.swap_route(fused.default_config_for(K, cb, IC, OC, M, 132, "sm_90"), "nvidia", cb, M)
        twin = fused.split_cluster_twin(routed, M)
        wants_twin = twin is not None and bool(fused.split_cluster_counts(twin, K, IC, M, "sm_90"))
        assert (twin in probes) == wants_twin, (IC, OC, M, K, cb)
        assert all(p.cluster > 1 for p in probes if p != twin)
        seen_twin += wants_twin
        for arch in ("sm_80", "sm_89", "gfx1201"):
            assert fused.driver_probe_configs(K, cb, IC, OC, M, 132, arch) == []
    assert seen_m16 and seen_twin


def test_split_cluster_variants_where_the_kernel_allows():
    """tune()'s split-cluster step tries a winner's own split count (2..8) and 2 / 4 / 8 where they
    tile IC and fit shared memory, each a valid spec with the cluster's receive buffer counted; none
    off sm_90, with column-group clusters, above one m tile or where the winner already has them."""
    import dataclasses
    from escha_jit.autotune.measure import Problem
    from escha_jit.autotune.split_clusters import cluster_variants
    from escha_jit.kernels import fused
    cfg = FusedConfig(warps=4, m_tiles=1, rows_per_stage=8, stages=2, xh=0)
    e = Entry(cfg, FusedLaunch(3, blocks_per_sm=4), 10.0, {})
    p = Problem(6144, 4096, 2.0, "mcg", 1)
    vs = cluster_variants("sm_90", p, e)
    assert [v.launch for v in vs] == [FusedLaunch(S) for S in (2, 3, 4, 8)]    # unpinned: stamped when adopted
    assert all(v.cfg == dataclasses.replace(cfg, split_cluster=1) and v.key().endswith(f"_sc_S{v.launch.splits}")
               for v in vs)
    for v in vs:
        fused.spec_for("sm_90", 2.0, "mcg", "f16", "f16", v.cfg)
    # rows_per_stage 16 at 8 splits of 1024: kr 128 is not a multiple of 16 * 16 rows
    e16 = Entry(dataclasses.replace(cfg, rows_per_stage=16), FusedLaunch(1), 10.0, {})
    assert [v.launch.splits for v in cluster_variants("sm_90", Problem(1024, 4096, 2.0, "mcg", 1), e16)] == [2, 4]
    # shared memory: the A operand shrinks with S, the receive buffer [S - 1][M][128] fp32 grows; at three
    # blocks of 2 stages, M = 16, only S = 4 fits 227 KiB
    big = Entry(dataclasses.replace(cfg, min_blocks=3), FusedLaunch(1), 10.0, {})
    q = Problem(4096, 4096, 2.0, "mcg", 16)
    assert [v.launch.splits for v in cluster_variants("sm_90", q, big)] == [4]
    for S in (2, 4, 8):
        need = fused.smem_layout(dataclasses.replace(big.cfg, split_cluster=1), 2.0, 16, 4096 // S, splits=S).total
        assert (need * 3 <= 227 * 1024) == (S == 4), (S, need)
    assert cluster_variants("gfx1201", p, e) == []
    for other in (dataclasses.replace(cfg, cluster=2), dataclasses.replace(cfg, m_tiles=2),
                  dataclasses.replace(cfg, split_cluster=1)):
        assert cluster_variants("sm_90", p, Entry(other, FusedLaunch(4), 10.0, {})) == []


def test_reg_level_variants_skip_entries_with_a_level():
    from escha_jit.autotune.measure import Problem
    from escha_jit.autotune.reg_levels import LEVELS, level_variants
    p = Problem(4096, 4096, 2.0, "mcg", 1)
    e = Entry(FusedConfig(warps=4, rows_per_stage=8, stages=2), FusedLaunch(4, blocks_per_sm=3), 10.0, {})
    vs = level_variants("sm_90", p, e)
    assert [v.cfg.reg_level for v in vs] == list(LEVELS) and all(v.launch == e.launch for v in vs)
    assert level_variants("sm_90", p, Entry(vs[0].cfg, e.launch, 10.0, {})) == []


# ---------------------------------------------------------------- tables

def _table():
    e = Entry(FusedConfig(warps=4, m_tiles=1, rows_per_stage=8, stages=2, xh=1), FusedLaunch(8), 11.5,
              {"weight_gb_s": 123.0, "runner_up": None})
    return TuningTable({"device": "test", "arch": "sm_90"}, {entry_key("fused", 2.0, "mcg", 4096, 4096, "f16", 3): e})


def test_m_buckets():
    assert [m_bucket(m) for m in (1, 2, 3, 4, 5, 16, 17, 200, 256, 999)] == [1, 2, 4, 4, 8, 16, 32, 256, 256, 256]
    assert entry_key("fused", 2.5, "mul1", 4096, 14336, "bf16", 3) == "fused|K2p5|mul1|4096x14336|bf16|M4"
    assert M_BUCKETS[-1] == 256


def test_table_round_trip(tmp_path):
    t = _table()
    t.save(str(tmp_path / "sm_90.json"))
    back = TuningTable.load(str(tmp_path / "sm_90.json"))
    assert back.to_json() == t.to_json()
    e = back.entries["fused|K2|mcg|4096x4096|f16|M4"]
    assert e.cfg.xh == 1 and e.launch.splits == 8 and e.us == 11.5 and e.extra["weight_gb_s"] == 123.0


def test_table_merge_user_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    shipped = tmp_path / "shipped.json"
    _table().save(str(shipped))
    user = TuningTable({"device": "mine"}, {"fused|K2|mcg|4096x4096|f16|M4": Entry(FusedConfig(warps=8), FusedLaunch(4), 9.0),
                                            "fused|K3|mcg|4096x4096|f16|M1": Entry(FusedConfig(), FusedLaunch(2), 5.0)})
    user.save(user_table_path("sm_90"))
    import escha_jit.autotune.table as T
    monkeypatch.setattr(T, "shipped_table_path", lambda arch: str(shipped))
    tb = Tables(str(tmp_path))
    assert tb.lookup("sm_90", "fused|K2|mcg|4096x4096|f16|M4").cfg.warps == 8
    assert tb.lookup("sm_90", "fused|K3|mcg|4096x4096|f16|M1").launch.splits == 2
    assert "merged_from" in tb.table("sm_90").provenance


def _entry(config, splits=1):
    return json.dumps({"format": 1, "entries": {"fused|K2|mcg|4096x4096|f16|M1": {"config": config,
                                                                                  "launch": {"splits": splits}}}})


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": 99, "entries": {}}),
                                     json.dumps({"format": 1, "entries": {"k": {"config": {"warps": 3}}}}),
                                     _entry({"bogus": 1}), _entry({"warps": 3}), _entry({"stages": 1}),
                                     _entry({"rows_per_stage": 0}), _entry({"xh": 2}), _entry({"warps": "8"}),
                                     _entry({}, splits=0)])
def test_corrupt_table(tmp_path, monkeypatch, caplog, content):
    import escha_jit.autotune.table as T
    monkeypatch.setattr(T, "shipped_table_path", lambda arch: str(tmp_path / "no_shipped_table.json"))
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    path = user_table_path("sm_90")
    os.makedirs(os.path.dirname(path))
    open(path, "w").write(content)
    with pytest.raises(TableError, match="sm_90.json"):
        TuningTable.load(path)
    tb = Tables(str(tmp_path))
    assert tb.lookup("sm_90", "fused|K2|mcg|4096x4096|f16|M1") is None    # the whole user table is ignored
    assert "ignoring tuning table" in caplog.text


def test_read_table_none_where_missing_or_unreadable(tmp_path, caplog):
    """What tune() adds to (and Tables looks up): the table as it is, None where there is none, and
    None (with a warning naming the file) where it is unreadable."""
    from escha_jit.autotune.table import read_table
    path = str(tmp_path / "tuning" / "sm_90.json")
    assert read_table(path) is None
    _table().save(path)
    assert read_table(path).to_json() == _table().to_json()
    open(path, "w").write("{not json")
    assert read_table(path) is None
    assert "ignoring tuning table" in caplog.text and "sm_90.json" in caplog.text


@pytest.mark.parametrize("field,value", [("warps", 3), ("warps", 32), ("m_tiles", 0), ("rows_per_stage", 0),
                                         ("stages", 1), ("min_blocks", 0), ("xh", 2), ("swap", -1), ("diag", 5),
                                         ("stages", 2.0), ("stages", "2"), ("warps", True), ("reg_level", 11),
                                         ("reg_level", -2)])
def test_fused_config_rejects_out_of_range(field, value):
    with pytest.raises(ValueError, match=f"FusedConfig.{field}="):
        FusedConfig(**{field: value})


@pytest.mark.parametrize("splits", [0, -1, 2.0, "2", True])
def test_fused_launch_rejects_out_of_range(splits):
    with pytest.raises(ValueError, match="FusedLaunch.splits="):
        FusedLaunch(splits)


def test_tune_grid_overrides_and_checks():
    from escha_jit.autotune.api import TUNE_GRID, tune_grid
    before = dict(TUNE_GRID)
    assert tune_grid() == TUNE_GRID
    g = tune_grid({"rows": [8, 16, 32], "stages": (2, 3, 4)})
    assert g["rows"] == (8, 16, 32) and g["stages"] == (2, 3, 4) and g["warps"] == TUNE_GRID["warps"]
    assert TUNE_GRID == before                                          # the default is not modified
    with pytest.raises(ValueError, match="axis 'tiles'"):
        tune_grid({"tiles": (1,)})
    with pytest.raises(ValueError, match="axis 'stages'.*FusedConfig.stages=1"):
        tune_grid({"stages": (1, 2)})
    with pytest.raises(ValueError, match="axis 'rows': no values"):
        tune_grid({"rows": ()})
    assert tune_grid({"xh": (0, 1)})["xh"] == (0, 1)
    with pytest.raises(ValueError, match="axis 'xh'.*FusedConfig.xh=2"):
        tune_grid({"xh": (1, 2)})
    # the candidates of a widened grid carry its values
    cands = fused_candidates("sm_90", 2.0, 8192, 28672, 16, 132, **{**g, "xh": (1,)})
    assert {c.cfg.rows_per_stage for c in cands} == {8, 16, 32}


def test_miss_logged_once_per_key(tmp_path, caplog, monkeypatch):
    import escha_jit.autotune.table as T
    monkeypatch.setattr(T, "shipped_table_path", lambda arch: str(tmp_path / "none.json"))
    tb = Tables(str(tmp_path))
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            assert tb.lookup("sm_90", "fused|K7|mcg|128x128|f16|M1") is None
        tb.lookup("sm_90", "fused|K7|mcg|128x128|f16|M2")
    assert caplog.text.count("K7|mcg|128x128|f16|M1") == 1 and caplog.text.count("M2") == 1


def test_shipped_tables_are_valid():
    for arch in ("sm_90",):
        path = shipped_table_path(arch)
        if not os.path.exists(path):
            pytest.fail(f"no shipped table {path}")
        t = TuningTable.load(path)
        assert t.provenance.get("device") and t.provenance.get("arch") == arch and t.entries
        for k, e in t.entries.items():
            assert k.startswith("fused|") and e.us and e.extra.get("heuristic_us")
            assert e.us <= e.extra["heuristic_us"] * 1.0001, k        # tuned beats or ties the heuristic


# ---------------------------------------------------------------- prebuild and loading with compiling forbidden

@pytest.mark.parametrize("arch", ["sm_90", "gfx1201"])
def test_prebuild_then_load_without_compiling(tmp_path, monkeypatch, arch):
    if arch.startswith("gfx") and env.skip_amd():
        pytest.skip("ESCHA_JIT_SKIP_AMD=1: AMD toolchain not installed on purpose")
    from escha_jit.jit import compile_spec
    from escha_jit.prebuild import prebuild
    ck = tmp_path / "ck"
    make_checkpoint(ck, "exl3", hidden=256, intermediate=384)
    out = tmp_path / "cache"
    rows, table = prebuild(str(ck), arch, str(out), dtypes=("f16",), jobs=2)
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok][:3]
    assert os.path.exists(table)
    if os.path.exists(shipped_table_path(arch)):     # the shipped entries and routes travel with the cache
        shipped, copied = TuningTable.load(shipped_table_path(arch)), TuningTable.load(table)
        assert copied.entries.keys() >= shipped.entries.keys() and copied.routes.keys() >= shipped.routes.keys()
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(out))
    monkeypatch.setenv("ESCHA_JIT_NO_COMPILE", "1")
    specs = model_specs(arch, checkpoint_shapes(str(ck)), ("f16",), TuningTable.load(table))
    assert len(specs) == len(rows)
    for spec, extra in specs:                       # exact keys (same compiler here)
        assert not compile_spec(spec, extra, cache=KernelCache(str(out))).compiled
    import escha_jit.jit as J                       # a deployment without any compiler: portable keys
    monkeypatch.setattr(J, "toolchain_for", lambda *a, **k: (_ for _ in ()).throw(ToolchainUnavailable("none")))
    for spec, extra in specs:
        assert compile_spec(spec, extra, cache=KernelCache(str(out))).code.binary
    missing = model_specs(arch, [LayerShape(128, 128, 7.0, "mcg")], ("f16",))[-1]
    with pytest.raises((CompileForbiddenError, ToolchainUnavailable)):
        compile_spec(missing[0], missing[1], cache=KernelCache(str(out)))


def test_tune_skips_candidates_whose_kernels_failed_their_checks(caplog):
    """tune() drops a candidate when one of the kernels it may run failed its compile checks (here
    a spill, as the 16-wave K3 mul1 kernel has under NVRTC 13.5), its swapped twin included, and
    says why; the others stay in the search."""
    from escha_jit.autotune.measure import Problem, fused_specs, usable
    p = Problem(4096, 14336, 3.0, "mul1", 16)
    cands = fused_candidates("sm_90", 3.0, 4096, 14336, 16, 132, warps=(8, 16), rows=(16,), stages=(2,),
                             min_blocks=(1,), xh=(1,))
    spilled = {str(s): "spills 16 bytes" for c in cands if c.cfg.warps == 16
               for s in fused_specs("sm_90", 3.0, "mul1", "f16", c)}
    with caplog.at_level("WARNING", logger="escha_jit"):
        kept = usable("sm_90", p, cands, spilled)
    assert kept == [c for c in cands if c.cfg.warps == 8] and kept
    assert "spills 16 bytes" in caplog.text and "w16_" in caplog.text
    # at M = 4 a candidate also runs its swapped twin (kernels.fused.swap_route)
    p4 = Problem(4096, 4096, 2.0, "mcg", 4)
    c4 = fused_candidates("sm_90", 2.0, 4096, 4096, 4, 132, warps=(8,), rows=(8,), stages=(2,), min_blocks=(2,),
                          xh=(0,))
    twins = {str(fused_specs("sm_90", 2.0, "mcg", "f16", c)[-1]): "no HMMA.16816.F32 in the SASS" for c in c4}
    assert all("swap1" in k for k in twins) and usable("sm_90", p4, c4, twins) == []
    assert usable("sm_90", p4, c4, {}) == c4


def _untuned_choice(K, cb, IC, OC, M, sms=132, cluster_slots=None):
    from escha_jit.autotune.api import heuristic_candidate
    from escha_jit.autotune.measure import Problem
    c = heuristic_candidate(Problem(IC, OC, K, cb, M), sms, "sm_90", cluster_slots)
    return c.cfg, c.launch


def _h200_cluster_slots(asked=None):
    """The resident-cluster counts the H200's driver gives the 16-wave fused kernels (one block per
    SM; cuOccupancyMaxActiveClusters, benchmarks/RESULTS.md session 17), as ops/fused.cluster_slots
    would return them; ``asked`` collects the (cluster, splits) asked about."""
    def slots(cfg, splits):
        if asked is not None:
            asked.append((cfg.cluster, splits))
        return {2: H200_CLUSTERS_OF_2, 4: H200_CLUSTERS_OF_4}[cfg.cluster]
    return slots


def test_untuned_choice_follows_the_h200_table():
    """The untuned heuristic (NVIDIA, M <= 16) picks the tuned table's waves, split and A-operand
    source on most of the table's problems: the model it uses was read off that table, and a change
    to either that drifts apart shows here. Spot checks of the shapes that motivated it.
    (129 of 186 agreed until session 25's re-tune of mcg at M <= 4 moved 9 more entries to near-ties
    the heuristic does not pick: its choices there measured within 0-4 % of the tuned ones, 7-9 % on
    8192x28672 K4 M = 4; benchmarks/results/2026-12-03_h200_tune_s25_mcg.log. Session 27's re-tune
    of M <= 4 moved the swapped route onto the prep kernel where x's rotations over all column
    groups are many (kernels.fused.XH_SWAP_MIN_ROTATIONS): 125 agree. Session 35's entries at M = 32
    / 64 are not counted: the untuned choice there does not read the shape; nor are session 46's
    split-cluster entries, a launch the untuned choice does not take.)"""
    table = TuningTable.load(shipped_table_path("sm_90"))
    same = total = 0
    for key, e in table.entries.items():
        op, rate, cb, shape, _, bucket = key.split("|")             # fused|K2p5|mcg|4096x4096|f16|M16
        if int(bucket[1:]) > 16 or e.cfg.split_cluster:    # above M = 16 the untuned choice is shape-free
            continue                                          # (default_config); no split clusters untuned
        IC, OC = (int(v) for v in shape.split("x"))
        cfg, launch = _untuned_choice(float(rate[1:].replace("p", ".")), cb, IC, OC, int(bucket[1:]))
        total += 1
        same += (cfg.warps, cfg.xh, launch.splits) == (e.cfg.warps, e.cfg.xh, e.launch.splits)
    assert total >= 150 and same >= 0.66 * total, (same, total)
    # 4096x14336 at M = 16: 112 column groups of 16 waves and no split (the old rule: 8 waves, S = 8)
    cfg, launch = _untuned_choice(2.0, "mcg", 4096, 14336, 16)
    assert (cfg.warps, cfg.min_blocks, cfg.xh, launch.splits) == (16, 1, 1, 1)
    # 4096x4096 at M = 16: 8 items per wave, rotated in the kernel, 4 splits fill 128 SMs
    cfg, launch = _untuned_choice(2.0, "mcg", 4096, 4096, 16)
    assert (cfg.warps, cfg.xh, launch.splits) == (16, 0, 4)
    # 8192x28672 at M = 4: 224 column groups x 4 rows -> the prep kernel and 4-wave blocks
    cfg, launch = _untuned_choice(2.0, "mcg", 8192, 28672, 4)
    assert (cfg.warps, cfg.xh) == (4, 1)


H200_CLUSTERS_OF_2, H200_CLUSTERS_OF_4 = 66, 30


@pytest.mark.parametrize("shape,K,cb,want", [
    # measured (RESULTS.md sessions 16-17 and 19, against the prep kernel with split rows): clusters
    # won here ...
    ((4096, 4096), 2.0, "mcg", (0, 2, 4)),          # 8 items per wave at CL 1 -> 4; 64 clusters of 2 (66 fit)
    ((3072, 6144), 2.0, "mcg", (0, 4, 2)),          # 12 -> 3 per wave; 24 clusters of 4 (0.956x CL 2)
    ((13824, 5120), 3.0, "mul1", (0, 4, 3)),        # 36 -> 9, but the prep kernel's 16 waves spill here
    # ... and lost here: too many items per wave of a cluster, more clusters than are resident at
    # once, too few items
    ((4096, 14336), 2.0, "mcg", (1, 1, 1)),         # 32 -> 8 per wave of 4
    ((13824, 5120), 4.0, "mul1", (1, 1, 3)),        # 36 -> 9 (0.949x CL 4)
    ((14336, 4096), 2.0, "mcg", (1, 1, 4)),         # 32 clusters of 4
    ((8192, 8192), 4.0, "mul1", (1, 1, 2)),         # 32 clusters of 4; 16 items per wave at CL 2
    ((5120, 13824), 4.0, "mul1", (1, 1, 2)),        # 108 clusters of 2 (66 fit), 54 of 4 (30)
    ((4096, 1024), 2.0, "mcg", (0, 1, 16)),         # 2 items per wave: no cluster
])
def test_untuned_clusters_where_all_are_resident(shape, K, cb, want):
    """M = 9..16 with 16 waves: the heuristic splits the in-kernel prologue over clusters of 2 or 4
    blocks from 8 items per wave, up to 4 per wave of a cluster (10 where the prep kernel's
    alternative is 8 waves), and only where every cluster of
    the launch is resident at once (the driver's count, here the H200's); (xh, cluster, splits)
    as measured best of the in-kernel / clustered / prep-kernel choices of these shapes."""
    from escha_jit.kernels import fused
    asked = []
    cfg, launch = _untuned_choice(K, cb, *shape, 16, cluster_slots=_h200_cluster_slots(asked))
    assert (cfg.xh, cfg.cluster, launch.splits) == want, (cfg, launch, asked)
    assert cfg.warps == 16 and cfg in fused.default_configs(16, codebook=cb, K=K)
    assert all(S == launch.splits for _, S in asked)                 # asked about the launch it makes
    # without a count (no GPU, AMD) no clusters, and the rest of the choice is the same
    # (where the prep kernel's 16 waves spill, its 8 waves take a split of their own)
    plain, plain_launch = _untuned_choice(K, cb, *shape, 16)
    assert plain.cluster == 1 and (plain_launch == launch or plain.warps == 8)
    assert plain.xh == (1 if shape[0] * 16 // launch.splits // 128 > 16 * fused.XH_MAX_ITEMS_PER_WAVE else 0)


@pytest.mark.parametrize("IC,OC,M,ring", [
    (4096, 14336, 17, True), (4096, 14336, 32, True), (4096, 14336, 33, True), (4096, 14336, 64, True),
    (8192, 28672, 64, True),                     # 224 groups: two rounds 0.85 full
    (5120, 13824, 32, True),                     # 108 groups: 0.82 of 132 SMs
    (4096, 4096, 64, False), (14336, 4096, 64, False),    # 32 groups: they need splits
    (3584, 18944, 64, False),                    # 148 groups: a second round 0.12 full
    (4096, 14336, 16, False), (4096, 14336, 128, False),  # one m tile; 8 m tiles
    (1024, 14336, 64, False),                    # a short K range (RING_MIN_IC)
])
def test_untuned_ring_where_one_split_fills_the_sms(IC, OC, M, ring):
    """sm_90, M = 17..64: the untuned call streams the A operand through the ring at one split where
    that split's blocks fill their last round of SMs to RING_MIN_FILL (0.66-1.00x the tuned split-K
    entries' time on 4096x14336 / 8192x28672, H100, session 42); it is a shipped configuration,
    and no arch without the ring (sm_86) gets it."""
    from escha_jit.autotune.api import heuristic_candidate
    from escha_jit.autotune.measure import Problem
    from escha_jit.kernels import fused
    for K, cb in ((3.0, "mcg"), (4.0, "mul1")):
        cfg, launch = _untuned_choice(K, cb, IC, OC, M)
        assert bool(cfg.x_ring) == ring, (cfg, launch)
        assert cfg in fused.default_configs(M, codebook=cb, K=K)
        if ring:
            assert (launch.splits, cfg.xh, cfg.warps, cfg.m_tiles) == (1, 1, 16, fused._m_tiles(M))
        assert heuristic_candidate(Problem(IC, OC, K, cb, M), 84, "sm_86").cfg.x_ring == 0
    # where the 2-m-tile ring spills (mul1, K = 2.5; CI rejects spills) the split-K default stays
    cfg, _ = _untuned_choice(2.5, "mul1", IC, OC, M)
    assert bool(cfg.x_ring) == (ring and M > 32) and cfg in fused.default_configs(M, codebook="mul1", K=2.5)


def test_untuned_ring_only_at_one_split():
    """Wherever the untuned choice takes the ring it launches one split: the ring's win is a block
    holding its whole K range. Where one split does not fit the shared-memory budget (the 2-m-tile
    ring at M = 32 from K = 6 on, its trellis rings growing with K) the split-K default stays; it
    used to take the ring at 8 splits, 16 waves at a split count never measured."""
    from escha_jit.kernels import fused
    from escha_jit.trellis import all_rate_codebooks
    rings = 0
    for K, cb in all_rate_codebooks():
        for IC, OC in ((4096, 14336), (8192, 28672), (5120, 13824)):
            for M in (17, 32, 33, 64):
                cfg, launch = _untuned_choice(K, cb, IC, OC, M)
                if cfg.x_ring:
                    rings += 1
                    assert launch.splits == 1, (K, cb, IC, OC, M, cfg, launch)
                    total = fused.smem_layout(cfg, K, M, IC).total
                    assert total <= fused.smem_caps("sm_90")[0], (K, cb, M, total)
    assert rings > 100                   # the check above is not vacuous
    for K in (6.0, 8.0):
        cfg, launch = _untuned_choice(K, "mcg", 4096, 14336, 32)
        assert cfg == fused.default_config(32) and cfg.x_ring == 0, (K, cfg, launch)


def test_cluster_count_that_cannot_be_had_means_no_clusters(monkeypatch, caplog):
    """ops/fused.cluster_slots where the cluster kernel cannot be loaded (a prebuilt cache without
    it under ESCHA_JIT_NO_COMPILE, a driver refusal): a warning and a count of 0, so the untuned
    call runs its choice without clusters; inside CUDA-graph capture the NotWarmedUp error stands;
    no count at all before sm_90."""
    import torch
    from escha_jit.ops import fused as F
    from escha_jit.ops.common import NotWarmedUp

    def refuse(spec, *a, **k):
        raise CompileForbiddenError(f"{spec}: not in the cache and compiling is off")
    monkeypatch.setattr(F, "arch_of", lambda dev: "sm_90")
    monkeypatch.setattr(F, "kernel_for", refuse)
    slots = F.cluster_slots(torch.device("cpu"), 2.0, "mcg", "f16", "f16", 16, 4096)
    with caplog.at_level(logging.WARNING):
        cfg = F.default_config_for(2.0, "mcg", 4096, 4096, 16, 132, "sm_90", slots)
    assert (cfg.cluster, cfg.xh, cfg.warps) == (1, 0, 16)
    assert "no clusters for this untuned call" in caplog.text and "cluster2" in caplog.text

    def capturing(spec, *a, **k):
        raise NotWarmedUp(f"kernel {spec} is first needed inside CUDA-graph capture")
    monkeypatch.setattr(F, "kernel_for", capturing)
    with pytest.raises(NotWarmedUp):
        F.cluster_slots(torch.device("cpu"), 2.0, "mcg", "f16", "f16", 16, 4096)(
            FusedConfig(warps=16, rows_per_stage=16, min_blocks=1, cluster=2), 4)
    monkeypatch.setattr(F, "arch_of", lambda dev: "sm_80")
    assert F.cluster_slots(torch.device("cpu"), 2.0, "mcg", "f16", "f16", 16, 4096) is None


def test_no_clusters_before_sm_90():
    """Thread block clusters are sm_90's (their PTX does not assemble for sm_80): an sm_80 build
    ships, tunes and accepts none, and says why; sm_90 and later have them."""
    from escha_jit.kernels import fused
    from escha_jit.kernels.registry import shipped_specs
    assert [fused.has_clusters(a) for a in ("sm_80", "sm_89", "sm_90", "sm_90a", "sm_100", "gfx1201")] == \
        [False, False, True, True, True, False]
    assert not any(s.op == "fused" and s.params.get("cluster", 1) > 1 for s, _ in shipped_specs("sm_80"))
    assert any(s.op == "fused" and s.params.get("cluster", 1) > 1 for s, _ in shipped_specs("sm_90"))
    # the A operand ring (bulk copies on mbarriers) and split clusters likewise
    for field in ("x_ring", "split_cluster"):
        assert not any(s.op == "fused" and s.params.get(field, 0) for s, _ in shipped_specs("sm_80")), field
        assert any(s.op == "fused" and s.params.get(field, 0) for s, _ in shipped_specs("sm_90")), field
    cands = fused_candidates("sm_80", 2.0, 4096, 4096, 16, 108, warps=(16,), rows=(16,), stages=(2,),
                             min_blocks=(1,), xh=(0,), cluster=(1, 2, 4))
    assert cands and {c.cfg.cluster for c in cands} == {1}
    with pytest.raises(ValueError, match="NVIDIA sm_90"):
        fused.spec_for("sm_80", 2.0, "mcg", "f16", "f16", FusedConfig(warps=16, rows_per_stage=16, min_blocks=1,
                                                                      cluster=2))


@pytest.mark.parametrize("M", [1, 3, 8, 9, 16, 24, 64])
@pytest.mark.parametrize("IC,OC", [(128, 128), (384, 640), (2944, 2944), (3584, 18944), (18944, 3584),
                                   (5120, 13824), (8192, 8192), (128, 28672), (3072, 6144), (13824, 5120)])
def test_untuned_choice_is_shipped_and_launchable(M, IC, OC):
    """Whatever the heuristic picks is one of the shipped configurations (CI compiles those), tiles
    IC and OC (clusters), and fits the shared memory a block may take; IC = 128 / 2944 (no 16-row
    stages) falls back to the shape-free default."""
    from escha_jit.kernels import fused
    for (K, cb), slots in itertools.product(((2.0, "mcg"), (4.0, "mul1"), (8.0, "3inst")), (None, _h200_cluster_slots())):
        cfg, launch = _untuned_choice(K, cb, IC, OC, M, cluster_slots=slots)
        assert cfg in fused.default_configs(M, codebook=cb, K=K)
        assert (OC // fused.COLS) % cfg.cluster == 0
        kr = IC // launch.splits
        assert IC % launch.splits == 0 and kr % (16 * cfg.rows_per_stage) == 0
        routed = fused.swap_route(cfg, "nvidia", cb, M)
        assert smem_layout(routed, K, M, kr).total <= 227 * 1024
        if IC % 256:
            assert cfg == fused.default_config(M)


@pytest.mark.parametrize("K,cb,IC,OC,dt,M", [(2.0, "mcg", 4096, 14336, "f16", 16), (2.5, "mul1", 256, 128, "bf16", 3)])
def test_parse_key_inverts_entry_key(K, cb, IC, OC, dt, M):
    from escha_jit.autotune.table import entry_key, m_bucket, parse_key
    assert parse_key(entry_key("fused", K, cb, IC, OC, dt, M)) == ("fused", K, cb, IC, OC, dt, m_bucket(M))


def test_reg_level_reaches_ptxas_and_only_nvidia(tmp_path):
    """FusedConfig.reg_level names its kernel, becomes ptxas' --register-usage-level (in the
    options, so in the cache key), is refused for AMD, and a table keeps entries without it as
    they were (no reg_level key) and with it as tuned."""
    from escha_jit.autotune.candidates import Candidate
    from escha_jit.jit import compile_options
    from escha_jit.kernels.fused import spec_for
    cfg = FusedConfig(warps=8, rows_per_stage=8, stages=3, min_blocks=2, xh=1)
    plain, tuned = (spec_for("sm_90", 3.0, "mcg", "f16", "f16", c) for c in (cfg, FusedConfig(**{**cfg.__dict__, "reg_level": 10})))
    assert compile_options(plain) == [] and compile_options(tuned) == ["--ptxas-options=--register-usage-level=10"]
    assert "reg_level10" in tuned.kernel_name() and "reg_level" not in plain.kernel_name()
    assert Candidate(tuned_cfg := FusedConfig(**{**cfg.__dict__, "reg_level": 0}), FusedLaunch(4)).key().endswith("_rl0_S4")
    with pytest.raises(ValueError, match="reg_level=0 is a hint to NVIDIA's ptxas; got gfx1201"):
        spec_for("gfx1201", 3.0, "mcg", "f16", "f16", tuned_cfg)
    t = TuningTable({}, {"a": Entry(cfg, FusedLaunch(4), 1.0), "b": Entry(tuned_cfg, FusedLaunch(4), 1.0)})
    t.save(str(tmp_path / "t.json"))
    raw = json.load(open(tmp_path / "t.json"))["entries"]
    assert "reg_level" not in raw["a"]["config"] and raw["b"]["config"]["reg_level"] == 0
    assert TuningTable.load(str(tmp_path / "t.json")).entries["b"].cfg == tuned_cfg


# ---------------------------------------------------------------- route entries (which path serves M rows)

def test_route_buckets_and_keys():
    from escha_jit.autotune.table import ROUTE_BUCKETS, parse_key, route_bucket, route_key
    assert route_bucket(17) == 32 and route_bucket(65) == 96 and route_bucket(257) == 320
    assert route_bucket(512) == 512 and route_bucket(513) == 768 and route_bucket(ROUTE_BUCKETS[-1] + 1) is None
    k = route_key(2.5, "mul1", 4096, 14336, "bf16", 512)
    assert k == "route|K2p5|mul1|4096x14336|bf16|M512"
    assert parse_key(k) == ("route", 2.5, "mul1", 4096, 14336, "bf16", 512)


def test_table_routes_round_trip_and_merge(tmp_path):
    from escha_jit.autotune.table import RouteEntry
    a = TuningTable({"device": "a"}, {}, {
        "route|K2|mcg|4096x4096|f16|M96": RouteEntry("fused", {"fused": 30.0, "dense": 33.5}, "dense"),
        "route|K2|mcg|4096x4096|f16|M512": RouteEntry("dense", {"gemm": 61.0, "dense": 40.0}, "dense")})
    p = str(tmp_path / "t.json")
    a.save(p)
    back = TuningTable.load(p)
    assert back.routes == a.routes and back.entries == {}
    b = TuningTable({"device": "b"}, {}, {"route|K2|mcg|4096x4096|f16|M512": RouteEntry("gemm", {"gemm": 1.0})})
    m = back.merged(b)
    assert m.routes["route|K2|mcg|4096x4096|f16|M512"].route == "gemm"          # the newer table wins
    assert m.routes["route|K2|mcg|4096x4096|f16|M96"].route == "fused"
    # a table without routes writes none (older readers see the same file as before)
    TuningTable({}, {}).save(p)
    assert "routes" not in json.load(open(p))


@pytest.mark.parametrize("routes, match", [
    ({"route|K2|mcg|4096x4096|f16|M100": {"route": "dense"}}, "M bucket"),
    ({"fused|K2|mcg|4096x4096|f16|M128": {"route": "dense"}}, "op 'route'"),
    ({"route|K2|mcg|4096x4096": {"route": "dense"}}, "not a route key"),
    ({"route|K2|mcg|4096x4096|f16|M128": {"route": "cublas"}}, "'route' must be one of"),
    ({"route|K2|mcg|4096x4096|f16|M512": {"route": "fused"}}, "fused kernel takes M <= 256"),
    ({"route|K2|mcg|4096x4096|f16|M128": {"route": "dense", "us": {"dense": "fast"}}}, "'us' must map"),
    ({"route|K2|mcg|4096x4096|f16|M128": {"route": "dense", "rule": "x"}}, "'rule' must be one of"),
    ([], "'routes' must be an object"),
])
def test_malformed_route_entries_name_the_entry(tmp_path, routes, match):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"format": 1, "entries": {}, "routes": routes}))
    with pytest.raises(TableError, match=match):
        TuningTable.load(str(p))


def test_shipped_route_entries_pick_their_fastest_measured_route():
    from escha_jit.autotune.table import pick_route
    t = TuningTable.load(shipped_table_path("sm_90"))
    for k, e in t.routes.items():
        assert e.us and e.route in e.us and e.rule in e.us, k     # the rule's route was measured too
        assert e.route == pick_route(e.us, e.rule), k
    assert len(t.routes) >= 4 * 3 * 2 * 2 * 11                     # the PERF.md shapes, K 2/3/4, both codebooks and dtypes
    assert any(e.route != e.rule for e in t.routes.values())


def test_pick_route_keeps_the_rule_within_the_margin():
    from escha_jit.autotune.table import ROUTE_MARGIN, pick_route
    assert pick_route({"dense": 100.0, "gemm": 99.0}, "dense") == "dense"
    assert pick_route({"dense": 100.0, "gemm": 100.0 / (1 + ROUTE_MARGIN) - 0.01}, "dense") == "gemm"
    assert pick_route({"dense": 100.0, "gemm": 90.0, "fused": 95.0}, "fused") == "gemm"
    assert pick_route({"dense": 100.0, "gemm": 90.0}, "fused") == "gemm"        # the rule's route failed
    assert pick_route({"dense": 100.0}, None) == "dense"


def test_warmup_sizes_cover_every_route_bucket_above_the_fused_kernel():
    """warmup() calls each projection at its buckets and, above the fused kernel's MAX_M, once per
    route bucket up to the largest (the coded GEMM and the dense path compile one kernel set for any
    M, and the tuned routes may take either), largest first so scratch is sized once."""
    from escha_jit.autotune.api import warmup_sizes
    assert warmup_sizes((1, 16, 64)) == [64, 16, 1]
    assert warmup_sizes((1, 256)) == [256, 1]
    assert warmup_sizes((1, 4, 2048)) == [2048, 1024, 768, 512, 384, 320, 257, 4, 1]
    assert warmup_sizes((600,)) == [600, 512, 384, 320, 257]


def test_tuned_entry_that_spills_here_gives_way_to_its_runner_up(tmp_path, monkeypatch, caplog):
    """A tuned entry is taken only where its kernel keeps to registers under this machine's compiler
    (another compiler version may allocate the tuner's winner with spills: RESULTS.md session 35):
    else its runner-up, else the heuristic (None), with a warning naming the entry. Real NVRTC
    compiles: 8 resident blocks of 256 threads cap ptxas at 32 registers, which spills under any
    version; the shipped K4 mcg 4096x14336 M = 16 configuration does not."""
    from escha_jit.autotune.table import _cfg_json
    from escha_jit.ops.fused import local_memory_bytes, table_choice
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    good = FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=3, min_blocks=1, xh=1)
    spilling = FusedConfig(warps=8, m_tiles=1, rows_per_stage=16, stages=3, min_blocks=8, xh=1)
    args = ("sm_90", 4.0, "mcg", "f16", "f16")
    assert local_memory_bytes(*args, spilling) > 0 and local_memory_bytes(*args, good) == 0
    S1, S2 = FusedLaunch(1), FusedLaunch(2)
    choose = lambda e: table_choice("sm_90", 4.0, "mcg", 4096, "f16", "f16", 16, e, "fused|K4|mcg|4096x14336|f16|M16")
    ru = lambda cfg, launch: {"runner_up": {"config": _cfg_json(cfg), "launch": {"splits": launch.splits}, "us": 26.5}}
    assert choose(Entry(good, S1, 25.8, ru(spilling, S2))) == (good, S1, "table")
    with caplog.at_level("WARNING", logger="escha_jit"):
        assert choose(Entry(spilling, S1, 25.8, ru(good, S2))) == (good, S2, "table runner-up")
    assert "fused|K4|mcg|4096x14336|f16|M16 table" in caplog.text and "min_blocks=8" in caplog.text
    assert choose(Entry(spilling, S1, 25.8, ru(spilling, S2))) is None
    assert choose(Entry(spilling, S1, 25.8)) is None
    # a runner-up that does not tile the call (IC / S not a multiple of 16 * rows_per_stage) is passed over
    assert choose(Entry(spilling, S1, 25.8, ru(good, FusedLaunch(32)))) is None
    # compiling off (a deployment's prebuilt cache): a winner that is not there is passed over by name
    monkeypatch.setenv("ESCHA_JIT_NO_COMPILE", "1")
    other = FusedConfig(warps=4, m_tiles=1, rows_per_stage=16, stages=3, min_blocks=1, xh=1)
    caplog.clear()
    with caplog.at_level("WARNING", logger="escha_jit"):
        assert choose(Entry(other, S1, 25.8, ru(good, S2))) == (good, S2, "table runner-up")
    assert "warps=4" in caplog.text and "not taken" in caplog.text

"""tune() and warmup() on the GPU (skipped without one)."""
import torch

import escha_jit
from escha_jit.autotune.table import TuningTable, user_table_path
from escha_jit.nn import EschaLinear
from escha_jit.ops import fused as F
from escha_jit.synth import random_layer
from conftest import gpu

pytestmark = gpu


def test_tune_writes_table_and_dispatch_uses_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    layers = torch.nn.ModuleList([EschaLinear(random_layer(1024, 512, 2.0, "mcg", seed=1)),
                                  EschaLinear(random_layer(512, 1024, 3.5, "mul1", seed=2))]).cuda()
    rep = escha_jit.tune(layers, m_buckets=(1, 4), budget_s=2.0, progress=False, route_buckets=())
    assert len(rep.rows) == 4 and all(r.best_us <= r.heuristic_us * 1.0001 for r in rep.rows)
    t = TuningTable.load(user_table_path("sm_90"))
    assert len(t.entries) == 4 and t.provenance["device"]
    assert all(e.launch.blocks_per_sm >= 1 for e in t.entries.values())   # the occupancy each was timed at
    F._PLANS.clear()
    x = torch.randn(3, 1024, device="cuda").half()
    layers[0](x)
    plans = [p for k, p in F._PLANS.items() if k[1] == 2.0 and k[7] == 3]
    assert plans and plans[0].source == "table"
    layers[0](torch.randn(4, 1024, device="cuda").half())          # the M = 4 bucket's own M
    p4 = [p for k, p in F._PLANS.items() if k[1] == 2.0 and k[7] == 4]
    assert p4 and p4[0].smem == p4[0].layout.total    # the kernel has its stamped occupancy: nothing padded


def test_interrupted_tune_keeps_what_it_measured(tmp_path, monkeypatch):
    """A tune() stopped in its second problem (here a KeyboardInterrupt raised from the search, as
    Ctrl-C would) has written the first problem's entry to the user table, loadable, and the user
    table's earlier entries are kept."""
    import pytest
    from escha_jit.autotune import api
    from escha_jit.autotune.table import Entry

    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    path = user_table_path("sm_90")
    earlier = TuningTable({"note": "earlier"}, {"fused|K4|mcg|256x256|f16|M1": Entry(
        F.FusedConfig(warps=4, rows_per_stage=4, stages=2), F.FusedLaunch(1), 5.0, {})})
    earlier.save(path)
    real, calls = api.successive_halving, []

    def stop_in_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "successive_halving", stop_in_second)
    layers = torch.nn.ModuleList([EschaLinear(random_layer(1024, 512, 2.0, "mcg", seed=1))]).cuda()
    with pytest.raises(KeyboardInterrupt):
        escha_jit.tune(layers, m_buckets=(1, 4), budget_s=1.0, progress=False, route_buckets=())
    t = TuningTable.load(path)
    assert sorted(t.entries) == ["fused|K2|mcg|1024x512|f16|M1", "fused|K4|mcg|256x256|f16|M1"]
    assert t.entries["fused|K4|mcg|256x256|f16|M1"] == earlier.entries["fused|K4|mcg|256x256|f16|M1"]


def test_warmup_then_capture():
    layers = torch.nn.ModuleList([EschaLinear(random_layer(1024, 512, 4.0, "3inst", seed=3))]).cuda()
    n = escha_jit.warmup(layers, m_buckets=(1, 16, 64))
    assert n == 3
    x = torch.randn(16, 1024, device="cuda").half()
    y0 = layers[0](x)
    out = torch.empty_like(y0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out.copy_(layers[0](x))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, y0)


def test_tune_measures_routes_and_linear_follows_them(tmp_path, monkeypatch):
    """tune() times the fused kernel, the coded GEMM (sm_90) and the dense-weight path per route
    bucket, records the fastest, and ops.linear then takes that path: the same bits as calling it."""
    from escha_jit.autotune.routes import ROUTE_FNS
    from escha_jit.autotune.table import pick_route
    from escha_jit.ops.linear import linear, route_for
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    layer = EschaLinear(random_layer(1024, 2048, 2.0, "mcg", seed=4)).cuda()
    rep = escha_jit.tune([layer], m_buckets=(), route_buckets=(96, 320), dtypes=(torch.float16, torch.bfloat16),
                         progress=False)
    t = TuningTable.load(user_table_path("sm_90"))
    assert sorted(t.routes) == sorted(r.key for r in rep.rows) and len(t.routes) == 4 and not t.entries
    w = layer.weights
    for key, e in t.routes.items():
        assert e.route == pick_route(e.us, e.rule) and e.rule in e.us
        assert set(e.us) >= {"dense", "gemm"} and ("fused" in e.us) == key.endswith("M96")
        M, dt = int(key.split("|M")[1]), torch.float16 if "|f16|" in key else torch.bfloat16
        assert route_for(w.code.device, w, dt, M) == e.route
        x = torch.randn(M, 1024, device="cuda").to(dt)
        assert torch.equal(linear(x, w), ROUTE_FNS[e.route](x, w)), key


def test_shipped_entries_compute_what_the_untuned_plan_computes():
    """Every entry of the shipped table for this GPU's arch runs its configuration at its own shape
    and M bucket, and gives the untuned plan's outputs (the same products, summed in another
    order: within one output rounding). The tuner only times candidates; this checks what it
    picked."""
    import os
    from escha_jit.autotune.api import heuristic_candidate
    from escha_jit.autotune.candidates import Candidate
    from escha_jit.autotune.measure import Problem, candidate_specs
    from escha_jit.autotune.table import parse_key, shipped_table_path
    from escha_jit.offline import compile_all
    from escha_jit.ops.common import arch_of
    from conftest import rel_rms
    dev = torch.device("cuda")
    path = shipped_table_path(arch_of(dev))
    if not os.path.exists(path):
        import pytest
        pytest.skip(f"no shipped table for {arch_of(dev)}")
    table = TuningTable.load(path)
    sms = F.sm_count(dev)
    by_layer: dict = {}
    for key, e in sorted(table.entries.items()):
        k = parse_key(key)
        by_layer.setdefault((k.IC, k.OC, k.K, k.codebook), []).append((k, e))
    dts = {"f16": torch.float16, "bf16": torch.bfloat16}
    heurs, specs = {}, {}
    for entries in by_layer.values():
        for k, e in entries:
            heurs[k] = heuristic_candidate(Problem(k.IC, k.OC, k.K, k.codebook, k.M, dts[k.dtype]), sms, arch_of(dev))
            specs.update(dict(candidate_specs(arch_of(dev), k.K, k.codebook, k.dtype, [Candidate(e.cfg, e.launch), heurs[k]])))
    bad = [r for r in compile_all(arch_of(dev), specs=list(specs.items()), jobs=os.cpu_count()) if not r.ok]
    assert not bad, [(str(r.spec), r.error or r.problems) for r in bad]
    for (IC, OC, K, cb), entries in by_layer.items():
        w = random_layer(IC, OC, K, cb, seed=5).to(dev)
        for k, e in entries:
            dt = dts[k.dtype]
            x = torch.randn(k.M, IC, device=dev).to(dt)
            heur = heurs[k]
            want = F.fused_linear(x, w, cfg=heur.cfg, launch=heur.launch)
            got = F.fused_linear(x, w, cfg=e.cfg, launch=e.launch)
            assert rel_rms(got.float(), want.float()) < (2e-3 if dt == torch.bfloat16 else 3e-4), k
        del w
        torch.cuda.empty_cache()


def test_refine_split_clusters_adopts_and_dispatch_runs_it(tmp_path, monkeypatch):
    """tune()'s split-cluster step (autotune/refine.py with split_clusters.cluster_variants) times a
    winner's split-cluster twins against it; at a margin every variant clears, the fastest replaces
    the entry (with every time measured in its extras), dispatch then runs it from the user table,
    and it computes the bits of the workspace route at its split count; at a margin none clears,
    the entry is kept."""
    from escha_jit.autotune.api import heuristic_candidate
    from escha_jit.autotune.measure import Problem
    from escha_jit.autotune.refine import refine
    from escha_jit.autotune.split_clusters import STEP, cluster_variants
    from escha_jit.autotune.table import Entry, entry_key, tables
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    dev = torch.device("cuda")
    p = Problem(2048, 4096, 2.0, "mcg", 1, torch.float16)
    heur = heuristic_candidate(p, F.sm_count(dev), "sm_90")
    key = entry_key("fused", p.K, p.codebook, p.IC, p.OC, "f16", p.M)
    base = Entry(heur.cfg, heur.launch, 10.0, {"heuristic_us": 10.0})
    assert cluster_variants("sm_90", p, base), heur          # the test needs variants to time

    kept = TuningTable({"arch": "sm_90"}, {key: base})
    rows = refine(kept, [p], STEP, cluster_variants, margin=1.0, device=dev, rounds=1, progress=False)
    assert len(rows) == 1 and rows[0].chosen == "" and kept.entries[key] == base
    assert rows[0].base_us > 0 and rows[0].variant_us and all("_sc_S" in k for k in rows[0].variant_us)

    table = TuningTable({"arch": "sm_90"}, {key: base})
    rows = refine(table, [p], STEP, cluster_variants, margin=-1.0, device=dev, rounds=1, progress=False)
    e = table.entries[key]
    assert rows[0].chosen == min(rows[0].variant_us, key=rows[0].variant_us.get)
    assert e.cfg.split_cluster == 1 and rows[0].chosen.endswith(f"_sc_S{e.launch.splits}")
    assert e.launch.blocks_per_sm >= 1                        # stamped: the occupancy it was timed at
    assert set(e.extra["split_cluster_us"]) == {*rows[0].variant_us, heur.key()} and e.extra["heuristic_us"] == 10.0
    table.save(user_table_path("sm_90"))
    tables().invalidate()
    F._PLANS.clear()
    w = random_layer(2048, 4096, 2.0, "mcg", seed=6).to(dev)
    x = torch.randn(1, 2048, device=dev).half()
    got = F.fused_linear(x, w)
    plans = [pl for k, pl in F._PLANS.items() if k[1] == 2.0 and k[7] == 1]
    assert plans and plans[0].source == "table" and plans[0].cfg.split_cluster == 1
    import dataclasses
    want = F.fused_linear(x, w, cfg=dataclasses.replace(e.cfg, split_cluster=0), launch=F.FusedLaunch(e.launch.splits))
    assert torch.equal(got, want)

"""Dispatch decisions that need no GPU: the swapped fp16 route's reach, the prefill route
variable, the coded GEMM's spec / shared-memory / grid rules."""
import dataclasses

import pytest

from escha_jit import env
from escha_jit.kernels import fused, gemm
from escha_jit.kernels.registry import NVIDIA_SMEM_BYTES, check_fused_smem, shipped_specs
from escha_jit.trellis import all_rate_codebooks


@pytest.mark.parametrize("xh", [0, 1])
@pytest.mark.parametrize("cb", ["mcg", "3inst", "mul1"])
def test_swapped_route_takes_m_up_to_8_with_either_a_side(xh, cb):
    cfg = fused.FusedConfig(warps=4, m_tiles=1, rows_per_stage=8, stages=3, xh=xh)
    for M in range(1, 17):
        routed = fused.swap_route(cfg, "nvidia", cb, M)
        assert routed.swap == (M <= 8), (M, routed)
        assert routed.xh == xh
    assert fused.swap_route(cfg, "amd", cb, 1).swap == 0                     # gfx12: never
    if cb == "mul1":
        assert fused.swap_route(cfg, "nvidia", cb, 1, act_quant="int8").swap == 0


def test_swapped_spec_with_prep_kernel_renders_the_expansion():
    from escha_jit.render import render
    cfg = fused.FusedConfig(warps=8, m_tiles=1, rows_per_stage=8, stages=3, xh=1, swap=1)
    s = fused.spec_for("sm_90", 2.0, "mul1", "f16", "f16", cfg)
    src = " ".join(render(s, fused.render_extra(s)).split())
    assert "12288, true, false, false, true, 1, 0, false> Impl;" in src             # XH, not I8 / DOT, SW, no cluster, no A ring
    with pytest.raises(ValueError, match="swap=1 needs NVIDIA"):
        fused.spec_for("gfx1201", 2.0, "mul1", "f16", "f16", cfg)


def test_xh_chunks_by_waves():
    """The prep kernel's A operand (xh=1, sm_90) comes in XH_CHUNKS chunks where every block of
    the launch is resident at once, else in 2 (H200, 8192x28672 M = 16: RESULTS.md session 28)."""
    assert fused.x_chunks(128, 132) == fused.x_chunks(132, 132) == fused.XH_CHUNKS == 8
    assert fused.x_chunks(133, 132) == fused.x_chunks(896, 264) == 2


def test_sixteen_waves_are_two_k_slices_of_the_fp16_route():
    cfg = fused.FusedConfig(warps=16, rows_per_stage=8, stages=3, min_blocks=1, xh=1)
    eight = fused.FusedConfig(warps=8, rows_per_stage=8, stages=3, min_blocks=1, xh=1)
    # every wave streams its own ring: twice the ring bytes of 8 waves
    assert fused.smem_layout(cfg, 3.0, 16, 1024).tr_bytes == 2 * fused.smem_layout(eight, 3.0, 16, 1024).tr_bytes
    for M in (1, 4, 8):                                        # never the swapped route
        assert fused.swap_route(cfg, "nvidia", "mcg", M).swap == 0
    with pytest.raises(ValueError, match="warps=16"):
        fused.spec_for("sm_90", 2.0, "mul1", "f16", "f16", cfg, act_quant="int8")
    with pytest.raises(ValueError, match="1, 2, 4, 8"):
        fused.FusedConfig(warps=32)


def test_prefill_route_variable(monkeypatch):
    monkeypatch.delenv("ESCHA_JIT_PREFILL", raising=False)
    assert env.prefill_route() == "dense"
    monkeypatch.setenv("ESCHA_JIT_PREFILL", " GEMM ")
    assert env.prefill_route() == "gemm"
    monkeypatch.setenv("ESCHA_JIT_PREFILL", "cublas")
    with pytest.raises(ValueError, match="ESCHA_JIT_PREFILL='cublas'"):
        env.prefill_route()


def test_prep_words_variant_is_nvidia_only():
    """The words prep kernel (the swapped route's A side) ships for NVIDIA fp16 / bf16 only, and
    asking for it elsewhere names the option."""
    from escha_jit.kernels import prep
    assert [s.params.get("words", 0) for s in prep.specs_for("sm_90", "bf16")] == [0, 1]
    assert [s.params.get("words", 0) for s in prep.specs_for("sm_90", "f32")] == [0]
    assert [s.params.get("words", 0) for s in prep.specs_for("gfx1201", "f16")] == [0]
    with pytest.raises(ValueError, match="words=True.*gfx1201"):
        prep.spec_for("gfx1201", "f16", words=True)


def test_prep_row_segments():
    """Rows of decode's launches are split so that each wave rotates one 128-feature block, with at
    most two blocks per SM in all; rows of up to 32 blocks and prefill's rows stay whole; segments
    tile the row with none empty."""
    from escha_jit.kernels import prep
    assert prep.segments(16, 14336, 132) == (7, 16)          # 112 blocks of 16 waves
    assert prep.segments(1, 28672, 132) == (14, 16)
    assert prep.segments(16, 28672, 132) == (14, 16)         # 224 blocks <= 2 per SM
    assert prep.segments(64, 14336, 132) == (4, 28)          # capped at 264 blocks
    assert prep.segments(256, 14336, 132) == (1, 112)
    assert prep.segments(300, 14336, 132) == (1, 112)        # prefill: one block per row
    assert prep.segments(4, 1024, 132) == (1, 8)             # one segment's worth
    assert prep.segments(16, 4096, 132) == (1, 32)           # two would lose to the atomic
    assert prep.segments(16, 8192, 132) == (4, 16)
    assert prep.segments(1, 4096, 132, force=3) == (3, 11)   # 11 + 11 + 10
    assert prep.segments(1, 4096, 132, force=100) == (32, 1)
    for M in (1, 3, 16, 100, 256, 257):
        for IC in (128, 640, 4096, 14336, 28672):
            for force in (None, 2, 5, 7):
                P, seg = prep.segments(M, IC, 132, force)
                nkb = IC // 128
                assert P >= 1 and (P - 1) * seg < nkb <= P * seg, (M, IC, force)


def test_prep_threads_per_launch():
    from escha_jit.kernels import prep
    assert prep.threads_for(1) == prep.threads_for(256) == prep.THREADS == 512      # decode: all waves on a row
    assert prep.threads_for(257) == prep.threads_for(4096) == 128                    # prefill: more rows per SM


def test_gemm_specs_target_sm90a_and_fit_shared_memory():
    s = gemm.spec_for("sm_90", 4.0, "mcg", "bf16")
    assert s.arch == "sm_90a" and s.params == {"tokens": 256, "stages": 4}
    assert gemm.variant(s, stages=3).params == {"tokens": 256, "stages": 3}
    with pytest.raises(ValueError, match="wgmma"):
        gemm.spec_for("sm_100", 4.0, "mcg", "f16")
    with pytest.raises(ValueError, match="gfx1201"):
        gemm.spec_for("gfx1201", 4.0, "mcg", "f16")
    for K, cb in all_rate_codebooks():
        g = gemm.spec_for("sm_90", K, cb, "f16")
        # the ring: 4 x (256 + 128) x 64 fp16, the producer's word rings, the ring's 8 mbarriers and the
        # codebook mask (80 bytes), 1 KiB alignment
        assert gemm.smem_bytes(g) == 4 * 384 * 128 + 4 * 4 * 8 * int(4 * round(2 * K)) * 4 + 80 + 1024
        assert gemm.smem_bytes(g) <= NVIDIA_SMEM_BYTES
    assert gemm.padded_rows(s, 1) == 256 and gemm.padded_rows(s, 256) == 256 and gemm.padded_rows(s, 257) == 512
    assert gemm.grid(s, 1500, 4096) == (32, 6)
    t192 = gemm.variant(s, tokens=192)
    assert t192.params == {"tokens": 192, "stages": 4}
    assert gemm.padded_rows(t192, 200) == 384 and gemm.grid(t192, 200, 4096) == (32, 2)
    with pytest.raises(ValueError, match="tokens=100"):
        gemm.spec_for("sm_90", 4.0, "mcg", "f16", tokens=100)


def test_gemm_pairs_token_blocks_where_they_pair_up():
    """share_for: clusters of 2 token blocks (each decodes half of every stage's weights) where
    the call's token blocks are even, single blocks otherwise; the grid turns to put clusters on x."""
    assert [gemm.share_for(M) for M in (1, 256, 257, 512, 513, 768, 769, 1024, 4096)] == [1, 1, 2, 2, 1, 1, 2, 2, 2]
    s2 = gemm.spec_for("sm_90", 2.0, "mcg", "f16", share=gemm.share_for(1024))
    assert gemm.share_of(s2) == 2 and gemm.grid(s2, 1024, 14336) == (4, 112)
    with pytest.raises(ValueError, match="share"):
        gemm.spec_for("sm_90", 2.0, "mcg", "f16", share=3)


def test_gemm_shipped_for_sm90_only():
    ops90 = [s for s, _ in shipped_specs("sm_90") if s.op == "gemm"]
    assert len(ops90) == len(all_rate_codebooks()) * len(gemm.OUT_DTYPES) * len(gemm.shares())
    assert {gemm.share_of(s) for s in ops90} == set(gemm.shares()) == {1, 2}
    assert all(s.arch == "sm_90a" for s in ops90)
    assert not [s for s, _ in shipped_specs("gfx1201") if s.op == "gemm"]


def test_cluster_configs_are_the_fp16_routes():
    """FusedConfig.cluster: NVIDIA's fp16 route with the in-kernel prologue only; not part of the
    spec at 1 (keys unchanged), rendered as the template's CL; the swapped route stays off."""
    from escha_jit.render import render
    cfg = fused.FusedConfig(warps=16, m_tiles=1, rows_per_stage=16, stages=2, min_blocks=1, cluster=2)
    assert "cluster" not in fused.FusedConfig().tile() and cfg.tile()["cluster"] == 2
    s = fused.spec_for("sm_90", 3.0, "mcg", "f16", "f16", cfg)
    assert ", 2, 0, false> Impl;" in " ".join(render(s, fused.render_extra(s)).split())
    assert fused.swap_route(cfg, "nvidia", "mcg", 4).swap == 0
    for bad, why in ((dict(xh=1), "in-kernel prologue"), (dict(cluster=3), "1, 2, 4 or 8")):
        with pytest.raises(ValueError, match=why):
            fused.spec_for("sm_90", 3.0, "mcg", "f16", "f16", dataclasses.replace(cfg, **bad))
    with pytest.raises(ValueError, match="in-kernel prologue"):
        fused.spec_for("gfx1201", 3.0, "mcg", "f16", "f16", cfg)
    with pytest.raises(ValueError, match="in-kernel prologue"):
        fused.spec_for("sm_90", 3.0, "mul1", "f16", "f16", dataclasses.replace(cfg, warps=8), act_quant="int8")


def test_cluster_candidates():
    from escha_jit.autotune.candidates import fused_candidates
    c16 = fused_candidates("sm_90", 2.0, 4096, 4096, 16, 132, warps=(16,), rows=(16,), stages=(2,), min_blocks=(1,),
                           xh=(0, 1), cluster=(1, 2, 4))
    assert {(c.cfg.xh, c.cfg.cluster) for c in c16} == {(0, 1), (0, 2), (0, 4), (1, 1)}
    assert any(c.key().endswith("_x0_c2_S4") for c in c16)
    # M <= 8 (the swapped route), M > 16, AMD, and OC/128 not a multiple: no clusters
    assert {c.cfg.cluster for c in fused_candidates("sm_90", 2.0, 4096, 4096, 8, 132, cluster=(1, 2))} == {1}
    assert {c.cfg.cluster for c in fused_candidates("sm_90", 2.0, 4096, 4096, 17, 132, cluster=(1, 2))} == {1}
    assert {c.cfg.cluster for c in fused_candidates("gfx1201", 2.0, 4096, 4096, 16, 32, cluster=(1, 2))} == {1}
    assert {c.cfg.cluster for c in fused_candidates("sm_90", 2.0, 4096, 384, 16, 132, cluster=(1, 2))} == {1}


def test_cuda_launch_attributes_for_clusters():
    """The launch attributes cuLaunchKernelEx gets (built once per (pdl, cluster)), and the grid
    check before any driver call; needs cuda-bindings (the cuda extra CI installs), not a GPU."""
    from escha_jit.runtime.cuda import CudaRuntime
    rt = CudaRuntime()
    ids = rt.drv.CUlaunchAttributeID
    both = rt._launch_attrs(True, 2)
    assert [a.id for a in both] == [ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                                    ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION]
    assert (both[1].value.clusterDim.x, both[1].value.clusterDim.y, both[1].value.clusterDim.z) == (2, 1, 1)
    assert rt._launch_attrs(True, 2) is both
    assert [a.id for a in rt._launch_attrs(False, 4)] == [ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION]
    assert [a.id for a in rt._launch_attrs(True, 1)] == [ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION]
    with pytest.raises(ValueError, match="grid x 3 is not a multiple of the cluster size 2"):
        rt.launch_ex(None, (3, 1, 1), (256, 1, 1), 0, 0, (), (), "k", True, 2)


def test_fused_smem_over_the_block_limit_is_refused_by_name():
    """An explicit configuration whose layout exceeds one block's shared memory fails in plan_for
    with its name (found as a bare cuFuncSetAttribute INVALID_VALUE in session 32: 16 waves, 3
    stages of 16 rows, K4, M = 16, 4096 features per block: 239248 bytes on sm_90)."""
    cfg = fused.FusedConfig(warps=16, rows_per_stage=16, stages=3, min_blocks=1)
    total = fused.smem_layout(cfg, 4.0, 16, 4096).total
    assert total == 239248 > NVIDIA_SMEM_BYTES
    with pytest.raises(ValueError, match="239248 bytes of shared memory"):
        check_fused_smem("sm_90", cfg, total)
    check_fused_smem("sm_90", cfg, fused.smem_layout(cfg, 4.0, 16, 2048).total)      # half the K range fits
    with pytest.raises(ValueError, match="gfx1201"):
        check_fused_smem("gfx1201", cfg, fused.smem_layout(cfg, 4.0, 16, 2048).total)


def test_block_smem_limits_per_arch():
    """The opt-in shared memory per block of the CUDA guide's compute-capability table; gfx12's LDS
    per workgroup. One table (kernels.limits) serves plan_for's check, the heuristic and the tuner."""
    from escha_jit.autotune import candidates
    from escha_jit.kernels.limits import block_smem_limit
    from escha_jit.kernels.registry import smem_limit
    want = {"sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_89": 99, "sm_90": 227, "sm_90a": 227,
            "sm_100": 227, "sm_120": 99, "gfx1201": 64}
    for arch, kib in want.items():
        assert block_smem_limit(arch) == smem_limit(arch) == kib * 1024, arch
    assert fused.smem_caps("sm_90") == (200 * 1024, 227 * 1024)
    assert fused.smem_caps("sm_89") == (99 * 1024, 99 * 1024)
    assert fused.smem_caps("gfx1201") == (40 * 1024, 64 * 1024)
    # the tuner's candidates on a 99 KiB GPU all fit it (they were capped at 99 KiB by a second table)
    cands = candidates.fused_candidates("sm_89", 3.0, 4096, 14336, 16, 128, warps=(8, 16), rows=(8, 16),
                                        stages=(2, 3), min_blocks=(1, 2))
    assert cands and all(fused.smem_layout(c.cfg, 3.0, 16, 4096 // c.launch.splits).total <= 99 * 1024
                         for c in cands)


@pytest.mark.parametrize("arch,sms", [("sm_89", 128), ("sm_86", 84), ("sm_120", 170), ("sm_90", 132)])
def test_untuned_plans_fit_the_gpus_shared_memory(arch, sms):
    """The heuristic plan (config and split, as ops.fused.plan_for builds it without a table entry)
    of every decode bucket fits one block's shared memory on ``arch``. On 99 KiB GPUs (RTX 4090 / 3090
    / 5090 class) it used to size launches for sm_90's 227 KiB: 38 of these 84 cases over 99 KiB
    (4096x14336 K2 at M = 16: 169 KiB), launches the driver refuses."""
    from escha_jit.kernels.registry import fused_fits
    from escha_jit.spec import vendor_of
    _, block = fused.smem_caps(arch)
    vendor = vendor_of(arch)
    worst, handled = 0, set()
    for IC, OC in ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 28672)):
        for K in (2.0, 4.0, 8.0):
            for M in (1, 4, 8, 9, 16, 32, 64, 256):
                if not fused_fits(arch, fused.default_config(M, vendor), K, M=M):
                    continue              # ops.fused.fused_handles: the call takes the dense-weight path
                handled.add((K, M))
                cfg = fused.default_config_for(K, "mcg", IC, OC, M, sms, arch)
                routed = fused.swap_route(cfg, vendor, "mcg", M)
                launch = fused.default_launch(routed, K, IC, OC, M, sms, arch)
                total = fused.smem_layout(routed, K, M, IC // launch.splits).total
                check_fused_smem(arch, routed, total)
                worst = max(worst, total)
    assert worst > 64 * 1024          # the check above is not vacuous: large layouts are in the set
    # every rate keeps the fused kernel up to M = 64; only M = 256 at K = 8 leaves it on 99 KiB GPUs
    assert all((K, M) in handled for K in (2.0, 4.0, 8.0) for M in (1, 4, 8, 9, 16, 32, 64))
    assert ((8.0, 256) in handled) == (block >= 101 * 1024)


def test_mid_m_calls_take_the_coded_gemm_where_its_blocks_fill_the_gpu():
    """Above the fused kernel's M and up to two token blocks (512 rows), ops.linear sends a layer to
    the coded GEMM where its OC / 128 blocks fill >= 3/4 of the SMs (H200: 0.50-0.61x the dense
    path's time at 112 / 224 column groups up to 256 rows, 0.77-0.97x at 384 / 512, 1.6-1.9x at
    32 groups; RESULTS.md sessions 33, 34)."""
    sms = 132
    assert gemm.takes_mid_m(14336, 65, sms) and gemm.takes_mid_m(28672, 256, sms)
    assert not gemm.takes_mid_m(4096, 128, sms)                      # 32 groups: the dense path
    assert gemm.takes_mid_m(28672, 512, sms)                         # two token blocks
    assert not gemm.takes_mid_m(28672, 513, sms)                     # three: the dense path
    assert gemm.takes_mid_m(128 * 99, 100, sms) and not gemm.takes_mid_m(128 * 98, 100, sms)


@pytest.fixture
def fake_h200(monkeypatch, tmp_path):
    """ops.linear's routing on a device that reads as an sm_90 GPU of 132 SMs, with a user tuning
    table in a temporary cache dir (no GPU: only the decision is exercised)."""
    import torch
    from escha_jit.autotune import table as T
    from escha_jit.ops import common, linear as L
    monkeypatch.setattr(common, "_ARCH", {0: "sm_90"})
    monkeypatch.setattr(L, "sm_count", lambda dev: 132)
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(T, "shipped_table_path", lambda arch: str(tmp_path / "none.json"))
    monkeypatch.setattr(T, "_tables", None)

    def with_routes(routes: dict) -> None:
        T.TuningTable({"device": "test"}, {}, {k: T.RouteEntry(r, {r: 1.0}) for k, r in routes.items()}).save(
            T.user_table_path("sm_90"))
        T.tables().invalidate()
    return torch.device("cuda", 0), with_routes


def _weights(IC, OC, K=2.0, cb="mcg"):
    import torch
    from escha_jit.reference import LinearWeights
    from escha_jit.trellis import tile_words
    return LinearWeights(torch.zeros(IC // 16, OC // 16, tile_words(K), dtype=torch.int16), K, cb,
                         torch.ones(IC, dtype=torch.float16), torch.ones(OC, dtype=torch.float16))


def test_route_entries_decide_above_the_decode_sizes(fake_h200, monkeypatch):
    """A tuned route entry picks the path for its bucket; decode sizes, M above the last bucket,
    shapes / dtypes / rates without an entry, and ESCHA_JIT_PREFILL=gemm above 256 rows keep the
    built-in rule."""
    import torch
    from escha_jit.ops.linear import route_for, rule_route
    dev, with_routes = fake_h200
    w = _weights(4096, 4096)
    f16, bf16 = torch.float16, torch.bfloat16
    # the rule on this layer: fused to 64 rows, then dense (32 column groups do not fill 132 SMs)
    assert [rule_route(dev, 2.0, 4096, M) for M in (16, 64, 65, 300, 2000)] == ["fused"] * 2 + ["dense"] * 3
    with_routes({"route|K2|mcg|4096x4096|f16|M32": "dense", "route|K2|mcg|4096x4096|f16|M96": "fused",
                 "route|K2|mcg|4096x4096|f16|M320": "gemm", "route|K2|mcg|4096x4096|f16|M1024": "gemm",
                 "route|K2|mcg|4096x4096|bf16|M96": "dense"})
    assert route_for(dev, w, f16, 16) == "fused"                  # decode: always the fused kernel
    assert route_for(dev, w, f16, 17) == "dense"                  # bucket 32
    assert route_for(dev, w, f16, 65) == route_for(dev, w, f16, 96) == "fused"       # bucket 96
    assert route_for(dev, w, bf16, 96) == "dense"                 # the dtype is part of the key
    assert route_for(dev, w, f16, 97) == "dense"                  # bucket 128: no entry, the rule
    assert route_for(dev, w, f16, 257) == route_for(dev, w, f16, 320) == "gemm"
    assert route_for(dev, w, f16, 1000) == "gemm" and route_for(dev, w, f16, 1025) == "dense"
    assert route_for(dev, _weights(4096, 4096, 3.0), f16, 300) == "dense"        # another rate
    assert route_for(dev, _weights(4096, 4096, 2.0, "mul1"), f16, 300) == "dense"  # another codebook
    monkeypatch.setenv("ESCHA_JIT_PREFILL", "dense")
    assert route_for(dev, w, f16, 300) == "gemm"
    monkeypatch.setenv("ESCHA_JIT_PREFILL", "gemm")               # the user's explicit choice wins
    with_routes({"route|K2|mcg|4096x4096|f16|M320": "dense", "route|K2|mcg|4096x4096|f16|M256": "dense"})
    assert route_for(dev, w, f16, 300) == "gemm" and route_for(dev, w, f16, 256) == "dense"


def test_route_entries_that_cannot_run_here_fall_back_to_the_rule(fake_h200, monkeypatch):
    """An entry for the coded GEMM on a GPU without it (or the fused kernel at an M whose untuned
    plan does not fit shared memory) is ignored: the rule decides."""
    import torch
    from escha_jit.ops import linear as L
    dev, with_routes = fake_h200
    w = _weights(4096, 28672)
    with_routes({"route|K2|mcg|4096x28672|f16|M320": "gemm", "route|K2|mcg|4096x28672|f16|M128": "fused"})
    assert L.route_for(dev, w, torch.float16, 300) == "gemm"
    assert L.route_for(dev, w, torch.float16, 128) == "fused"
    monkeypatch.setattr(L, "gemm_available", lambda dev: False)
    assert L.route_for(dev, w, torch.float16, 300) == "dense"
    monkeypatch.setattr(L, "fused_fits_call", lambda dev, K, M: False)
    assert L.route_for(dev, w, torch.float16, 128) == "dense"


@pytest.mark.parametrize("option, value, match", [
    ("--route-buckets", "96,x", "--route-buckets '96,x': expected comma-separated integers"),
    ("--route-buckets", "96,100", r"--route-buckets \[100\]: each must be one of"),
    ("--m-buckets", "1;4", "--m-buckets '1;4': expected comma-separated integers"),
])
def test_tune_cli_names_the_bad_bucket_option(tmp_path, option, value, match):
    """escha-jit tune refuses malformed bucket lists before it opens the checkpoint or a GPU."""
    from escha_jit.cli import main
    with pytest.raises(SystemExit, match=match):
        main(["tune", str(tmp_path / "no-checkpoint"), option, value])

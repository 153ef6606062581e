"""Checkpoint IO: round trips of both kinds, and one test per validation rule (FORMAT.md 6)."""
import json
import os
import struct

import pytest
import torch

from escha_jit import reference as R
from escha_jit.format import (INDEX, SINGLE, CheckpointError, open_checkpoint, pack_sign_bits, unpack_sign_bits,
                              write_checkpoint)
from escha_jit.safetensors_io import SafetensorsFile, load_all, save_file
from escha_jit.synth import make_checkpoint, random_layer

Q = "model.layers.0.self_attn.q_proj"
K_ = "model.layers.0.self_attn.k_proj"
UP = "model.layers.0.mlp.up_proj"


@pytest.fixture
def escha_dir(tmp_path):
    d = tmp_path / "escha"
    make_checkpoint(d, "escha", seed=1)
    return d


@pytest.fixture
def exl3_dir(tmp_path):
    d = tmp_path / "exl3"
    make_checkpoint(d, "exl3", seed=2)
    return d


def rewrite(d, edit_tensors=None, edit_config=None):
    """Load a single-file checkpoint, let the callbacks edit it, write it back."""
    tensors = load_all(os.path.join(d, SINGLE))
    cfg = json.load(open(os.path.join(d, "config.json")))
    if edit_tensors:
        edit_tensors(tensors)
    if edit_config:
        edit_config(cfg)
    os.remove(os.path.join(d, SINGLE))
    write_checkpoint(d, cfg, tensors)


def expect_error(d, *fragments):
    with pytest.raises(CheckpointError) as ei:
        open_checkpoint(d)
    msg = str(ei.value)
    for f in fragments:
        assert f in msg, msg
    return ei.value


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("kind", ["escha", "exl3"])
@pytest.mark.parametrize("shard", [None, 40_000])
def test_write_read_round_trip(tmp_path, kind, shard):
    d = tmp_path / "ck"
    cfg = make_checkpoint(d, kind, seed=5, max_shard_bytes=shard)
    assert os.path.exists(d / (INDEX if shard else SINGLE))
    if shard:
        assert len([f for f in os.listdir(d) if f.endswith(".safetensors")]) > 2
    ck = open_checkpoint(d)
    assert ck.kind == kind and len(ck.coded) == 14
    meta = cfg["quantization_config"].get("layer_meta")
    for prefix, layer in ck.coded.items():
        w = ck.layer(prefix)
        leaf = prefix.rsplit(".", 1)[1]
        from escha_jit.synth import DEFAULT_RATES
        assert (w.K, w.codebook) == DEFAULT_RATES[leaf]
        if kind == "escha":
            assert meta[prefix]["K"] == w.K and w.bias is None and w.s_in is not None
        else:
            assert w.s_in is None and (w.bias is not None) == (leaf == "o_proj")
    # escha's stored bias is kept but never applied
    if kind == "escha":
        assert ck.stored_bias(Q) is not None and ck.layer(Q).bias is None
    # rewriting what was read gives identical tensors
    d2 = tmp_path / "again"
    tensors = {n: ck.get(n) for n in ck.names()}
    write_checkpoint(d2, ck.config, tensors)
    ck2 = open_checkpoint(d2)
    for n in ck.names():
        assert torch.equal(ck2.get(n), tensors[n]), n
    dense = dict(ck.dense_tensors())
    assert "model.embed_tokens.weight" in dense and dense["lm_head.weight"].dtype == torch.float16
    assert not any(n.endswith((".weight_int8", ".weight_scale", ".escha_code", ".trellis")) for n in dense)


def test_safetensors_round_trip_all_dtypes(tmp_path):
    ts = {"a": torch.randn(3, 4), "b": torch.randn(5).to(torch.bfloat16), "c": torch.arange(7, dtype=torch.int16),
          "d": torch.tensor(3, dtype=torch.int32), "e": torch.zeros(0, 4, dtype=torch.float16),
          "f": torch.randint(-128, 127, (4, 4), dtype=torch.int8)}
    save_file(ts, tmp_path / "x.safetensors", {"k": "v"})
    f = SafetensorsFile(tmp_path / "x.safetensors")
    assert f.metadata == {"k": "v"}
    for n, t in ts.items():
        assert f.get(n).dtype == t.dtype and torch.equal(f.get(n), t)


def test_legacy_sign_bits(tmp_path):
    signs = torch.where(torch.rand(64) < 0.5, -1.0, 1.0).to(torch.float16)
    words = pack_sign_bits(signs)
    assert words.shape == (4,) and torch.equal(unpack_sign_bits(words), signs)
    # element 16*j + i is bit i of word j, set = -1
    assert torch.equal(unpack_sign_bits(torch.tensor([1, -32768], dtype=torch.int16))[[0, 1, 31]],
                       torch.tensor([-1.0, 1.0, -1.0], dtype=torch.float16))
    w = random_layer(256, 128, 3, "mcg", seed=4, escha_scales=False)
    w = R.LinearWeights(w.code, w.K, w.codebook, torch.sign(w.rin.float()).half(), torch.sign(w.rout.float()).half())
    from escha_jit.format import layer_tensors, QuantConfig
    write_checkpoint(tmp_path / "leg", {}, layer_tensors("m.lin", w, "exl3", legacy_signs=True), QuantConfig("exl3"))
    got = open_checkpoint(tmp_path / "leg").layer("m.lin")
    assert torch.equal(got.rin, w.rin) and torch.equal(got.rout, w.rout) and got.codebook == "mcg"


def test_int8_embedding_reconstructed(escha_dir):
    ck = open_checkpoint(escha_dir)
    q, s = ck.get("model.embed_tokens.weight_int8"), ck.get("model.embed_tokens.weight_scale")
    w = dict(ck.dense_tensors())["model.embed_tokens.weight"]
    assert torch.equal(w, (q.float() * s.float()[:, None]).half())


def test_padded_layer_meta(tmp_path):
    from escha_jit.format import LayerMeta, QuantConfig, layer_tensors
    w = random_layer(200, 300, 2, "mcg", seed=3)
    write_checkpoint(tmp_path, {}, layer_tensors("p.lin", w, "escha"),
                     QuantConfig("escha", "mcg", {"p.lin": LayerMeta(2.0, 200, 300, "mcg")}))
    got = open_checkpoint(tmp_path).layer("p.lin")
    assert (got.IC, got.OC, got.logical_in, got.logical_out) == (256, 384, 200, 300)


# ---------------------------------------------------------------- one test per validation rule

def test_rule_dtype(escha_dir):
    rewrite(escha_dir, lambda t: t.__setitem__(f"{Q}.escha_rin", t[f"{Q}.escha_rin"].float()))
    e = expect_error(escha_dir, f"{Q}.escha_rin", "float32", "expected float16")
    assert e.tensor == f"{Q}.escha_rin"


def test_rule_code_dtype_exl3(exl3_dir):
    rewrite(exl3_dir, lambda t: t.__setitem__(f"{Q}.trellis", t[f"{Q}.trellis"].to(torch.int32)))
    expect_error(exl3_dir, f"{Q}.trellis", "int32", "int16")


def test_rule_tile_width(exl3_dir):
    rewrite(exl3_dir, lambda t: t.__setitem__(f"{Q}.trellis", t[f"{Q}.trellis"][..., :60].contiguous()))
    expect_error(exl3_dir, f"{Q}.trellis", "W=60")


def test_rule_ic_matches_rin(escha_dir):
    rewrite(escha_dir, lambda t: t.__setitem__(f"{Q}.escha_s_in", t[f"{Q}.escha_s_in"][:128].contiguous()))
    expect_error(escha_dir, f"{Q}.escha_s_in", "[128]", "expected [256]")


def test_rule_oc_matches_rout(exl3_dir):
    rewrite(exl3_dir, lambda t: t.__setitem__(f"{Q}.svh", torch.ones(384, dtype=torch.float16)))
    expect_error(exl3_dir, f"{Q}.svh", "expected [256]")


def test_rule_multiple_of_128(exl3_dir):
    rewrite(exl3_dir, lambda t: t.__setitem__(f"{Q}.trellis", t[f"{Q}.trellis"][:12].contiguous()))
    expect_error(exl3_dir, f"{Q}.trellis", "IC=192", "multiple of 128")


def test_rule_tensor_parallel_shards(tmp_path, escha_dir):
    with pytest.raises(CheckpointError) as ei:      # k_proj OC=128 splits into shards of 64
        open_checkpoint(escha_dir, tp_size=2)
    assert "k_proj" in str(ei.value) and "tensor-parallel size 2" in str(ei.value)
    make_checkpoint(tmp_path / "kv4", "escha", kv_heads=4)
    open_checkpoint(tmp_path / "kv4", tp_size=2)    # every shard 128-aligned
    with pytest.raises(CheckpointError, match="tensor-parallel size 4"):
        open_checkpoint(tmp_path / "kv4", tp_size=4)


def test_rule_both_codebook_markers(exl3_dir):
    rewrite(exl3_dir, lambda t: (t.__setitem__(f"{Q}.mcg", torch.tensor(0, dtype=torch.int32)),
                                 t.__setitem__(f"{Q}.mul1", torch.tensor(0, dtype=torch.int32))))
    expect_error(exl3_dir, Q, "both codebook markers")


def test_rule_half_rate_needs_mul1_exl3(exl3_dir):
    v = "model.layers.0.self_attn.v_proj"                # K=2.5 mul1
    rewrite(exl3_dir, lambda t: t.pop(f"{v}.mul1"))
    expect_error(exl3_dir, f"{v}.trellis", "half-integer", "mul1")


def test_rule_half_rate_needs_mul1_escha(escha_dir):
    v = "model.layers.0.self_attn.v_proj"
    rewrite(escha_dir, edit_config=lambda c: c["quantization_config"]["layer_meta"][v].update(codebook="mcg"))
    expect_error(escha_dir, v, "half-integer", "mul1")


def test_rule_config_agrees_with_layer_meta(escha_dir):
    rewrite(escha_dir, lambda t: t.__setitem__(f"{Q}.escha_config", torch.tensor([1, 8, 2, 0], dtype=torch.int32)))
    expect_error(escha_dir, f"{Q}.escha_config", "disagrees with layer_meta")


def test_rule_layer_meta_k_disagrees_with_code(escha_dir):
    rewrite(escha_dir, edit_config=lambda c: c["quantization_config"]["layer_meta"][Q].update(K=3))
    expect_error(escha_dir, f"{Q}.escha_code", "K=4.0", "K=3.0")


def test_rule_layer_meta_entry_present(escha_dir):
    rewrite(escha_dir, edit_config=lambda c: c["quantization_config"]["layer_meta"].__setitem__(
        "model.layers.9.mlp.up_proj", {"K": 2, "in_features": 256, "out_features": 512, "codebook": "mcg"}))
    expect_error(escha_dir, "model.layers.9.mlp.up_proj", "no 'model.layers.9.mlp.up_proj.escha_code'")


def test_rule_coded_set_complete(escha_dir):
    rewrite(escha_dir, lambda t: t.pop(f"{UP}.escha_s_out"))
    expect_error(escha_dir, UP, "incomplete", f"{UP}.escha_s_out")


def test_rule_coded_set_complete_exl3(exl3_dir):
    rewrite(exl3_dir, lambda t: t.pop(f"{UP}.suh"))
    expect_error(exl3_dir, UP, "incomplete", f"{UP}.suh")


def test_rule_orphan_coded_tensor(escha_dir):
    rewrite(escha_dir, edit_config=lambda c: c["quantization_config"]["layer_meta"].pop(UP))
    expect_error(escha_dir, UP, "layer_meta")


def test_rule_merged_module_fully_coded_or_dense(escha_dir):
    def edit(t):
        for r in ("escha_code", "escha_rin", "escha_s_in", "escha_rout", "escha_s_out", "escha_config"):
            t.pop(f"{K_}.{r}")
        t[f"{K_}.weight"] = torch.zeros(128, 256, dtype=torch.float16)
    rewrite(escha_dir, edit, lambda c: c["quantization_config"]["layer_meta"].pop(K_))
    expect_error(escha_dir, "partly coded", "k_proj", "model.layers.0.self_attn")


@pytest.mark.parametrize("role,bad", [("escha_rin", float("nan")), ("escha_s_out", float("inf")),
                                      ("escha_rout", float("-inf")), ("escha_s_in", float("nan"))])
def test_rule_non_finite_scales(escha_dir, role, bad):
    def edit(t):
        v = t[f"{UP}.{role}"].clone()
        v[5] = bad
        t[f"{UP}.{role}"] = v
    rewrite(escha_dir, edit)
    expect_error(escha_dir, f"{UP}.{role}", "non-finite", "index 5")


def test_rule_non_finite_exl3(exl3_dir):
    def edit(t):
        v = t[f"{Q}.suh"].clone()
        v[0] = float("inf")
        t[f"{Q}.suh"] = v
    rewrite(exl3_dir, edit)
    expect_error(exl3_dir, f"{Q}.suh", "non-finite")


# ---------------------------------------------------------------- malformed files and configs

def test_int8_pair_without_scale(escha_dir):
    rewrite(escha_dir, lambda t: t.pop("lm_head.weight_scale"))
    expect_error(escha_dir, "lm_head.weight_scale", "cannot be reconstructed")


def test_int8_pair_with_dense_weight(escha_dir):
    rewrite(escha_dir, lambda t: t.__setitem__("lm_head.weight", torch.zeros(512, 256, dtype=torch.float16)))
    expect_error(escha_dir, "lm_head.weight_int8", "both weight_int8 and weight")


def test_unknown_quant_method(escha_dir):
    rewrite(escha_dir, edit_config=lambda c: c["quantization_config"].update(quant_method="gptq"))
    expect_error(escha_dir, "quant_method='gptq'")


def test_layer_meta_bad_k(escha_dir):
    rewrite(escha_dir, edit_config=lambda c: c["quantization_config"]["layer_meta"][Q].update(K=9))
    expect_error(escha_dir, Q, "not a valid bit rate")


def test_truncated_safetensors(escha_dir):
    p = escha_dir / SINGLE
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    expect_error(escha_dir, "fall outside the data")


def test_garbage_header(escha_dir):
    p = escha_dir / SINGLE
    p.write_bytes(struct.pack("<Q", 10) + b"not json!!" + b"\0" * 64)
    expect_error(escha_dir, "not valid JSON")


def test_header_padding_not_whitespace_shows_the_bytes(escha_dir):
    """A header whose JSON is followed by NULs instead of spaces (what the H200's parallel test runs
    read back in session 24) names the header size and shows the bytes where parsing stopped."""
    p = escha_dir / SINGLE
    raw = b'{"__metadata__":{"format":"pt"}}'
    p.write_bytes(struct.pack("<Q", len(raw) + 4) + raw + b"\0" * 4 + b"\0" * 16)
    expect_error(escha_dir, "not valid JSON", f"{len(raw) + 4} header bytes", "}}\\x00\\x00\\x00\\x00")


def test_huge_header_length(escha_dir):
    (escha_dir / SINGLE).write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    expect_error(escha_dir, "header length")


def test_pickle_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "exl3"}}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    expect_error(tmp_path, "pickled", "refused")


def test_index_missing_shard(tmp_path):
    d = tmp_path / "sh"
    make_checkpoint(d, "exl3", max_shard_bytes=40_000)
    shard = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))[1]
    os.remove(d / shard)
    expect_error(d, shard, "does not exist")


def test_missing_config(tmp_path):
    expect_error(tmp_path, "no config.json")

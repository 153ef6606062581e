"""Small random-but-valid checkpoints for tests, demos and benchmarks.

Every trellis bit pattern is a valid tile (FORMAT.md), so uniformly random code words are real
weights. Scales are drawn so that ``y = x @ W`` has entries of order 1 for ``x ~ N(0, 1)``.
"""
from __future__ import annotations

import math
import os
from typing import Mapping, Optional

import torch

from .format import LayerMeta, QuantConfig, layer_tensors, quantize_int8, round_up, write_checkpoint
from .reference import LinearWeights
from .trellis import check_rate_codebook, tile_words

DEFAULT_RATES: Mapping[str, tuple[float, str]] = {
    # a different K per source of each merged module (q/k/v, gate/up), every codebook, half rates
    "q_proj": (4.0, "mcg"), "k_proj": (3.0, "3inst"), "v_proj": (2.5, "mul1"), "o_proj": (4.0, "mul1"),
    "gate_proj": (2.0, "mcg"), "up_proj": (3.0, "mul1"), "down_proj": (3.5, "mul1"),
}


def _signs(n: int, g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, (n,), generator=g).to(torch.float32) * 2 - 1


def random_layer(in_features: int, out_features: int, K: float, codebook: str, *, seed: int = 0,
                 escha_scales: bool = True, bias: bool = False) -> LinearWeights:
    """A random coded linear. Dims that are not multiples of 128 are padded (the padded input
    rows get zero scales, as a quantizer would leave them)."""
    check_rate_codebook(K, codebook)
    g = torch.Generator().manual_seed(seed)
    IC, OC = round_up(in_features), round_up(out_features)
    code = torch.randint(-32768, 32768, (IC // 16, OC // 16, tile_words(K)), dtype=torch.int16, generator=g)
    mag_in = torch.rand(IC, generator=g) + 0.5
    rin = (_signs(IC, g) * mag_in / math.sqrt(IC)).to(torch.float16)
    rin[in_features:] = 0
    rout = (_signs(OC, g) * (torch.rand(OC, generator=g) + 0.5)).to(torch.float16)
    s_in = s_out = None
    if escha_scales:
        s_in = 0.8 + 0.4 * torch.rand(IC, generator=g)
        s_out = 0.8 + 0.4 * torch.rand(OC, generator=g)
    b = (torch.randn(OC, generator=g) * 0.1).to(torch.float16) if bias else None
    return LinearWeights(code, float(K), codebook, rin, rout, s_in, s_out, b,
                         in_features if in_features != IC else None, out_features if out_features != OC else None)


def llama_config(num_layers: int = 2, hidden: int = 256, intermediate: int = 512, vocab: int = 512,
                 heads: int = 4, kv_heads: int = 2) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": intermediate, "num_hidden_layers": num_layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "head_dim": hidden // heads, "vocab_size": vocab,
            "rms_norm_eps": 1e-5, "max_position_embeddings": 2048, "torch_dtype": "float16",
            "tie_word_embeddings": False}


def projection_shapes(cfg: Mapping) -> dict[str, tuple[str, int, int]]:
    """leaf name -> (module path inside a layer, in_features, out_features) for a Llama config."""
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    return {"q_proj": ("self_attn", h, cfg["num_attention_heads"] * cfg["head_dim"]), "k_proj": ("self_attn", h, kv),
            "v_proj": ("self_attn", h, kv), "o_proj": ("self_attn", cfg["num_attention_heads"] * cfg["head_dim"], h),
            "gate_proj": ("mlp", h, i), "up_proj": ("mlp", h, i), "down_proj": ("mlp", i, h)}


def make_checkpoint(path: str | os.PathLike, kind: str = "escha", *, num_layers: int = 2, hidden: int = 256,
                    intermediate: int = 512, vocab: int = 512, heads: int = 4, kv_heads: int = 2,
                    rates: Optional[Mapping[str, tuple[float, str]]] = None, seed: int = 0,
                    max_shard_bytes: Optional[int] = None, int8_embeddings: bool = True) -> dict:
    """Write a tiny random Llama-style checkpoint of ``kind`` ('escha' or 'exl3') to ``path``.

    Returns the config written. ``rates`` maps a projection leaf (q_proj, ..., down_proj) to
    (K, codebook); the default gives every source of a merged module its own K.
    """
    if kind not in ("escha", "exl3"):
        raise ValueError(f"kind must be 'escha' or 'exl3', got {kind!r}")
    cfg = llama_config(num_layers, hidden, intermediate, vocab, heads, kv_heads)
    rates = dict(DEFAULT_RATES, **(rates or {}))
    g = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, LayerMeta] = {}

    def dense_pair(name: str, rows: int, cols: int) -> None:
        w = torch.randn(rows, cols, generator=g) * 0.02
        if int8_embeddings:
            tensors[f"{name}.weight_int8"], tensors[f"{name}.weight_scale"] = quantize_int8(w)
        else:
            tensors[f"{name}.weight"] = w.to(torch.float16)

    dense_pair("model.embed_tokens", vocab, hidden)
    n = 0
    for layer in range(num_layers):
        base = f"model.layers.{layer}"
        tensors[f"{base}.input_layernorm.weight"] = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.float16)
        tensors[f"{base}.post_attention_layernorm.weight"] = (1 + 0.1 * torch.randn(hidden, generator=g)).to(torch.float16)
        for leaf, (mod, fin, fout) in projection_shapes(cfg).items():
            K, cb = rates[leaf]
            prefix = f"{base}.{mod}.{leaf}"
            exl3_bias = kind == "exl3" and leaf == "o_proj"
            w = random_layer(fin, fout, K, cb, seed=seed * 1000 + n, escha_scales=kind == "escha", bias=exl3_bias)
            n += 1
            stored = (torch.randn(w.OC, generator=g) * 0.1).to(torch.float16) if kind == "escha" and leaf == "q_proj" else None
            tensors.update(layer_tensors(prefix, w, kind, stored_bias=stored))
            meta[prefix] = LayerMeta(float(K), fin, fout, cb)
    tensors["model.norm.weight"] = torch.ones(hidden, dtype=torch.float16)
    dense_pair("lm_head", vocab, hidden)
    quant = QuantConfig("escha", "mcg", meta) if kind == "escha" else QuantConfig("exl3")
    write_checkpoint(path, cfg, tensors, quant, max_shard_bytes)
    cfg["quantization_config"] = quant.to_json()
    return cfg

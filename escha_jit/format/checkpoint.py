"""Reading and writing escha / EXL3 checkpoints (a directory: config.json + safetensors).

A checkpoint is one ``model.safetensors`` or shards listed by ``model.safetensors.index.json``
(``{"weight_map": {tensor: file}}``). Pickled formats (``*.bin``, ``*.pt``) are refused: nothing
is ever unpickled. :func:`open_checkpoint` validates everything FORMAT.md section 6 asks for at
open time (headers, small tensors; the large code tensors are only header-checked) and raises
:class:`CheckpointError` naming the tensor at fault.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Iterator, Mapping, Optional

import torch

from ..errors import CheckpointError
from ..reference import LinearWeights
from ..safetensors_io import SafetensorsFile, save_file
from .coded import ESCHA_ROLES, EXL3_ROLES, CodedLayer, check_escha_layer, check_exl3_layer, load_layer
from .quant_config import QuantConfig, parse_quant_config

log = logging.getLogger(__name__)

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
MERGE_GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("in_proj_qkv", "in_proj_z"))
"""Projections that engines merge into one module: all coded or all dense (FORMAT.md section 6)."""


class Checkpoint:
    """An opened, validated checkpoint. Tensors are read from disk on demand.

    ``coded``: prefix -> :class:`CodedLayer` for every coded projection (checkpoint namespace).
    ``layer(prefix)`` loads one as :class:`LinearWeights`; ``dense_tensors()`` yields every other
    tensor, with int8 embedding / lm_head pairs turned into fp16 ``.weight`` tensors.
    """

    def __init__(self, path: str | os.PathLike, tp_size: int = 1):
        self.path = os.fspath(path)
        cfg_path = os.path.join(self.path, "config.json")
        try:
            with open(cfg_path) as f:
                self.config: dict[str, Any] = json.load(f)
        except FileNotFoundError:
            raise CheckpointError(f"{self.path}: no config.json") from None
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{cfg_path}: not readable JSON: {e}") from None
        if not isinstance(self.config, dict):
            raise CheckpointError(f"{cfg_path}: not a JSON object")
        self.quant: QuantConfig = parse_quant_config(self.config)
        self.kind = self.quant.method
        self._files: dict[str, SafetensorsFile] = {}
        self._where: dict[str, str] = {}
        self._open_files()
        self.coded: dict[str, CodedLayer] = {}
        self._validate(tp_size)

    # ---- tensor index (the TensorIndex protocol of coded.py)
    def _open_files(self) -> None:
        index = os.path.join(self.path, INDEX)
        if os.path.exists(index):
            try:
                with open(index) as f:
                    wm = json.load(f).get("weight_map")
            except (OSError, json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
                raise CheckpointError(f"{index}: not a valid index: {e}") from None
            if not isinstance(wm, dict) or not wm:
                raise CheckpointError(f"{index}: weight_map missing or empty")
            for name, fname in wm.items():
                if not isinstance(fname, str) or os.path.basename(fname) != fname:
                    raise CheckpointError(f"{index}: tensor {name!r} maps to a bad file name {fname!r}", name)
                if fname not in self._files:
                    p = os.path.join(self.path, fname)
                    if not os.path.exists(p):
                        raise CheckpointError(f"{index}: shard {fname!r} (holding {name!r}) does not exist", name)
                    self._files[fname] = SafetensorsFile(p)
                if name not in self._files[fname]:
                    raise CheckpointError(f"{index}: tensor {name!r} is not in shard {fname!r}", name)
                self._where[name] = fname
            return
        single = os.path.join(self.path, SINGLE)
        if not os.path.exists(single):
            pickles = [f for f in os.listdir(self.path) if f.endswith((".bin", ".pt", ".pth", ".pkl"))]
            hint = f" (found pickled files {pickles}: refused, convert them to safetensors)" if pickles else ""
            raise CheckpointError(f"{self.path}: neither {SINGLE} nor {INDEX}{hint}")
        self._files[SINGLE] = SafetensorsFile(single)
        self._where = {n: SINGLE for n in self._files[SINGLE].keys()}

    def names(self) -> list[str]:
        return list(self._where)

    def has(self, name: str) -> bool:
        return name in self._where

    def _file(self, name: str) -> SafetensorsFile:
        try:
            return self._files[self._where[name]]
        except KeyError:
            raise CheckpointError(f"{self.path}: no tensor {name!r}", name) from None

    def dtype(self, name: str) -> torch.dtype:
        return self._file(name).dtype(name)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._file(name).shape(name)

    def get(self, name: str) -> torch.Tensor:
        return self._file(name).get(name)

    # ---- validation
    def _validate(self, tp_size: int) -> None:
        if self.kind == "escha":
            for prefix, meta in self.quant.layer_meta.items():
                if not any(self.has(f"{prefix}.{r}") for r in ("escha_code", "escha_config")):
                    raise CheckpointError(f"layer_meta names {prefix!r} but the weights hold no "
                                          f"'{prefix}.escha_code'", f"{prefix}.escha_code")
                self.coded[prefix] = check_escha_layer(self, prefix, meta, tp_size)
            roles, anchor = ESCHA_ROLES, "escha_code (and a layer_meta entry)"
        else:
            for n in self._where:
                if n.endswith(".trellis"):
                    prefix = n[:-len(".trellis")]
                    self.coded[prefix] = check_exl3_layer(self, prefix, tp_size)
            roles, anchor = EXL3_ROLES, "trellis"
        for n in self._where:
            prefix, _, role = n.rpartition(".")
            if role in roles and prefix not in self.coded:
                raise CheckpointError(f"tensor {n!r} belongs to a coded layer {prefix!r} that has no {anchor}", n)
        for n in self._where:
            if n.endswith(".weight") and n[:-len(".weight")] in self.coded:
                raise CheckpointError(f"tensor {n!r}: projection is coded and also has a dense weight", n)
        self._check_merged()
        self._check_int8_pairs()

    def _check_merged(self) -> None:
        members: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}
        for prefix in list(self.coded) + [n[:-len(".weight")] for n in self._where if n.endswith(".weight")]:
            parent, _, leaf = prefix.rpartition(".")
            for group in MERGE_GROUPS:
                if leaf in group:
                    members.setdefault((parent, group), {})[leaf] = "coded" if prefix in self.coded else "dense"
        for (parent, group), seen in members.items():
            if len(set(seen.values())) > 1:
                coded = [k for k, v in seen.items() if v == "coded"]
                dense = [k for k, v in seen.items() if v == "dense"]
                name = f"{parent}.{dense[0]}.weight"
                raise CheckpointError(f"merged module {parent}.{{{','.join(group)}}} is partly coded "
                                      f"({', '.join(coded)}) and partly dense ({', '.join(dense)})", name)

    def _check_int8_pairs(self) -> None:
        for n in self._where:
            if not n.endswith(".weight_int8"):
                continue
            base = n[:-len(".weight_int8")]
            scale = f"{base}.weight_scale"
            if self.has(f"{base}.weight"):
                raise CheckpointError(f"tensor {n!r}: both weight_int8 and weight are present for {base!r}", n)
            if self.dtype(n) != torch.int8 or len(self.shape(n)) != 2:
                raise CheckpointError(f"tensor {n!r}: expected int8 [V, H], got "
                                      f"{str(self.dtype(n)).replace('torch.', '')} {list(self.shape(n))}", n)
            if not self.has(scale):
                raise CheckpointError(f"tensor {n!r} has no {scale!r}: its weight cannot be reconstructed", scale)
            if self.dtype(scale) != torch.float16 or self.shape(scale) != (self.shape(n)[0],):
                raise CheckpointError(f"tensor {scale!r}: expected float16 [{self.shape(n)[0]}], got "
                                      f"{str(self.dtype(scale)).replace('torch.', '')} {list(self.shape(scale))}", scale)
        for n in self._where:
            if n.endswith(".weight_scale") and not self.has(n[:-len("_scale")] + "_int8"):
                raise CheckpointError(f"tensor {n!r} has no matching weight_int8", n)

    # ---- loading
    def layer(self, prefix: str) -> LinearWeights:
        try:
            return load_layer(self, self.coded[prefix])
        except KeyError:
            raise KeyError(f"{prefix!r} is not a coded layer of {self.path}") from None

    def stored_bias(self, prefix: str) -> Optional[torch.Tensor]:
        """An escha layer's stored-but-not-applied bias (FORMAT.md section 1), if any."""
        n = self.coded[prefix].names.get("stored_bias")
        return self.get(n) if n else None

    def _coded_tensor_names(self) -> set[str]:
        out: set[str] = set()
        for layer in self.coded.values():
            out.update(layer.names.values())
            for m in ("mcg", "mul1"):
                if self.has(f"{layer.prefix}.{m}"):
                    out.add(f"{layer.prefix}.{m}")
        return out

    def dense_tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Every tensor that is not part of a coded layer; int8 pairs become fp16 ``.weight``."""
        coded = self._coded_tensor_names()
        for n in self._where:
            if n in coded or n.endswith(".weight_scale"):
                continue
            if n.endswith(".weight_int8"):
                base = n[:-len(".weight_int8")]
                yield f"{base}.weight", dequantize_int8(self.get(n), self.get(f"{base}.weight_scale"))
            else:
                yield n, self.get(n)


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """weight = weight_int8 * weight_scale[:, None] (per-row symmetric), computed in fp32."""
    return (q.to(torch.float32) * scale.to(torch.float32)[:, None]).to(dtype)


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row symmetric int8 of a [V, H] weight -> (weight_int8, weight_scale fp16)."""
    w = w.to(torch.float32)
    scale = (w.abs().amax(dim=1) / 127.0).clamp_min(1e-8).to(torch.float16)
    q = torch.round(w / scale.to(torch.float32)[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def open_checkpoint(path: str | os.PathLike, tp_size: int = 1) -> Checkpoint:
    """Open and validate a checkpoint directory. ``tp_size`` also checks tensor-parallel shards."""
    return Checkpoint(path, tp_size)


def write_checkpoint(path: str | os.PathLike, config: Mapping[str, Any], tensors: Mapping[str, torch.Tensor],
                     quant: Optional[QuantConfig] = None, max_shard_bytes: Optional[int] = None) -> None:
    """Write config.json (with ``quant``'s quantization_config) and the tensors, sharded when
    ``max_shard_bytes`` is given (then with model.safetensors.index.json)."""
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    cfg = dict(config)
    if quant is not None:
        cfg["quantization_config"] = quant.to_json()
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, t in tensors.items():
        nb = t.numel() * t.element_size()
        if max_shard_bytes and shards[-1] and size + nb > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += nb
    if len(shards) == 1:
        save_file(shards[0], os.path.join(path, SINGLE), {"format": "pt"})
    else:
        weight_map = {}
        for i, shard in enumerate(shards):
            fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, os.path.join(path, fname), {"format": "pt"})
            weight_map.update({n: fname for n in shard})
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        with open(os.path.join(path, INDEX), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

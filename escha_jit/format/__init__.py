"""Checkpoint IO and validation for the escha and EXL3 trellis formats (FORMAT.md)."""
from ..errors import CheckpointError
from .checkpoint import (INDEX, MERGE_GROUPS, SINGLE, Checkpoint, dequantize_int8, open_checkpoint,
                         quantize_int8, write_checkpoint)
from .coded import CodedLayer, layer_tensors, pack_sign_bits, unpack_sign_bits
from .quant_config import LayerMeta, QuantConfig, parse_quant_config, round_up

__all__ = ["CheckpointError", "Checkpoint", "CodedLayer", "LayerMeta", "QuantConfig", "INDEX", "SINGLE",
           "MERGE_GROUPS", "open_checkpoint", "write_checkpoint", "parse_quant_config", "layer_tensors",
           "dequantize_int8", "quantize_int8", "pack_sign_bits", "unpack_sign_bits", "round_up"]

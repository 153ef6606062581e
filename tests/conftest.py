"""Shared fixtures: the golden vectors of the reference runtime (tests/golden/exl3, a copy of
shared/golden/exl3) and helpers to read them."""
from __future__ import annotations

import functools
import os
import sys

import pytest
import torch

from escha_jit.safetensors_io import SafetensorsFile

GOLDEN_DIR = os.environ.get("ESCHA_GOLDEN_DIR") or os.path.join(os.path.dirname(__file__), "golden", "exl3")


@functools.lru_cache(maxsize=None)
def golden(name: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    f = SafetensorsFile(os.path.join(GOLDEN_DIR, name))
    return {k: f.get(k) for k in f.keys()}, f.metadata


def parse_case(case: str) -> tuple[float, str]:
    """'K2p5_mul1' or 'K2p5_mul1_4096x4096' -> (2.5, 'mul1')."""
    parts = case.split("_")
    return float(parts[0][1:].replace("p", ".")), parts[1]


@functools.lru_cache(maxsize=None)
def golden_trellis(seed: int, IC: int, OC: int, K: float) -> torch.Tensor:
    sys.path.insert(0, GOLDEN_DIR)
    try:
        from regen import trellis_from_seed
    finally:
        sys.path.pop(0)
    return torch.from_numpy(trellis_from_seed(seed, IC, OC, K).copy())


def ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """Largest distance in units in the last place between two fp16 / bf16 tensors."""
    def mono(t):
        i = t.view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)
    return int((mono(a) - mono(b)).abs().max())


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm())


def has_gpu() -> bool:
    return torch.cuda.is_available()


gpu = pytest.mark.skipif(not has_gpu(), reason="needs a GPU: torch.cuda.is_available() is False (CI is CPU-only)")

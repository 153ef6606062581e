"""escha_jit: run-time generated GPU kernels for escha / EXL3 trellis-quantized linear layers.

Public entry points: :mod:`escha_jit.reference` (the bit-exact torch math), :mod:`escha_jit.format`
(checkpoint IO and validation), :class:`escha_jit.nn.EschaLinear`.
"""
from __future__ import annotations

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

from .errors import CheckpointError, CompileError, CompileForbiddenError, EschaError  # noqa: E402

__all__ = ["__version__", "CheckpointError", "CompileError", "CompileForbiddenError", "EschaError", "tune", "warmup"]


def tune(model_or_layers, **kw):
    """Tune every coded projection of a model on its GPU (see escha_jit.autotune.api.tune)."""
    from .autotune.api import tune as _tune
    return _tune(model_or_layers, **kw)


def warmup(model_or_layers, **kw):
    """Compile and load every kernel a model needs, without measuring (escha_jit.autotune.api.warmup)."""
    from .autotune.api import warmup as _warmup
    return _warmup(model_or_layers, **kw)

"""escha_jit: run-time generated GPU kernels for escha / EXL3 trellis-quantized linear layers.

Public entry points: :mod:`escha_jit.reference` (the bit-exact torch math), :mod:`escha_jit.format`
(checkpoint IO and validation), :class:`escha_jit.nn.EschaLinear`.
"""
from __future__ import annotations

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

from .errors import CheckpointError, CompileError, CompileForbiddenError, EschaError  # noqa: E402

__all__ = ["__version__", "CheckpointError", "CompileError", "CompileForbiddenError", "EschaError"]

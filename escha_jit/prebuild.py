"""``escha-jit prebuild``: the cache directory a deployment ships, built on any machine.

Compiles every specialization a checkpoint's coded projections can dispatch to on ``arch``
(kernels it can reach with the shipped or user tuned table included), and copies that table in.
A deployment points ESCHA_JIT_CACHE_DIR at the directory and sets ESCHA_JIT_NO_COMPILE=1:
code objects are found by exact key, or by portable key when its compiler differs or is absent.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

from .autotune.shapes import checkpoint_shapes, model_specs
from .autotune.table import Tables, TuningTable, user_table_path
from .offline import CompileRow, compile_all


def prebuild(checkpoint: str, arch: str, out_dir: str, dtypes: Sequence[str] = ("f16", "bf16"),
             jobs: Optional[int] = None, toolchain: Optional[str] = None, progress=None) -> tuple[list[CompileRow], str]:
    """Compile what ``checkpoint`` needs on ``arch`` into ``out_dir``; returns (rows, table path)."""
    shapes = checkpoint_shapes(checkpoint)
    table = Tables().table(arch)                        # shipped + the user's own, user wins
    specs = model_specs(arch, shapes, dtypes, table)
    rows = compile_all(arch, cache_dir=out_dir, jobs=jobs, toolchain=toolchain, specs=specs, progress=progress)
    path = user_table_path(arch, out_dir)
    TuningTable(dict(table.provenance, prebuilt_for=os.path.abspath(checkpoint)), dict(table.entries),
                dict(table.routes)).save(path)
    return rows, path

"""NVIDIA SASS of a cubin, without a GPU (torch-free): ``cuobjdump -sass`` from the ``sass`` extra
(the nvidia-cuda-cuobjdump wheel) or a CUDA toolkit on PATH."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from typing import Optional

from ..errors import ToolchainUnavailable


def find_cuobjdump() -> Optional[str]:
    """``cuobjdump`` on PATH, else the one in an installed nvidia-cuda-cuobjdump wheel; None without."""
    if (p := shutil.which("cuobjdump")):
        return p
    try:
        import nvidia                                       # namespace package of the CUDA wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for cand in sorted(glob.glob(os.path.join(root, "*", "bin", "cuobjdump"))):
            if os.access(cand, os.X_OK):
                return cand
    return None


def disassemble(binary: bytes, tool: Optional[str] = None) -> str:
    """The SASS text of a cubin (``cuobjdump -sass``)."""
    tool = tool or find_cuobjdump()
    if not tool:
        raise ToolchainUnavailable("cuobjdump not found: pip install 'escha_jit[sass]' (nvidia-cuda-cuobjdump)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(binary)
        f.flush()
        r = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout

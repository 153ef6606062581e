"""escha::DivMod (include/escha/platform.h), the kernels' division by a run-time divisor (the
fused prologue's (row, 128-block) items, the prep rows' 16-byte pieces), built as host C++ and
compared with integer division over its documented range (n < 2^22)."""
from __future__ import annotations

import os
import subprocess
import tempfile

from escha_jit.render import include_dir

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host")


def test_divmod_matches_integer_division():
    from test_amd_layout import host_cxx
    out = os.path.join(tempfile.mkdtemp(prefix="escha_divmod_host_"), "divmod_host")
    cmd = [host_cxx(), "-std=c++17", "-O2", "-fno-strict-aliasing", "-DESCHA_HOST", f"-I{include_dir()}",
           f"-I{HOST}", os.path.join(HOST, "divmod_host.cpp"), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"host build failed:\n{' '.join(cmd)}\n{r.stderr}"
    run = subprocess.run([out], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "mismatches 0" in run.stdout, run.stdout

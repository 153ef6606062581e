"""Builds a rendered kernel into one of the host C++ harnesses of tests/host (the kernel's threads as
std::threads, the platform API and cross-lane operations emulated in plain C++): the shared step of
tests/test_dense_host.py and tests/test_rowscale_host.py."""
from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Sequence

import numpy as np

from escha_jit.render import include_dir, render
from escha_jit.spec import KernelSpec

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host")


def build(spec: KernelSpec, extra: dict, harness: str, defines: Sequence[str] = ()) -> str:
    """Path of the binary of tests/host/``harness`` built around ``spec``'s source (ESCHA_KERNEL_SOURCE,
    ESCHA_KERNEL) with ``defines`` (-D flags without the -D)."""
    from test_amd_layout import host_cxx
    d = tempfile.mkdtemp(prefix="escha_host_kernel_")
    src = os.path.join(d, "kernel.inc")
    with open(src, "w") as f:
        f.write(render(spec, extra))
    out = os.path.join(d, os.path.splitext(harness)[0])
    cmd = [host_cxx(), "-std=c++20", "-O1", "-fno-strict-aliasing", "-pthread", "-DESCHA_HOST",
           f"-DESCHA_KERNEL_SOURCE=\"{src}\"", f"-DESCHA_KERNEL={spec.kernel_name()}",
           *(f"-D{x}" for x in defines), f"-I{include_dir()}", f"-I{HOST}", os.path.join(HOST, harness), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"host build failed:\n{' '.join(cmd)}\n{r.stderr}"
    return out


def scale_parts(w) -> list[bytes]:
    """A layer's scales as the harnesses read them: fp16 rin [IC], (fp32 s_in [IC]), fp16 rout [OC],
    (fp32 s_out [OC]); the optional ones only where the layer has them."""
    out = [w.rin.numpy().tobytes()]
    if w.s_in is not None:
        out.append(w.s_in.numpy().astype(np.float32).tobytes())
    out.append(w.rout.numpy().tobytes())
    if w.s_out is not None:
        out.append(w.s_out.numpy().astype(np.float32).tobytes())
    return out


def aligned_parts(parts: list) -> bytes:
    """The input file of the fused, prep, Hadamard and reconstruct harnesses: each part from a
    multiple of 16 bytes (their vector loads need it)."""
    return b"".join(q + bytes(-len(q) % 16) for q in parts)


def run_binary(binary: str, data: bytes, timeout: float = 600) -> np.ndarray:
    """Run a built harness on ``data`` (its IN file); what it wrote to OUT, as bytes (uint8)."""
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(fin, "wb") as f:
            f.write(data)
        subprocess.run([binary, fin, fout], check=True, timeout=timeout)
        return np.fromfile(fout, np.uint8)

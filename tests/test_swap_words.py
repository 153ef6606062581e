"""The swapped fp16 route's weight words (include/escha/codebook.h: lcg_bits, mul1_swap_word),
built as host C++ for every 16-bit state: the two fp16 halves the matrix unit sums, and the weight
the route implies, against the format's codebook tables (escha_jit.codebook.table). The route
feeds the unit the exact, unrounded weight, so the check is: rounded once to fp16 it IS the
format's value, and for mul1 it equals the format's pre-rounding value exactly."""
import functools
import os
import subprocess
import tempfile

import numpy as np
import pytest

from escha_jit import codebook
from escha_jit.render import include_dir

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host")
ORDER = ("3inst", "mcg", "mul1")          # the Codebook enum of codebook.h


@functools.cache
def words() -> np.ndarray:
    from test_amd_layout import host_cxx
    out = os.path.join(tempfile.mkdtemp(prefix="escha_swap_host_"), "swap_words_host")
    cmd = [host_cxx(), "-std=c++17", "-O1", "-fno-strict-aliasing", "-DESCHA_HOST", f"-I{include_dir()}",
           f"-I{HOST}", os.path.join(HOST, "swap_words_host.cpp"), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"host build failed:\n{' '.join(cmd)}\n{r.stderr}"
    raw = subprocess.run([out], capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.float64).reshape(3, 65536, 3)


@pytest.mark.parametrize("cb", ORDER)
def test_swap_words_round_to_the_codebook(cb):
    w = words()[ORDER.index(cb)]
    assert np.array_equal(w[:, 2].astype(np.float16), codebook.table(cb))


def test_mul1_swap_words_are_the_exact_weight():
    lo, hi, value = words()[2].T
    s = np.arange(65536, dtype=np.uint64)
    x = (s * np.uint64(codebook.MUL1_MULT)) & np.uint64(0xFFFFFFFF)
    B = sum(((x >> np.uint64(8 * i)) & np.uint64(0xFF)) for i in range(4)).astype(np.float64)
    assert np.array_equal(lo, 1024 + B) and np.all(hi == -1534)        # one IDP4A, no carry into hi
    exact = (1774 * B - 905216) / 262144                               # FORMAT.md: before the fp16 rounding
    assert np.array_equal(value, exact)

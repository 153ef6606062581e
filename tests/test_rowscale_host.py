"""The row-scaling kernels of the prefill path (templates/rowscale.hip.j2) run on the CPU: the
rendered source built as host C++ (tests/host/rowscale_host.cpp: std::threads for a block's threads,
the wave shuffles emulated per wave) and compared bit for bit with the exponent rule and roundings
computed here in numpy. Covers the weight bound of the bf16 route (rows scaled so rowmax * n * max|W|
<= 2^15, small rows scaled up, zero rows), the unbounded rule, and the three access paths (rows
kept in registers, rows read twice, element by element for strided or unaligned rows)."""
import functools

import numpy as np
import pytest

from escha_jit.kernels import rowscale
from host_kernel import build, run_binary


@functools.cache
def host_binary(stage: str, src: str, dst: str) -> str:
    spec = rowscale.spec_in("sm_90", src) if stage == "in" else rowscale.spec_out("sm_90", dst, src)
    return build(spec, rowscale.render_extra(spec), "rowscale_host.cpp", ["ESCHA_STAGE_IN"] if stage == "in" else [])


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest even (finite values), as uint16."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def ceil_log2(v: np.ndarray) -> np.ndarray:
    b = v.astype(np.float32).view(np.uint32).astype(np.int64)
    ex = ((b >> 23) & 0xFF) - 127
    return np.where(ex < -126, -126, ex + ((b & 0x7FFFFF) != 0))


def run(stage, src, dst, rows, ld_src, ld_dst, soff=0, doff=0, wmax=None, row_exp=None, bias=None):
    """rows: [M, n] source values as stored (bf16 as uint16 bits); returns the kernel's outputs."""
    M, n = rows.shape
    buf = np.zeros(soff + M * ld_src, rows.dtype)
    for m in range(M):
        buf[soff + m * ld_src: soff + m * ld_src + n] = rows[m]
    flags = (1 if (wmax is not None or row_exp is not None) else 0) | (2 if bias is not None else 0)
    wbits = 0 if wmax is None else int(np.float32(wmax).view(np.uint32))
    hdr = np.array([M, n, ld_src, ld_dst, soff, doff, flags, wbits], np.int64)
    parts = [hdr.tobytes(), buf.tobytes()]
    if stage == "out":
        parts.append((row_exp if row_exp is not None else np.zeros(M, np.int32)).astype(np.int32).tobytes())
        if bias is not None:
            parts.append(bias.astype(np.float32).tobytes())
    raw = run_binary(host_binary(stage, src, dst), b"".join(parts))
    esize = {"f16": 2, "bf16": 2, "f32": 4}[dst if stage == "out" else "f16"]
    body = raw[: M * ld_dst * esize]
    dt = np.float32 if esize == 4 else np.uint16
    out = body.view(dt).reshape(M, ld_dst)[:, :n]
    if stage == "in":
        return out.view(np.float16), raw[M * ld_dst * esize:].view(np.int32)
    return out


def expected_in(x32: np.ndarray, wmax):
    """(xs fp16, e) by the kernel's rule, from the rows' float32 values."""
    n = x32.shape[1]
    mx = np.abs(x32).max(axis=1).astype(np.float32)
    if wmax is None:
        ex = ((mx.view(np.uint32).astype(np.int64) >> 23) & 0xFF) - 127
        e = np.where(ex >= 15, ex - 14, 0)
    else:
        B = np.maximum(np.float32(n) * np.float32(wmax), np.float32(1))
        e = np.clip(ceil_log2(mx) + ceil_log2(np.full_like(mx, B)) - 15, -126, 126)
        e = np.where(mx > 0, e, 0)
    scale = np.ldexp(np.float32(1), -e).astype(np.float32)[:, None]
    return (x32 * scale).astype(np.float16), e.astype(np.int32)


def bf16_rows(rng, M, n):
    x = (rng.standard_normal((M, n)) * 40).astype(np.float32)
    x[1] *= np.float32(1e-30)                          # below fp16's subnormals: scaled up
    x[2] = 0                                           # a zero row: e = 0
    x[3] *= np.float32(1e30)                           # beyond fp16's range: scaled down
    return bf16_bits(x)


@pytest.mark.parametrize("n,ld,soff", [(1000, 1000, 0),      # rows kept in registers
                                       (17000, 17000, 0),    # rows longer than the registers keep: read twice
                                       (1000, 1003, 0),      # a row stride off 8: element by element
                                       (1000, 1000, 1)])     # a pointer off 16-byte alignment
@pytest.mark.parametrize("wmax", [None, 0.0371, 3e-9])
def test_rowscale_in_bf16_exponents_and_rounding(n, ld, soff, wmax):
    rng = np.random.default_rng(n + ld + soff)
    bits = bf16_rows(rng, 6, n)
    xs, e = run("in", "bf16", "f16", bits, ld, ld, soff=soff, doff=soff, wmax=wmax)
    want_xs, want_e = expected_in(bf16_value(bits), wmax)
    assert np.array_equal(e, want_e)
    assert np.array_equal(xs.view(np.uint16), want_xs.view(np.uint16))
    if wmax is not None:                                 # the bound: every GEMM output within 2^15
        mx = np.abs(xs[[0, 1, 3, 4, 5]].astype(np.float64)).max(axis=1)
        B = max(n * wmax, 1.0)
        assert (mx * B <= 2 ** 15 * (1 + 2 ** -10)).all() and (mx * B > 2 ** 12).all()
    assert (e[2] == 0) and not xs[2].any()


def test_rowscale_in_fp32():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((5, 512)) * 3).astype(np.float32)
    x[4] *= np.float32(1e6)
    xs, e = run("in", "f32", "f16", x, 512, 512, wmax=0.5)
    want_xs, want_e = expected_in(x, 0.5)
    assert np.array_equal(e, want_e) and np.array_equal(xs.view(np.uint16), want_xs.view(np.uint16))


@pytest.mark.parametrize("doff,ld", [(0, 1024), (3, 1024), (0, 1021)])
def test_rowscale_out_fp16_to_bf16_with_bias(doff, ld):
    rng = np.random.default_rng(doff + ld)
    M, n = 5, 1000
    t = (rng.standard_normal((M, n)) * 1000).astype(np.float16)
    e = np.array([0, 5, -7, 40, -40], np.int32)
    bias = rng.standard_normal(n).astype(np.float32)
    y = run("out", "f16", "bf16", t, ld, ld, doff=doff, row_exp=e, bias=bias)
    want = bf16_bits(t.astype(np.float32) * np.ldexp(np.float32(1), e).astype(np.float32)[:, None] + bias)
    assert np.array_equal(y, want)


def test_rowscale_out_fp32_to_fp32_no_exponents():
    rng = np.random.default_rng(3)
    t = rng.standard_normal((4, 256)).astype(np.float32)
    y = run("out", "f32", "f32", t, 256, 256)
    assert np.array_equal(y, t)

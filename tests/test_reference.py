"""Properties of the reference that do not need golden files."""
import numpy as np
import pytest
import torch

from escha_jit import codebook, reference as R
from escha_jit.synth import random_layer
from escha_jit.trellis import RATES, all_rate_codebooks, symbol_bits, symbol_end, tile_words
from conftest import rel_rms


@pytest.mark.parametrize("K", RATES)
def test_pack_unpack_round_trip(K):
    g = torch.Generator().manual_seed(int(K * 10))
    code = torch.randint(-32768, 32768, (3, 5, tile_words(K)), dtype=torch.int16, generator=g)
    states = R.unpack_states(code, K)
    assert states.shape == (3, 5, 256) and states.dtype == torch.int32
    assert int(states.min()) >= 0 and int(states.max()) <= 0xFFFF
    assert torch.equal(R.pack(states, K), code)


@pytest.mark.parametrize("K", RATES)
def test_state_recurrence(K):
    """state_p = ((state_{p-1} << D(p)) | symbol_p) & 0xFFFF, cyclically (FORMAT.md section 4)."""
    code = torch.randint(-32768, 32768, (2, 2, tile_words(K)), dtype=torch.int16, generator=torch.Generator().manual_seed(1))
    s = R.unpack_states(code, K).to(torch.int64)
    for p in range(256):
        d = symbol_bits(K, p)
        prev = s[..., (p - 1) % 256]
        assert torch.equal((s[..., p] >> d), (prev & ((1 << (16 - d)) - 1))), p
    assert symbol_end(K, 255) == 256 * K


def test_pack_rejects_inconsistent_states():
    s = R.unpack_states(torch.zeros(1, 1, 32, dtype=torch.int16), 2).clone()
    s[0, 0, 7] ^= 0x8000                     # a high bit that contradicts the predecessors
    with pytest.raises(ValueError, match="tail-biting"):
        R.pack(s, 2)


@pytest.mark.parametrize("cb,std", [("3inst", 1.2437), ("mcg", 1.2437), ("mul1", 1.0003)])
def test_codebook_statistics(cb, std):
    t = codebook.table(cb).astype(np.float64)
    assert np.isfinite(t).all() and np.abs(t).max() < 4.5
    assert abs(t.std() - std) < 5e-4


def test_mul1_exact_formula():
    """mul1's pre-rounding value is (1774*B - 905216) / 2^18 (FORMAT.md section 5)."""
    s = np.arange(65536, dtype=np.uint64)
    x = (s * np.uint64(0x83DCD12D)) & np.uint64(0xFFFFFFFF)
    B = sum(((x >> np.uint64(8 * i)) & np.uint64(0xFF)).astype(np.int64) for i in range(4))
    want = ((1774 * B - 905216) / 2.0 ** 18).astype(np.float16)
    assert np.array_equal(codebook.table("mul1").view(np.uint16), want.view(np.uint16))


def test_hadamard_is_orthonormal_involution():
    x = torch.randn(5, 384, dtype=torch.float64)
    H = R.hadamard_matrix()
    assert torch.allclose(H @ H, torch.eye(128, dtype=torch.float64), atol=1e-12)
    y = R.hadamard128(x.float())
    assert rel_rms(y, (x.reshape(5, 3, 128) @ H).reshape(5, 384)) < 1e-6
    assert rel_rms(R.hadamard128(y), x) < 1e-6


def test_hadamard_rejects_bad_width():
    with pytest.raises(ValueError, match="multiple of 128"):
        R.hadamard128(torch.zeros(2, 100))


def test_tiles_dense_inverse():
    v = torch.arange(4 * 2 * 256).reshape(4, 2, 256)
    assert torch.equal(R.dense_to_tiles(R.tiles_to_dense(v)), v)
    d = R.tiles_to_dense(v)
    # position p = 8L + j of tile (0, 0) lands at row 2(L%4) + j%2 + 8((j/2)%2), col L/4 + 8(j/4)
    for p in (0, 1, 2, 3, 7, 8, 100, 255):
        L, j = divmod(p, 8)
        assert int(d[2 * (L % 4) + j % 2 + 8 * ((j // 2) % 2), L // 4 + 8 * (j // 4)]) == p


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("K,cb", [(2.0, "mcg"), (3.5, "mul1"), (5.0, "3inst")])
def test_forward_matches_float64_weight(dtype, K, cb):
    layer = random_layer(256, 384, K, cb, seed=3, bias=True)
    x = torch.randn(7, 256, generator=torch.Generator().manual_seed(0)).to(dtype)
    y = R.forward(x, layer)
    assert y.dtype == dtype and y.shape == (7, 384)
    ref = x.double() @ R.dense_weight(layer) + layer.bias.double()
    tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-5}[dtype]
    assert rel_rms(y, ref) < tol
    y64 = R.forward(x, layer, compute_dtype=torch.float64, out_dtype=torch.float64)
    assert rel_rms(y64, ref) < 1e-12


def test_forward_scale_order_matters():
    """rin is a pre-scale and rout a post-scale: swapping Hadamard and scale is a large error."""
    layer = random_layer(256, 256, 4, "mcg", seed=1)
    x = torch.randn(3, 256, dtype=torch.float64)
    ref = x @ R.dense_weight(layer)
    y = R.forward(x.float(), layer, out_dtype=torch.float64)
    H = R.hadamard_matrix()
    What = R.reconstruct(layer.code, layer.K, layer.codebook).double()
    wrong = ((x.reshape(3, 2, 128) @ H).reshape(3, 256) * R.input_scale(layer, torch.float64)) @ What
    assert rel_rms(y, ref) < 1e-6 and rel_rms(wrong, ref) > 0.5


def test_forward_padded_dims():
    layer = random_layer(200, 300, 3, "mul1", seed=2)
    assert (layer.IC, layer.OC, layer.logical_in, layer.logical_out) == (256, 384, 200, 300)
    x = torch.randn(4, 200, dtype=torch.float64)
    y = R.forward(x.float(), layer, out_dtype=torch.float64)
    assert y.shape == (4, 300)
    ref = torch.nn.functional.pad(x, (0, 56)) @ R.dense_weight(layer)
    assert rel_rms(y, ref[:, :300]) < 1e-6
    with pytest.raises(ValueError, match="expects 200"):
        R.forward(torch.zeros(1, 256), layer)


def test_reconstruct_rejects_bad_input():
    with pytest.raises(TypeError, match="int16"):
        R.reconstruct(torch.zeros(1, 1, 32, dtype=torch.int32), 2, "mcg")
    with pytest.raises(ValueError, match="32"):
        R.reconstruct(torch.zeros(1, 1, 48, dtype=torch.int16), 2, "mcg")
    with pytest.raises(ValueError, match="mul1"):
        R.reconstruct(torch.zeros(1, 1, 40, dtype=torch.int16), 2.5, "mcg")


def test_all_pairs_decode_on_every_rate():
    for K, cb in all_rate_codebooks():
        code = torch.randint(-32768, 32768, (1, 2, tile_words(K)), dtype=torch.int16)
        w = R.reconstruct(code, K, cb)
        assert w.shape == (16, 32) and torch.isfinite(w.float()).all()

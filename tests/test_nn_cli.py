"""EschaLinear on the CPU, and the console script."""
import os
import subprocess
import sys

import pytest
import torch

from escha_jit import reference as R
from escha_jit.format import open_checkpoint
from escha_jit.nn import EschaLinear
from escha_jit.synth import make_checkpoint, random_layer
from conftest import rel_rms


def test_escha_linear_matches_reference():
    w = random_layer(256, 384, 3, "mcg", seed=9)
    lin = EschaLinear(w)
    x = torch.randn(2, 5, 256).to(torch.float16)
    y = lin(x)
    assert y.shape == (2, 5, 384) and y.dtype == torch.float16
    assert torch.equal(y, R.forward(x, w))
    assert rel_rms(y.reshape(10, 384), x.reshape(10, 256).double() @ R.dense_weight(w)) < 1e-3
    assert "K=3" in repr(lin) and "codebook=mcg" in repr(lin)


def test_escha_linear_from_checkpoint_applies_exl3_bias(tmp_path):
    make_checkpoint(tmp_path, "exl3")
    ck = open_checkpoint(tmp_path)
    p = "model.layers.1.self_attn.o_proj"
    lin = EschaLinear.from_checkpoint(ck, p)
    assert lin.bias is not None
    x = torch.randn(3, 256, dtype=torch.float32)
    ref = x.double() @ R.dense_weight(ck.layer(p)) + lin.bias.double()
    assert rel_rms(lin(x), ref) < 1e-5


def test_escha_linear_state_dict_round_trip():
    lin = EschaLinear(random_layer(128, 128, 2.5, "mul1", seed=1))
    sd = lin.state_dict()
    assert "_what" not in sd and set(sd) == {"code", "rin", "rout", "s_in", "s_out"}


def test_escha_linear_bad_input():
    lin = EschaLinear(random_layer(128, 256, 2, "mcg"))
    with pytest.raises(ValueError, match="expected 128"):
        lin(torch.zeros(1, 256))
    with pytest.raises(TypeError, match="fp16, bf16 or fp32"):
        lin(torch.zeros(1, 128, dtype=torch.int32))


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-m", "escha_jit.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("kind", ["escha", "exl3"])
def test_cli_demo(kind):
    r = _cli("demo", "--kind", kind, "--device", "cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "worst relative error" in r.stdout and "ok" in r.stdout
    assert r.stdout.count("reference") == 14


def test_cli_info():
    r = _cli("info")
    assert r.returncode == 0, r.stderr
    for key in ("python", "torch", "gpus", "nvrtc", "hiprtc", "cache dir"):
        assert key in r.stdout
    assert "prefill     dense" in r.stdout or "ESCHA_JIT_PREFILL" in os.environ

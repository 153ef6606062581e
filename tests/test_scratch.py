"""The fused calls' per-device scratch buffers (ops/fused.py _Scratch), on the CPU: sizes, dtypes,
zero-filled counters, growth that keeps the buffers graphs captured before still point at, and the
refusal to grow during graph capture."""
import pytest
import torch

from escha_jit.ops import fused as F

DEV = torch.device("cpu", 0)


def test_buffers_grow_and_keep_their_predecessors():
    s = F._Scratch()
    xh, ex = s.xh(DEV, 4, 256)
    assert (xh.numel(), xh.dtype, ex.numel(), ex.dtype) == (1024, torch.float16, 4, torch.int32)
    sync = s.prep_sync(DEV, 4)
    assert sync.numel() == 8 and sync.dtype == torch.int32 and not sync.any()
    ws, cnt = s.get(DEV, 1000, 7)
    assert (ws.numel(), ws.dtype, cnt.numel()) == (1000, torch.float32, 7) and not cnt.any()
    assert s.xh(DEV, 2, 256)[0].data_ptr() == xh.data_ptr()   # smaller calls take the same buffers
    xh2, ex2 = s.xh(DEV, 8, 256)
    assert (xh2.numel(), ex2.numel()) == (2048, 8)
    assert xh2.data_ptr() != xh.data_ptr()
    assert any(b[0].data_ptr() == xh.data_ptr() for b in s._retired)   # kept alive for graphs captured before
    cnt[3] = 5
    ws2, cnt2 = s.get(DEV, 10, 9)                            # one buffer too small: both grow
    assert ws2.numel() == 1000 and cnt2.numel() == 9 and not cnt2.any()
    assert s.prep_sync(DEV, 1) is sync                       # buffers of other names untouched


def test_no_growth_during_capture(monkeypatch):
    s = F._Scratch()
    s.xh(DEV, 4, 256)
    monkeypatch.setattr(F, "_capturing", lambda device: True)
    assert s.xh(DEV, 4, 256)[0].numel() == 1024              # no growth needed: fine
    with pytest.raises(RuntimeError, match="prep buffer must grow inside CUDA-graph capture"):
        s.xh(DEV, 5, 256)
    with pytest.raises(RuntimeError, match="split-K scratch"):
        s.get(DEV, 10, 2)


def test_prep_layouts_share_one_buffer():
    """The swapped route's words (kernels.prep.buffer_words) and the fp16 rows live in one buffer:
    a call at a layer's largest M sizes it for that layer's swapped calls too (M <= SWAP_MAX_M), so
    warming up at the largest M before graph capture covers every M below it."""
    from escha_jit.kernels import prep
    s = F._Scratch()
    xh, ex = s.xh(DEV, 16, 4096)                                # the fp16 route's warm-up call
    xw, ew = s.xw(DEV, 8, 4096)                                 # a swapped call afterwards: no growth
    assert (xw.dtype, xw.numel()) == (torch.int32, prep.buffer_words(8, 4096)) and not s._retired
    assert xw.data_ptr() == xh.data_ptr() and ew.data_ptr() == ex.data_ptr()
    assert xw.numel() * 4 > xh.numel() * 2                      # the words need more than 16 fp16 rows
    t = F._Scratch()
    t.xw(DEV, 3, 1024)
    assert t.xh(DEV, 3, 1024)[0].numel() == 3 * 1024 and not t._retired

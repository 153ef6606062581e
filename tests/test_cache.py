"""The disk cache: keys, concurrency, corruption, read-only and foreign-writable dirs, no-compile."""
import multiprocessing as mp
import os
import time

import pytest

from escha_jit import env
from escha_jit.cache import KernelCache, _unpack, cache_key
from escha_jit.errors import CompileForbiddenError
from escha_jit.toolchain.base import CodeObject

SRC = 'extern "C" __global__ void k() {}'


def fake_build(counter_path=None, delay=0.0, payload=b"\x7fELF-fake-code-object"):
    def build():
        if counter_path:
            with open(counter_path, "a") as f:
                f.write("x")
        time.sleep(delay)
        return CodeObject(payload, "sm_90", "fake-toolchain 1.0", "", {"k": {"registers": 8}}, delay)
    return build


def test_key_changes_with_every_input():
    base = dict(source=SRC, headers_digest="h", fingerprint="nvrtc 13.0;probe=ab", arch="sm_90", options=["-O3"])
    k0 = cache_key(**base)
    assert k0 == cache_key(**base) and len(k0) == 64
    for field, value in [("source", SRC + " "), ("headers_digest", "h2"), ("fingerprint", "nvrtc 13.0;probe=ac"),
                         ("arch", "sm_100"), ("options", ["-O2"])]:
        assert cache_key(**dict(base, **{field: value})) != k0, field


def test_build_once_then_hit(tmp_path):
    c = KernelCache(str(tmp_path))
    n = tmp_path / "count"
    e1 = c.get_or_build("a" * 64, "sm_90", "k", fake_build(n))
    assert e1.compiled and os.path.exists(e1.path)
    e2 = KernelCache(str(tmp_path)).get_or_build("a" * 64, "sm_90", "k", fake_build(n))
    assert not e2.compiled and e2.code.binary == e1.code.binary
    assert e2.code.resources == {"k": {"registers": 8}}
    assert n.read_text() == "x"


def _worker(args):
    d, key, counter = args
    e = KernelCache(d).get_or_build(key, "sm_90", "k", fake_build(counter, delay=0.3))
    return e.code.binary, e.compiled


def test_eight_processes_compile_once(tmp_path):
    counter = str(tmp_path / "count")
    key = "b" * 64
    with mp.get_context("spawn").Pool(8) as pool:
        results = pool.map(_worker, [(str(tmp_path), key, counter)] * 8)
    assert open(counter).read() == "x"                      # compiled exactly once
    assert sum(compiled for _, compiled in results) == 1
    assert len({b for b, _ in results}) == 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_file_is_rebuilt(tmp_path, damage, caplog):
    c = KernelCache(str(tmp_path))
    key = "c" * 64
    path = c.get_or_build(key, "sm_90", "k", fake_build()).path
    data = open(path, "rb").read()
    bad = {"truncate": data[:-5], "flip": data[:-1] + bytes([data[-1] ^ 1]), "garbage": b"hello" * 20,
           "empty": b""}[damage]
    open(path, "wb").write(bad)
    n = tmp_path / "count"
    e = KernelCache(str(tmp_path)).get_or_build(key, "sm_90", "k", fake_build(n))
    assert e.compiled and n.read_text() == "x"
    meta, binary = _unpack(open(path, "rb").read())          # rewritten whole
    assert binary == _unpack(data)[1] and meta["key"] == key
    if damage != "empty":
        assert "corrupt" in caplog.text


def test_read_only_via_unwritable_root(tmp_path, caplog, monkeypatch):
    c = KernelCache(str(tmp_path))
    shipped = c.get_or_build("d" * 64, "sm_90", "k", fake_build())
    # simulate a read-only mount: os.access says no, and writes fail
    monkeypatch.setattr(os, "access", lambda p, m: False)
    ro = KernelCache(str(tmp_path))
    hit = ro.get_or_build("d" * 64, "sm_90", "k", fake_build(tmp_path / "never"))
    assert not hit.compiled and hit.code.binary == shipped.code.binary   # shipped kernels still load
    new = ro.get_or_build("e" * 64, "sm_90", "k2", fake_build())
    assert new.compiled and new.path is None                            # kept in memory only
    assert not os.path.exists(ro.path_for("sm_90", "e" * 64))
    assert "read-only" in caplog.text
    again = ro.get_or_build("e" * 64, "sm_90", "k2", fake_build(tmp_path / "never"))
    assert not again.compiled and not (tmp_path / "never").exists()


def test_unwritable_location_degrades_to_memory(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    c = KernelCache(str(blocker / "cache"))
    e = c.get_or_build("f" * 64, "sm_90", "k", fake_build())
    assert e.compiled and e.path is None
    assert "in memory" in caplog.text


def test_foreign_writable_dir_refused(tmp_path, caplog):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)
    c = KernelCache(str(d))
    e = c.get_or_build("1" * 64, "sm_90", "k", fake_build())
    assert e.path is None and "writable by every user" in caplog.text
    assert not os.path.exists(c.path_for("sm_90", "1" * 64))


def test_no_compile_switch_names_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("ESCHA_JIT_NO_COMPILE", "1")
    c = KernelCache(str(tmp_path))
    with pytest.raises(CompileForbiddenError) as ei:
        c.get_or_build("2" * 64, "sm_90", "escha_fused_k2_mcg@sm_90", fake_build())
    assert "2" * 64 in str(ei.value) and "escha_fused_k2_mcg@sm_90" in str(ei.value)
    assert "ESCHA_JIT_NO_COMPILE" in str(ei.value)


def test_no_compile_switch_allows_cached(tmp_path, monkeypatch):
    KernelCache(str(tmp_path)).get_or_build("3" * 64, "sm_90", "k", fake_build())
    monkeypatch.setenv("ESCHA_JIT_NO_COMPILE", "1")
    assert not KernelCache(str(tmp_path)).get_or_build("3" * 64, "sm_90", "k", fake_build()).compiled


def test_env_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ESCHA_JIT_CACHE_DIR", str(tmp_path / "x"))
    assert env.cache_dir() == str(tmp_path / "x")
    monkeypatch.delenv("ESCHA_JIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert env.cache_dir() == str(tmp_path / "xdg" / "escha_jit")


def test_list_and_clear(tmp_path):
    c = KernelCache(str(tmp_path))
    for ch in "456":
        c.get_or_build(ch * 64, "sm_90", f"k{ch}", fake_build())
    entries = c.entries()
    assert [e["describe"] for e in entries] == ["k4", "k5", "k6"] and all(e["valid"] for e in entries)
    assert c.clear() == 3 and c.entries() == []

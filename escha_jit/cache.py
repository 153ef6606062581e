"""The on-disk kernel cache (torch-free).

Layout under the cache dir (``escha_jit.env.cache_dir()``)::

    kernels-v1/<arch>/<key[:2]>/<key>.ekc     one code object, self-verifying (see _pack)
    kernels-v1/<arch>/<key[:2]>/<key>.lock    flock target for builders of that key
    kernels-v1/<arch>/portable/<pkey>.ref     the key of a code object built from the same source,
                                              arch and options by ANY compiler build (see below)

``key`` = sha256 over the rendered source, the headers it includes, the toolchain fingerprint
(version AND build identity), the arch, the compile options and CACHE_FORMAT. Never mtimes.
``pkey`` (portable key) is the same without the toolchain: a deployment that ships a prebuilt
cache (``escha-jit prebuild``) and forbids compiling, or has no compiler at all, finds its code
objects through it; a process with a working compiler always prefers the exact key.

Concurrency: writers take an exclusive ``fcntl.flock`` on the key's lock file (released by the
kernel if the holder dies), look again, compile, write a temp file in the same directory and
``os.replace`` it into place. Readers never lock: a file is either absent or whole, and a corrupt
or truncated one fails its hash check and is rebuilt. A read-only, full or foreign-writable cache
dir degrades to an in-memory cache with one warning.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import stat
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

from . import env
from .errors import CompileForbiddenError
from .toolchain.base import CodeObject

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
SUBDIR = f"kernels-v{CACHE_FORMAT}"
MAGIC = b"ESCHAKC1"
SUFFIX = ".ekc"


def cache_key(source: str, headers_digest: str, fingerprint: str, arch: str, options: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in (f"format={CACHE_FORMAT}", f"arch={arch}", f"toolchain={fingerprint}",
                 "options=" + "\x1f".join(options), f"headers={headers_digest}", source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _pack(co: CodeObject, meta: dict) -> bytes:
    """MAGIC | u32 meta length | u64 binary length | sha256(meta+binary) | meta JSON | binary."""
    m = json.dumps(meta, sort_keys=True).encode()
    digest = hashlib.sha256(m + co.binary).digest()
    return MAGIC + struct.pack("<IQ", len(m), len(co.binary)) + digest + m + co.binary


def _unpack(data: bytes) -> Optional[tuple[dict, bytes]]:
    """(meta, binary), or None when the payload is truncated, corrupt or foreign."""
    head = len(MAGIC) + 12 + 32
    if len(data) < head or not data.startswith(MAGIC):
        return None
    mlen, blen = struct.unpack_from("<IQ", data, len(MAGIC))
    digest = data[len(MAGIC) + 12:head]
    if len(data) != head + mlen + blen:
        return None
    body = data[head:]
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        return json.loads(body[:mlen]), body[mlen:]
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


@dataclass
class CacheEntry:
    key: str
    path: Optional[str]
    code: CodeObject
    meta: dict
    compiled: bool          # True when this call compiled it


def _foreign_writable(path: str) -> Optional[str]:
    """Why ``path`` (a dir) must not be trusted, or None. Code objects are executed, so a cache
    dir writable by other users is refused."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "writable by every user"
    if hasattr(os, "getuid") and st.st_uid != os.getuid() and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"owned by uid {st.st_uid} and writable by others"
    return None


class KernelCache:
    """Content-addressed, self-verifying, process-safe cache of code objects."""

    def __init__(self, directory: Optional[str] = None):
        self.directory = os.path.abspath(directory or env.cache_dir())
        self.root = os.path.join(self.directory, SUBDIR)
        self._memory: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()
        self._disk_ok: Optional[bool] = None
        self._readonly = False
        self._warned = False

    # ---- where files go
    def path_for(self, arch: str, key: str) -> str:
        return os.path.join(self.root, arch, key[:2], key + SUFFIX)

    def _degrade(self, why: str) -> None:
        self._disk_ok = False
        if not self._warned:
            self._warned = True
            log.warning("kernel cache %s is unusable (%s); keeping compiled kernels in memory only",
                        self.directory, why)

    def _disk_usable(self) -> bool:
        if self._disk_ok is None:
            try:
                os.makedirs(self.root, mode=0o755, exist_ok=True)
            except OSError as e:
                self._degrade(f"cannot create it: {e.strerror}")
                return False
            for d in (self.directory, self.root):
                why = _foreign_writable(d)
                if why:
                    self._degrade(f"{d} is {why}")
                    return False
            if not os.access(self.root, os.W_OK):
                # a read-only cache can still serve what a deployment shipped in it
                self._readonly = True
                log.warning("kernel cache %s is read-only: reading kernels from it, new ones stay in memory",
                            self.directory)
            self._disk_ok = True
        return bool(self._disk_ok)

    # ---- reading
    def _read(self, path: str, key: str) -> Optional[CacheEntry]:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cannot read cached kernel %s: %s", path, e)
            return None
        got = _unpack(data)
        if got is None or got[0].get("key") != key:
            log.warning("cached kernel %s is corrupt or truncated; rebuilding it", path)
            return None
        meta, binary = got
        co = CodeObject(binary, meta["arch"], meta["toolchain"], "", meta.get("resources", {}),
                        meta.get("compile_seconds", 0.0))
        return CacheEntry(key, path, co, meta, False)

    def _ref_path(self, arch: str, pkey: str) -> str:
        return os.path.join(self.root, arch, "portable", pkey + ".ref")

    def lookup_portable(self, arch: str, pkey: str) -> Optional[CacheEntry]:
        """A code object of the same source/arch/options built by any compiler, or None."""
        if not self._disk_usable():
            return None
        try:
            with open(self._ref_path(arch, pkey)) as f:
                key = f.read().strip()
        except OSError:
            return None
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            log.warning("portable reference %s is corrupt; ignoring it", self._ref_path(arch, pkey))
            return None
        return self.lookup(arch, key)

    def _write_ref(self, arch: str, pkey: str, key: str) -> None:
        d = os.path.dirname(self._ref_path(arch, pkey))
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".ref")
            with os.fdopen(fd, "w") as f:
                f.write(key)
            os.chmod(tmp, 0o644)
            os.replace(tmp, self._ref_path(arch, pkey))
        except OSError as e:
            log.debug("cannot write portable reference %s: %s", pkey, e)

    def lookup(self, arch: str, key: str) -> Optional[CacheEntry]:
        with self._lock:
            hit = self._memory.get(key)
        if hit is not None:
            return dataclasses.replace(hit, compiled=False)
        if not self._disk_usable():
            return None
        entry = self._read(self.path_for(arch, key), key)
        if entry is not None:
            with self._lock:
                self._memory[key] = entry
        return entry

    # ---- writing
    @contextlib.contextmanager
    def _key_lock(self, path: str) -> Iterator[None]:
        lock_path = path[: -len(SUFFIX)] + ".lock"
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield                      # cannot lock (read-only dir): compile without, keep in memory
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)   # released by the kernel if this process dies
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _write(self, path: str, payload: bytes) -> bool:
        d = os.path.dirname(path)
        try:
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=SUFFIX)
        except OSError as e:
            self._degrade(f"cannot write in {d}: {e.strerror}")
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            return True
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            self._degrade(f"cannot write {path}: {e.strerror}")
            return False

    def get_or_build(self, key: str, arch: str, describe: str, build: Callable[[], CodeObject],
                     meta: Optional[dict] = None, pkey: Optional[str] = None) -> CacheEntry:
        """The code object for ``key``: from memory, from disk, or built once across processes.

        ``describe`` names the kernel in errors and logs; ``build`` compiles it. With
        ESCHA_JIT_NO_COMPILE=1 a miss of ``key`` falls back to the portable key ``pkey`` (a
        prebuilt cache from another compiler build), then raises CompileForbiddenError naming
        both keys and the kernel.
        """
        hit = self.lookup(arch, key)
        if hit is not None:
            return hit
        if pkey and env.no_compile():
            hit = self.lookup_portable(arch, pkey)
            if hit is not None:
                return hit
        path = self.path_for(arch, key)
        disk = self._disk_usable() and not self._readonly
        if disk:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError as e:
                self._degrade(f"cannot create {os.path.dirname(path)}: {e.strerror}")
                disk = False
        with (self._key_lock(path) if disk else contextlib.nullcontext()):
            if disk:                                   # a second look: another process may have built it
                again = self._read(path, key)
                if again is not None:
                    with self._lock:
                        self._memory[key] = again
                    return again
            if env.no_compile():
                raise CompileForbiddenError(
                    f"kernel {describe} (cache key {key}" + (f", portable key {pkey}" if pkey else "") +
                    f") is not in the cache {self.directory} and compiling is forbidden (ESCHA_JIT_NO_COMPILE=1)")
            t0 = time.perf_counter()
            co = build()
            dt = time.perf_counter() - t0
            full_meta = dict(meta or {}, key=key, arch=arch, toolchain=co.toolchain, resources=co.resources,
                             compile_seconds=round(dt, 4), describe=describe, created=time.time())
            level = logging.INFO if env.log_compiles() else logging.DEBUG
            log.log(level, "compiled %s in %.2f s: %s", describe, dt,
                    "; ".join(f"{k}: {v}" for k, v in co.resources.items()) or "no resource report")
            written = disk and self._write(path, _pack(co, full_meta))
            if written and pkey:
                self._write_ref(arch, pkey, key)
            entry = CacheEntry(key, path if written else None, co, full_meta, True)
            with self._lock:
                self._memory[key] = entry
            return entry

    # ---- maintenance (escha-jit cache list / clear)
    def entries(self) -> list[dict]:
        out = []
        if not os.path.isdir(self.root):
            return out
        for dirpath, _, files in os.walk(self.root):
            for f in files:
                if not f.endswith(SUFFIX) or f.startswith(".tmp-"):
                    continue
                p = os.path.join(dirpath, f)
                try:
                    data = open(p, "rb").read()
                except OSError:
                    continue
                got = _unpack(data)
                meta = got[0] if got else {"describe": "(corrupt)", "key": f[: -len(SUFFIX)]}
                out.append(dict(meta, path=p, bytes=len(data), valid=got is not None))
        return sorted(out, key=lambda e: e.get("describe", ""))

    def clear(self) -> int:
        """Remove every cached kernel and lock file; returns how many code objects went."""
        n = 0
        if os.path.isdir(self.root):
            for dirpath, _, files in os.walk(self.root, topdown=False):
                for f in files:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(dirpath, f))
                        n += f.endswith(SUFFIX) and not f.startswith(".tmp-")
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)
        with self._lock:
            self._memory.clear()
        return n


_default: Optional[KernelCache] = None
_default_lock = threading.Lock()


def default_cache() -> KernelCache:
    """The process-wide cache at ``env.cache_dir()`` (re-created if the variable changes)."""
    global _default
    with _default_lock:
        if _default is None or _default.directory != os.path.abspath(env.cache_dir()):
            _default = KernelCache()
        return _default

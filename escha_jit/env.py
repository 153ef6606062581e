"""Every environment variable escha_jit reads, in one place (torch-free).

| variable | meaning | default |
|---|---|---|
| ``ESCHA_JIT_CACHE_DIR`` | kernel cache directory | ``$XDG_CACHE_HOME/escha_jit`` or ``~/.cache/escha_jit`` |
| ``ESCHA_JIT_NO_COMPILE`` | ``1``: any compile is an error (deployments with a prebuilt cache) | off |
| ``ESCHA_JIT_LOG_COMPILES`` | ``1``: log every compile at INFO (time, registers, spills) | off (DEBUG) |
| ``ESCHA_JIT_LOG_LEVEL`` | level for the ``escha_jit`` logger when the CLI configures logging | ``INFO`` |
"""
from __future__ import annotations

import os


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> str:
    d = os.environ.get("ESCHA_JIT_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "escha_jit")


def no_compile() -> bool:
    return _flag("ESCHA_JIT_NO_COMPILE")


def log_compiles() -> bool:
    return _flag("ESCHA_JIT_LOG_COMPILES")


def log_level() -> str:
    return os.environ.get("ESCHA_JIT_LOG_LEVEL", "INFO").upper()

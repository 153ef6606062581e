"""The package's exception types: one per concern, each message naming what is at fault."""
from __future__ import annotations


class EschaError(Exception):
    """Base class of every error escha_jit raises on purpose."""


class CheckpointError(EschaError, ValueError):
    """A checkpoint (file, tensor, config) violates FORMAT.md. The message names the file or
    tensor and what is wrong with it; ``tensor`` holds the tensor name when one is at fault."""

    def __init__(self, message: str, tensor: str | None = None):
        super().__init__(message)
        self.tensor = tensor


class CompileError(EschaError, RuntimeError):
    """A kernel failed to compile. Carries the compiler log and the rendered source's path."""

    def __init__(self, message: str, log: str = "", source_path: str | None = None):
        detail = f"\n--- compiler log ---\n{log.strip()}" if log.strip() else ""
        where = f"\nrendered source: {source_path}" if source_path else ""
        super().__init__(f"{message}{where}{detail}")
        self.log = log
        self.source_path = source_path


class CompileForbiddenError(EschaError, RuntimeError):
    """A kernel was not in the cache while compiling is forbidden (ESCHA_JIT_NO_COMPILE=1)."""


class ToolchainUnavailable(EschaError, RuntimeError):
    """The compiler or driver library a backend needs is not installed or not loadable."""

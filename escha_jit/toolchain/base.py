"""The one interface every compiler backend implements (torch-free).

A toolchain turns a rendered HIP-dialect source into a code object for one target arch
(``sm_90``, ``gfx1201``, ...) and states its exact identity (:meth:`Toolchain.fingerprint`),
which goes into every cache key so a compiler upgrade or rebuild never serves a stale binary.
"""
from __future__ import annotations

import abc
import dataclasses
import re
from typing import Optional, Sequence


@dataclasses.dataclass(frozen=True)
class Resources:
    """What the compiler reports about one kernel; None where the toolchain cannot tell."""
    registers: Optional[int] = None        # per thread (VGPRs on AMD)
    spill_bytes: Optional[int] = None      # spill stores + loads (NVIDIA) / scratch (AMD)
    stack_bytes: Optional[int] = None
    shared_bytes: Optional[int] = None     # static shared memory / LDS
    sgprs: Optional[int] = None            # AMD only
    wavefront: Optional[int] = None        # AMD only

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass(frozen=True)
class CodeObject:
    """A compiled kernel module: the binary (cubin / hsaco) and what the compiler said about it."""
    binary: bytes
    arch: str
    toolchain: str            # fingerprint of the toolchain that built it
    log: str = ""
    resources: dict = dataclasses.field(default_factory=dict)   # kernel name -> Resources.to_json()
    compile_seconds: float = 0.0


class Toolchain(abc.ABC):
    """Compile source for an arch. Subclasses: NVRTC, hipRTC, clang (offline AMD route)."""

    name: str = "?"
    vendor: str = "?"     # "nvidia" | "amd"

    @abc.abstractmethod
    def available(self) -> bool:
        """True when this machine can compile with it (libraries present and loadable)."""

    @abc.abstractmethod
    def version(self) -> str:
        """Human-readable version, e.g. 'NVRTC 13.0'."""

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """A string that changes whenever the compiler's output could change: version AND build
        identity (hash of what it emits for an empty program)."""

    @abc.abstractmethod
    def compile(self, source: str, arch: str, options: Sequence[str] = (), name: str = "kernel.hip",
                include_dirs: Sequence[str] = ()) -> CodeObject:
        """Compile ``source``; raise :class:`escha_jit.errors.CompileError` with the log on failure."""


_PTXAS_FUNC = re.compile(r"Compiling entry function '(\w+)'")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict[str, dict]:
    """Per-kernel resources from ``ptxas -v`` output (NVRTC with --ptxas-options=-v)."""
    out: dict[str, dict] = {}
    cur: Optional[str] = None
    vals: dict = {}
    for line in log.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            if cur:
                out[cur] = Resources(**vals).to_json()
            cur, vals = m.group(1), {}
            continue
        if cur is None:
            continue
        if (m := _PTXAS_REGS.search(line)):
            vals["registers"] = int(m.group(1))
        if (m := _PTXAS_SMEM.search(line)):
            vals["shared_bytes"] = int(m.group(1))
        if (m := _PTXAS_STACK.search(line)):
            vals["stack_bytes"] = int(m.group(1))
        if (m := _PTXAS_SPILL.search(line)):
            vals["spill_bytes"] = int(m.group(1)) + int(m.group(2))
    if cur:
        out[cur] = Resources(**vals).to_json()
    return out

"""NVIDIA SASS of a cubin, without a GPU (torch-free): ``cuobjdump -sass`` from the ``sass`` extra
(the nvidia-cuda-cuobjdump wheel) or a CUDA toolkit on PATH; and the kernel's main loop found in it."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from typing import Optional

from ..errors import ToolchainUnavailable


def find_cuobjdump() -> Optional[str]:
    """``cuobjdump`` on PATH, else the one in an installed nvidia-cuda-cuobjdump wheel; None without."""
    if (p := shutil.which("cuobjdump")):
        return p
    try:
        import nvidia                                       # namespace package of the CUDA wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for cand in sorted(glob.glob(os.path.join(root, "*", "bin", "cuobjdump"))):
            if os.access(cand, os.X_OK):
                return cand
    return None


def disassemble(binary: bytes, tool: Optional[str] = None) -> str:
    """The SASS text of a cubin (``cuobjdump -sass``)."""
    tool = tool or find_cuobjdump()
    if not tool:
        raise ToolchainUnavailable("cuobjdump not found: pip install 'escha_jit[sass]' (nvidia-cuda-cuobjdump)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(binary)
        f.flush()
        r = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


# the instructions of a product kernel's main loop: the matrix unit or the integer dot unit
LOOP_MARKERS = ("HMMA", "IMMA", "HGMMA", "IDP")
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_TARGET = re.compile(r"BRA(?:\.[A-Z.]+)?\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)\s*$")


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction text without its ';') of every SASS instruction line."""
    return [(int(m.group(1), 16), m.group(2)) for m in map(_LINE.search, sass.splitlines()) if m]


def opcode(text: str) -> str:
    """The opcode with its modifiers (``IMAD.MOV.U32``) of an instruction, its predicate dropped."""
    parts = text.split()
    return parts[1] if parts and parts[0].startswith("@") and len(parts) > 1 else (parts[0] if parts else "")


def main_loop(sass: str, markers: tuple = LOOP_MARKERS) -> Optional[dict]:
    """The innermost loop that holds a matrix / dot-unit instruction: the shortest span from a
    backward branch's target to the branch that contains one of ``markers``. Returns start / end
    addresses, its instruction count and its opcodes by count (most first); None without such a
    loop. A kernel's hot loop is where its time goes, so its count per step is the figure to watch
    when an edit elsewhere in the kernel moves the compiler's allocation (benchmarks/RESULTS.md
    session 20)."""
    ins = instructions(sass)
    index = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (addr, text) in enumerate(ins):
        m = _TARGET.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= addr or target not in index:
            continue
        body = ins[index[target]:i + 1]
        if not any(opcode(t).startswith(markers) for _, t in body):
            continue
        if best is None or len(body) < len(best):
            best = body
    if best is None:
        return None
    ops = Counter(opcode(t) for _, t in best)
    return dict(start=best[0][0], end=best[-1][0], instructions=len(best), opcodes=dict(ops.most_common()),
                registers=registers_named(t for _, t in best))


def innermost_loops(sass: str, min_instructions: int = 1) -> list[dict]:
    """Every innermost loop of at least ``min_instructions`` (a backward branch's span holding no other
    such span; shorter ones inside, e.g. a uniform retry loop, do not count), in address order: start /
    end addresses, instruction count and opcodes by count (most first). A warp-specialized kernel has
    one hot loop per role (the coded GEMM: the producer's decode, the consumers' wgmma, the
    epilogue's row steps)."""
    ins = instructions(sass)
    index = {a: i for i, (a, _) in enumerate(ins)}
    spans = []
    for i, (addr, text) in enumerate(ins):
        m = _TARGET.search(text)
        if m and (target := int(m.group(1), 16)) < addr and target in index:
            spans.append((index[target], i))
    spans = [(lo, hi) for lo, hi in spans if hi - lo + 1 >= min_instructions]
    out = []
    for lo, hi in sorted(spans):
        if any((lo, hi) != (a, b) and lo <= a and b <= hi for a, b in spans):
            continue
        body = ins[lo:hi + 1]
        out.append(dict(start=body[0][0], end=body[-1][0], instructions=len(body),
                        opcodes=dict(Counter(opcode(t) for _, t in body).most_common())))
    return out


_REG = re.compile(r"\bR(\d+)\b")
# destination widths beyond one register that an instruction's modifiers say (LDS.128: 4, .64: 2)
_WIDE = re.compile(r"\.(64|128)\b")


def registers_named(texts) -> int:
    """One past the highest general register (R0..R254; not RZ, not uniform UR) the instructions
    name, counting the registers a 64- / 128-bit operand spans: a lower bound of what the code
    needs, next to which a kernel's register count says whether this code or another part of the
    kernel set it."""
    top = -1
    for t in texts:
        wide = _WIDE.search(opcode(t))
        span = int(wide.group(1)) // 32 if wide else 1
        for m in _REG.finditer(t):
            top = max(top, int(m.group(1)) + span - 1)
    return top + 1

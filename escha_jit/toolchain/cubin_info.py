"""Per-kernel resources read from an NVIDIA cubin (ELF64) itself, for when the compile log lacks them.

NVRTC 13.0 on our H200 host prints ptxas' ``-v`` lines only the first time a process compiles a
program; repeats come back with an empty log (benchmarks/RESULTS.md session 26,
benchmarks/nvrtc_log_probe.py), so the no-spill checks had nothing to read. The cubin carries the
same facts: the ``.nv.info`` section's EIATTR_REGCOUNT / EIATTR_FRAME_SIZE / EIATTR_MIN_STACK_SIZE
records (format EIFMT_SVAL: symbol index, value). Spill bytes are not recorded there; a spill needs
a stack frame, which is. Static shared memory is left out: the kernel's ``.nv.shared.<name>``
section also holds the 1 KiB that sm_90 reserves per block (1060 bytes where ptxas says 36).
"""
from __future__ import annotations

import struct

_EIFMT_SVAL = 0x04
_EIATTR_REGCOUNT = 0x2F
_EIATTR_FRAME_SIZE = 0x11
_EIATTR_MIN_STACK_SIZE = 0x12


def _sections(b: bytes) -> dict[str, tuple[int, int, int]]:
    """Section name -> (offset, size, sh_link)."""
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names_at = raw[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, off, size, link, _info, _align, _entsize in raw:
        start = names_at + name
        out[b[start:b.index(b"\0", start)].decode()] = (off, size, link)
    return out


def _symbol_names(b: bytes, secs: dict) -> list[str]:
    if ".symtab" not in secs or ".strtab" not in secs:
        return []
    off, size, _ = secs[".symtab"]
    str_off = secs[".strtab"][0]
    names = []
    for i in range(size // 24):
        st_name, = struct.unpack_from("<I", b, off + 24 * i)
        start = str_off + st_name
        names.append(b[start:b.index(b"\0", start)].decode())
    return names


def cubin_resources(binary: bytes) -> dict[str, dict]:
    """Kernel name -> {"registers", "stack_bytes"} from a cubin's records; {} for anything that is
    not a 64-bit ELF or holds no register counts."""
    if binary[:4] != b"\x7fELF" or binary[4] != 2:
        return {}
    secs = _sections(binary)
    if ".nv.info" not in secs:
        return {}
    names = _symbol_names(binary, secs)
    off, size, _ = secs[".nv.info"]
    found: dict[int, dict] = {}
    p, end = off, off + size
    while p + 4 <= end:
        fmt, attr, n = binary[p], binary[p + 1], struct.unpack_from("<H", binary, p + 2)[0]
        if fmt != _EIFMT_SVAL:              # the global section holds only per-symbol SVAL records
            break
        if n == 8 and attr in (_EIATTR_REGCOUNT, _EIATTR_FRAME_SIZE, _EIATTR_MIN_STACK_SIZE):
            sym, value = struct.unpack_from("<II", binary, p + 4)
            r = found.setdefault(sym, {"registers": None, "stack_bytes": 0})
            if attr == _EIATTR_REGCOUNT:
                r["registers"] = value
            else:
                r["stack_bytes"] = max(r["stack_bytes"], value)
        p += 4 + n
    return {names[sym]: r for sym, r in found.items() if r["registers"] is not None and sym < len(names)}

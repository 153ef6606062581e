"""Inspect AMD GPU code objects (.hsaco) without a GPU or ROCm (torch-free).

The ELF header (machine, target from ``e_flags``) is parsed here in pure Python; the per-kernel
metadata (a msgpack note, NT_AMDGPU_METADATA) is read through ``llvm-readelf --notes``, which
prints it as YAML, and the disassembly comes from ``llvm-objdump``. Values follow LLVM's
AMDGPUUsage ("ELF Header" and "Code Object V3+ Metadata" sections).
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
from typing import Optional

from ..errors import ToolchainUnavailable
from .base import Resources

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
EF_AMDGPU_MACH = 0x0FF            # processor selection mask
EF_AMDGPU_FEATURE_XNACK_V4 = 0x300
EF_AMDGPU_FEATURE_SRAMECC_V4 = 0xC00
# EF_AMDGPU_MACH_AMDGCN_* values (AMDGPUUsage, "AMDGPU EF_AMDGPU_MACH Values"); gfx1201 = 0x04e,
# checked against `llvm-readelf-22 -h` ("Flags: 0x4e, gfx1201") on a clang-22 code object.
_MACH_TO_GFX = {
    0x02F: "gfx906", 0x030: "gfx908", 0x036: "gfx1030", 0x03F: "gfx90a", 0x041: "gfx1100",
    0x043: "gfx1150", 0x046: "gfx1101", 0x047: "gfx1102", 0x048: "gfx1200", 0x04A: "gfx1151",
    0x04C: "gfx942", 0x04E: "gfx1201", 0x04F: "gfx950",
}
_FEATURE_V4 = {0x000: None, 0x100: "any", 0x200: "off", 0x300: "on"}   # xnack; sramecc is << 2

# Kernel-level metadata keys we report (all integers except the name).
META_KEYS = (".name", ".symbol", ".vgpr_count", ".sgpr_count", ".vgpr_spill_count", ".sgpr_spill_count",
             ".private_segment_fixed_size", ".group_segment_fixed_size", ".wavefront_size",
             ".kernarg_segment_size", ".max_flat_workgroup_size", ".uses_dynamic_stack")


def find_llvm_tool(tool: str, clang: Optional[str] = None) -> Optional[str]:
    """Path of an LLVM tool (``llvm-readelf``, ``llvm-objdump``): next to ``clang``'s real binary
    first (same LLVM build), then ``<tool>-22`` and ``<tool>`` on PATH; None when none exists."""
    cands = []
    if clang and (path := shutil.which(clang)):
        cands.append(os.path.join(os.path.dirname(os.path.realpath(path)), tool))
    cands += [f"{tool}-22", tool]
    for c in cands:
        if (p := shutil.which(c)):
            return p
    return None


def parse_elf_header(binary: bytes) -> dict:
    """Machine, OS ABI and target of an ELF64 little-endian code object (pure Python)."""
    if len(binary) < 64 or binary[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    if binary[4] != 2 or binary[5] != 1:
        raise ValueError("not an ELF64 little-endian file (AMDGPU code objects are)")
    osabi, abiversion = binary[7], binary[8]
    e_type, e_machine, _ver, _entry, _phoff, _shoff, e_flags = struct.unpack_from("<HHIQQQI", binary, 16)
    mach = e_flags & EF_AMDGPU_MACH
    out = {"e_machine": e_machine, "e_type": e_type, "e_flags": e_flags, "osabi": osabi,
           "abiversion": abiversion, "mach": mach, "target": None, "xnack": None, "sramecc": None}
    if e_machine == EM_AMDGPU:
        out["target"] = _MACH_TO_GFX.get(mach, f"unknown-mach-0x{mach:03x}")
        out["xnack"] = _FEATURE_V4.get(e_flags & EF_AMDGPU_FEATURE_XNACK_V4)
        out["sramecc"] = _FEATURE_V4.get((e_flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 2)
    return out


def parse_notes_yaml(text: str) -> tuple[list[dict], Optional[str]]:
    """Kernels (scalar keys of each ``amdhsa.kernels`` entry) and ``amdhsa.target`` from the YAML
    that ``llvm-readelf --notes`` prints. A tiny line parser, enough for this fixed layout: each
    kernel is a list item whose scalar keys sit two columns right of its dash; nested lists
    (``.args``) are deeper and skipped."""
    kernels: list[dict] = []
    target = None
    in_kernels, dash_col = False, -1
    for line in text.splitlines():
        body = line.lstrip(" ")
        col = len(line) - len(body)
        if body.startswith("amdhsa.target:"):
            target = body.split(":", 1)[1].strip().strip("'\"")
        if col == 0 and body:
            in_kernels = body.startswith("amdhsa.kernels:")
            continue
        if not in_kernels:
            continue
        if body.startswith("- ") and (dash_col < 0 or col == dash_col):
            dash_col = col
            kernels.append({})
            body, col = body[2:], col + 2
        elif col != dash_col + 2:
            continue
        m = re.match(r"(\.[\w.]+):\s*(.*)$", body)
        if m and kernels and m.group(1) in META_KEYS and m.group(2):
            v = m.group(2).strip().strip("'\"")
            kernels[-1][m.group(1)[1:]] = int(v) if re.fullmatch(r"-?\d+", v) else (
                {"true": True, "false": False}.get(v, v))
    return kernels, target


def _run_tool(tool: str, args: list[str], binary: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(binary)
        f.flush()
        r = subprocess.run([tool, *args, f.name], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(tool)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def read_kernel_metadata(binary: bytes, readelf: Optional[str] = None) -> tuple[list[dict], Optional[str]]:
    """Per-kernel metadata via ``llvm-readelf --notes``; raises ToolchainUnavailable without it."""
    readelf = readelf or find_llvm_tool("llvm-readelf")
    if not readelf:
        raise ToolchainUnavailable("llvm-readelf not found (scripts/setup_amd_toolchain.sh installs llvm-22)")
    return parse_notes_yaml(_run_tool(readelf, ["--notes"], binary))


def resources_of(meta: dict) -> Resources:
    """Map one kernel's metadata onto :class:`Resources`. Spill bytes count 4 bytes per spilled
    32-bit register (VGPR and SGPR spill counts); the private segment (scratch: spills plus stack
    arrays) is reported as stack_bytes."""
    spills = meta.get("vgpr_spill_count"), meta.get("sgpr_spill_count")
    return Resources(
        registers=meta.get("vgpr_count"), sgprs=meta.get("sgpr_count"),
        spill_bytes=None if spills == (None, None) else 4 * sum(s or 0 for s in spills),
        stack_bytes=meta.get("private_segment_fixed_size"),
        shared_bytes=meta.get("group_segment_fixed_size"), wavefront=meta.get("wavefront_size"))


def kernel_resources(binary: bytes, readelf: Optional[str] = None) -> dict[str, dict]:
    """kernel name -> Resources.to_json(), the shape of :attr:`CodeObject.resources`."""
    kernels, _ = read_kernel_metadata(binary, readelf)
    return {k.get("name", f"kernel{i}"): resources_of(k).to_json() for i, k in enumerate(kernels)}


def inspect_hsaco(binary: bytes, readelf: Optional[str] = None) -> dict:
    """ELF header facts plus every kernel's metadata::

        {"e_machine": 224, "e_flags": 0x4e, "target": "gfx1201", "xnack": None, ...,
         "metadata_target": "amdgcn-amd-amdhsa--gfx1201",
         "kernels": {"name": {"vgpr_count": .., "wavefront_size": 32, ...}}}
    """
    out = parse_elf_header(binary)
    kernels, target = read_kernel_metadata(binary, readelf)
    out["metadata_target"] = target
    out["kernels"] = {k.get("name", f"kernel{i}"): k for i, k in enumerate(kernels)}
    return out


def disassemble(binary: bytes, arch: str, objdump: Optional[str] = None) -> str:
    """``llvm-objdump -d --mcpu=<arch>`` of a code object."""
    objdump = objdump or find_llvm_tool("llvm-objdump")
    if not objdump:
        raise ToolchainUnavailable("llvm-objdump not found (scripts/setup_amd_toolchain.sh installs llvm-22)")
    return _run_tool(objdump, ["-d", f"--mcpu={arch}"], binary)

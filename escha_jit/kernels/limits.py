"""Per-target hardware limits that launches are sized by (torch-free)."""
from __future__ import annotations

from ..spec import nvidia_sm, vendor_of

KIB = 1024
AMD_LDS_BYTES = 64 * KIB           # most LDS one workgroup may allocate on gfx12 (WGP mode)


def block_smem_limit(arch: str) -> int:
    """Most shared memory (static + dynamic, bytes) one block may use on ``arch``, the opt-in
    maximum: NVIDIA per compute capability (CUDA C++ Programming Guide, "Technical Specifications
    per Compute Capability": 227 KiB on 9.x / 10.x / 11.x, 163 KiB on 8.0 / 8.7, 99 KiB on 8.6 / 8.9
    / 12.x, 64 KiB on 7.5, 96 KiB on 7.0 / 7.2); AMD gfx12: the LDS of one workgroup."""
    if vendor_of(arch) == "amd":
        return AMD_LDS_BYTES
    sm = nvidia_sm(arch)
    if sm >= 120:
        return 99 * KIB
    if sm >= 90:
        return 227 * KIB
    if sm in (80, 87):
        return 163 * KIB
    if sm >= 86:
        return 99 * KIB
    if sm >= 75:
        return 64 * KIB
    if sm >= 70:
        return 96 * KIB
    return 48 * KIB


def sm_smem_limit(arch: str) -> int:
    """Shared memory of one NVIDIA SM (bytes), what all its resident blocks share (CUDA C++
    Programming Guide, "Technical Specifications per Compute Capability": 228 KiB on 9.x / 10.x,
    164 KiB on 8.0 / 8.7, 100 KiB on 8.6 / 8.9 / 12.x, 64 KiB on 7.5, 96 KiB on 7.0 / 7.2); 0 on AMD
    (not modelled here)."""
    if vendor_of(arch) == "amd":
        return 0
    sm = nvidia_sm(arch)
    if sm >= 120:
        return 100 * KIB
    if sm >= 90:
        return 228 * KIB
    if sm in (80, 87):
        return 164 * KIB
    if sm >= 86:
        return 100 * KIB
    if sm >= 75:
        return 64 * KIB
    return 96 * KIB


def block_smem_reserved(arch: str) -> int:
    """Shared memory the driver reserves per resident block on NVIDIA sm_80 and later (1 KiB)."""
    return KIB if vendor_of(arch) == "nvidia" and nvidia_sm(arch) >= 80 else 0

"""Per-target hardware limits that launches are sized by (torch-free)."""
from __future__ import annotations

from ..spec import nvidia_sm, vendor_of

KIB = 1024
AMD_LDS_BYTES = 64 * KIB           # most LDS one workgroup may allocate on gfx12 (WGP mode)


def _nvidia_smem(sm: int) -> tuple[int, int]:
    """(one block's opt-in maximum, one SM's total) shared memory in bytes of NVIDIA compute
    capability ``sm`` (CUDA C++ Programming Guide, "Technical Specifications per Compute
    Capability": 227 / 228 KiB on 9.x / 10.x / 11.x, 163 / 164 KiB on 8.0 / 8.7, 99 / 100 KiB on
    8.6 / 8.9 / 12.x, 64 / 64 KiB on 7.5, 96 / 96 KiB on 7.0 / 7.2; 48 KiB blocks before)."""
    if sm >= 120:
        return 99 * KIB, 100 * KIB
    if sm >= 90:
        return 227 * KIB, 228 * KIB
    if sm in (80, 87):
        return 163 * KIB, 164 * KIB
    if sm >= 86:
        return 99 * KIB, 100 * KIB
    if sm >= 75:
        return 64 * KIB, 64 * KIB
    if sm >= 70:
        return 96 * KIB, 96 * KIB
    return 48 * KIB, 48 * KIB


def block_smem_limit(arch: str) -> int:
    """Most shared memory (static + dynamic, bytes) one block may use on ``arch``, the opt-in
    maximum: NVIDIA per compute capability (:func:`_nvidia_smem`); AMD gfx12: the LDS of one
    workgroup."""
    return AMD_LDS_BYTES if vendor_of(arch) == "amd" else _nvidia_smem(nvidia_sm(arch))[0]


def sm_smem_limit(arch: str) -> int:
    """Shared memory of one NVIDIA SM (bytes), what all its resident blocks share
    (:func:`_nvidia_smem`); 0 on AMD (not modelled here)."""
    return 0 if vendor_of(arch) == "amd" else _nvidia_smem(nvidia_sm(arch))[1]


def block_smem_reserved(arch: str) -> int:
    """Shared memory the driver reserves per resident block on NVIDIA sm_80 and later (1 KiB)."""
    return KIB if vendor_of(arch) == "nvidia" and nvidia_sm(arch) >= 80 else 0

"""Occupancy pinning (kernels.fused.occupancy_smem, FusedLaunch.blocks_per_sm, the table's launch
record), on the CPU: the padded shared memory holds a launch to exactly the pinned blocks per SM
where its own shared memory would allow more, and changes nothing otherwise."""
import dataclasses
import json

import pytest

from escha_jit.autotune.table import TuningTable, launch_json, shipped_table_path
from escha_jit.kernels.fused import FusedLaunch, occupancy_smem
from escha_jit.kernels.limits import block_smem_limit, block_smem_reserved, sm_smem_limit


def _blocks_by_smem(smem: int, arch: str) -> int:
    return sm_smem_limit(arch) // (smem + block_smem_reserved(arch))


@pytest.mark.parametrize("arch,smem", [(arch, smem) for arch in ("sm_90", "sm_80", "sm_86", "sm_120")
                                       for smem in (0, 4096, 37_000, 80_000, 150_000)
                                       if smem <= block_smem_limit(arch)])   # (more: a launch the arch refuses)
@pytest.mark.parametrize("blocks", range(1, 17))
def test_padded_shared_memory_holds_the_pinned_blocks(arch, smem, blocks):
    padded = occupancy_smem(smem, blocks, arch)
    assert smem <= padded <= max(smem, block_smem_limit(arch))
    assert _blocks_by_smem(padded, arch) == min(blocks, _blocks_by_smem(smem, arch))
    if padded > smem:                                   # padded only where the pin binds
        assert _blocks_by_smem(smem, arch) > blocks


def test_no_pin_and_amd_leave_shared_memory_alone():
    assert occupancy_smem(12_345, 0, "sm_90") == 12_345
    assert occupancy_smem(12_345, 2, "gfx1201") == 12_345
    assert occupancy_smem(0, 1, "sm_90") == block_smem_limit("sm_90")     # one block: all an SM has
    assert occupancy_smem(150_000, 1, "sm_90") == 150_000                  # one fits anyway: no padding


def test_launch_validates_blocks_per_sm():
    assert FusedLaunch(4).blocks_per_sm == 0
    with pytest.raises(ValueError, match="blocks_per_sm"):
        FusedLaunch(4, blocks_per_sm=-1)


def test_table_records_the_pin_only_where_set(tmp_path):
    assert launch_json(FusedLaunch(8)) == {"splits": 8}
    assert launch_json(FusedLaunch(8, 3)) == {"splits": 8, "blocks_per_sm": 3}
    t = TuningTable.load(shipped_table_path("sm_90"))
    raw = json.load(open(shipped_table_path("sm_90")))
    assert ({k: e["launch"] for k, e in t.to_json()["entries"].items()} ==
            {k: e["launch"] for k, e in raw["entries"].items()})     # launches read back as written: no pin
    key = sorted(k for k in t.entries if k.startswith("fused|"))[0]
    e = t.entries[key]
    t.entries[key] = dataclasses.replace(e, launch=FusedLaunch(e.launch.splits, 2))
    t.save(str(tmp_path / "t.json"))
    back = TuningTable.load(str(tmp_path / "t.json"))
    assert back.entries[key].launch == FusedLaunch(e.launch.splits, 2)
    assert json.load(open(tmp_path / "t.json"))["entries"][key]["launch"] == {"splits": e.launch.splits,
                                                                              "blocks_per_sm": 2}

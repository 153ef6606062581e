"""The SASS main-loop finder (toolchain.sass.main_loop) and benchmarks/sass_stats.py's pieces that
need no compiler: blocks per SM by registers, the kernels a table dispatches."""
import importlib.util
import os

from escha_jit.autotune.table import Entry, TuningTable
from escha_jit.kernels.fused import FusedConfig, FusedLaunch
from escha_jit.toolchain.sass import innermost_loops, instructions, main_loop, opcode, registers_named

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "sass_stats.py")
_spec = importlib.util.spec_from_file_location("sass_stats", _PATH)
sass_stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_stats)

# an outer loop (0x10..0x90) around an inner one with the matrix unit (0x30..0x70), and a shorter
# loop without it (0xa0..0xb0), in cuobjdump's layout
SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;                 /* 0x00000a0000017a02 */
        /*0010*/                   IMAD R2, R3, R4, RZ ;                  /* 0x0000000403027224 */
        /*0020*/                   LDS R5, [R2] ;                         /* 0x0000000002057984 */
        /*0030*/                   LOP3.LUT R6, R5, R7, RZ, 0xc0, !PT ;   /* 0x0000000705067212 */
        /*0040*/                   IMAD R6, R6, R8, RZ ;                  /* 0x0000000806067224 */
        /*0050*/                   HMMA.16816.F32 R12, R16, R6, R12 ;     /* 0x000000061010723c */
        /*0060*/                   ISETP.NE.AND P0, PT, R9, RZ, PT ;      /* 0x000000ff0900720c */
        /*0070*/               @P0 BRA 0x30 ;                             /* 0xfffffffc00ec0947 */
        /*0080*/                   IADD3 R10, R10, 0x1, RZ ;              /* 0x000000010a0a7810 */
        /*0090*/              @!P1 BRA 0x10 ;                             /* 0xfffffffc00dc9947 */
        /*00a0*/                   SHFL.BFLY PT, R3, R4, 0x1, 0x1f ;      /* 0x0c201f0004037f89 */
        /*00b0*/               @P2 BRA 0xa0 ;                             /* 0xfffffffc00f82947 */
        /*00c0*/                   EXIT ;                                 /* 0x000000000000794d */
"""


def test_main_loop_is_the_innermost_loop_with_the_unit():
    loop = main_loop(SASS)
    assert (loop["start"], loop["end"], loop["instructions"]) == (0x30, 0x70, 5)
    assert loop["opcodes"] == {"LOP3.LUT": 1, "IMAD": 1, "HMMA.16816.F32": 1, "ISETP.NE.AND": 1, "BRA": 1}


def test_innermost_loops():
    # the outer loop holds the inner one: not innermost; both others are
    assert [(lp["start"], lp["end"], lp["instructions"]) for lp in innermost_loops(SASS)] == [(0x30, 0x70, 5), (0xa0, 0xb0, 2)]
    assert innermost_loops(SASS)[1]["opcodes"] == {"SHFL.BFLY": 1, "BRA": 1}
    # spans shorter than min_instructions neither count nor hide the loops around them
    assert [(lp["start"], lp["end"]) for lp in innermost_loops(SASS, min_instructions=6)] == [(0x10, 0x90)]


def test_registers_the_loop_names():
    # R6..R16 named; HMMA's R12 / R16 operands are single names here (no width modifier)
    assert main_loop(SASS)["registers"] == 17
    assert registers_named(["LDS.128 R20, [R2]", "IMAD R3, R4, R5, RZ"]) == 24      # R20..R23
    assert registers_named(["LDG.E.64 R8, desc[UR4][R2.64]"]) == 10
    assert registers_named(["MOV R1, c[0x0][0x28]", "IADD3 R2, RZ, UR5, RZ"]) == 3
    assert registers_named(["EXIT"]) == 0


def test_no_loop_with_the_unit():
    assert main_loop(SASS.replace("HMMA.16816.F32", "FFMA")) is None


def test_instruction_lines_and_opcodes():
    ins = instructions(SASS)
    assert len(ins) == 13 and ins[7] == (0x70, "@P0 BRA 0x30")
    assert opcode("@!P1 BRA 0x10") == "BRA" and opcode("IMAD.MOV.U32 R1, RZ, RZ, 0x1") == "IMAD.MOV.U32"


def test_blocks_by_registers():
    # 65536 registers per SM; per-thread counts round up to 8
    assert sass_stats.blocks_by_registers(114, 256) == 2      # 120 x 256 = 30720
    assert sass_stats.blocks_by_registers(135, 256) == 1      # 136 x 256 = 34816
    assert sass_stats.blocks_by_registers(128, 128) == 4


def test_instructions_per_weight():
    # K2 mcg swapped, 4 waves (2 tile columns each), 16 rows per step: 1079 instructions per step
    assert sass_stats.instructions_per_weight(1079, dict(warps=4, rows_per_stage=16)) == 1079 * 32 / (256 * 32)
    # 16 waves: each wave one tile column, 16 rows
    assert sass_stats.instructions_per_weight(701, dict(warps=16, rows_per_stage=16)) == 701 * 32 / (256 * 16)


def test_dispatched_specs_route_small_m_through_the_swapped_kernel():
    cfg = FusedConfig(warps=8, rows_per_stage=16, stages=2)
    table = TuningTable({}, {
        "fused|K2|mcg|4096x4096|f16|M1": Entry(cfg, FusedLaunch(8)),
        "fused|K2|mcg|4096x4096|f16|M4": Entry(cfg, FusedLaunch(8)),
        "fused|K2|mcg|4096x4096|f16|M16": Entry(cfg, FusedLaunch(4)),
        "fused|K2|mcg|8192x28672|f16|M16": Entry(cfg, FusedLaunch(4)),
    })
    specs = sass_stats.dispatched_specs(table, "sm_90", {"4096x4096"})
    assert len(specs) == 2
    swapped = [v for v in specs.values() if v[0].params.get("swap")]
    assert len(swapped) == 1 and swapped[0][1] == ["fused|K2|mcg|4096x4096|f16|M1", "fused|K2|mcg|4096x4096|f16|M4"]
    every = sass_stats.dispatched_specs(table, "sm_90", set())       # one kernel serves both M = 16 entries
    assert sorted(len(keys) for _, keys in every.values()) == [2, 2]
    assert ["fused|K2|mcg|4096x4096|f16|M16", "fused|K2|mcg|8192x28672|f16|M16"] in [k for _, k in every.values()]


def test_pipe_cycles_per_tile():
    # one wave's step of 2 tiles: 24 ALU (half rate), 8 IMAD (FMA heavy, half rate), 1 IMAD.WIDE
    # (two passes), 4 HMMA, one 16-byte shared load per lane (512 bytes), a branch
    ops = {"LOP3.LUT": 16, "SHF.R.U32.HI": 8, "IMAD": 8, "IMAD.WIDE": 1, "HMMA.16816.F32": 4, "LDS.128": 1,
           "BRA": 1}
    c = sass_stats.pipe_cycles(ops, tiles=2)
    assert c["issue"] == 39 / 4 / 2 and c["alu"] == 2 * 24 / 4 / 2
    assert c["fma_heavy"] == (2 * 8 + 4) / 4 / 2 and c["smem"] == 512 / 128 / 2 and c["unit"] == 2
    assert c["bound"] == "alu"                              # 6.0 SM cycles per tile against 4.875 of issue
    c = sass_stats.pipe_cycles({"IMAD": 8, "IDP.4A.U8.U8": 8, "HMMA.16816.F32": 2}, tiles=1)
    assert c["bound"] == "fma_heavy" and c["fma_heavy"] == 8.0 and c["issue"] == 4.5


def test_measured_vs_model_takes_the_fitted_floor_off():
    # one series (K2 mcg M1 f16) on two shapes: 6 us floor, 1 us per 2^20 weights x ... exactly a line
    small, big = (1024, 1024), (8192, 8192)
    us = {s: 6.0 + s[0] * s[1] / 2**24 for s in (small, big)}
    bench = [dict(IC=s[0], OC=s[1], K=2.0, codebook="mcg", M=1, dtype="f16", us=us[s]) for s in us]
    pipes = dict(issue=8.0, alu=10.0, fma_heavy=4.0, smem=4.0, unit=2.0, bound="alu")
    rows = {"k": dict(pipes=pipes, table_keys=["fused|K2|mcg|8192x8192|f16|M1"])}
    (cell,) = sass_stats.measured_vs_model(rows, bench, "8192x8192")
    # 2^24 weights per us over 132 SMs -> 256 weights take 256 * 1780 * 132 / 2^24 SM cycles
    want = 256 * sass_stats.SM_MHZ * sass_stats.SMS / 2**24
    assert abs(cell["measured"] - want) < 1e-9 and cell["bound"] == "alu"
    assert abs(cell["rest_per_unit"] - (want - 10.0) / 2) < 1e-9

"""Offline compilation of shipped specializations for a named arch, no GPU needed (torch-free).

Used by ``escha-jit compile`` and by CI: every spec is rendered and compiled (in parallel
processes), and each code object is checked: no spills; for AMD the ELF really targets the arch
with wave32 and the product kernels use the matrix / dot instruction they are written for; for
NVIDIA the same from the SASS (with the ``sass`` extra), plus the dependent-launch instructions.
Results come back as rows for a table or JSON.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import os
import time
from typing import Any, Iterable, Optional

from .cache import KernelCache
from .errors import EschaError
from .jit import compile_spec, toolchain_for
from .kernels.registry import dynamic_smem, shipped_specs, smem_limit
from .spec import KernelSpec, nvidia_sm
from .toolchain.base import CodeObject

log = logging.getLogger(__name__)


@dataclasses.dataclass
class CompileRow:
    spec: str
    seconds: float
    cached: bool
    registers: Optional[int] = None
    spill_bytes: Optional[int] = None
    shared_bytes: Optional[int] = None
    sgprs: Optional[int] = None
    wavefront: Optional[int] = None
    problems: tuple = ()
    error: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.problems

    @classmethod
    def of_code(cls, spec: KernelSpec, seconds: float, cached: bool, code: CodeObject) -> "CompileRow":
        """The row of a compiled code object: its kernel's resources and
        what check_code_object finds wrong with it."""
        res = code.resources.get(spec.kernel_name(), {})
        return cls(str(spec), seconds, cached, res.get("registers"), res.get("spill_bytes"), res.get("shared_bytes"),
                   res.get("sgprs"), res.get("wavefront"), tuple(check_code_object(spec, code.binary, code.resources)))


def check_code_object(spec: KernelSpec, binary: bytes, resources: dict) -> list[str]:
    """What is wrong with a code object (empty list when nothing)."""
    problems = []
    res = resources.get(spec.kernel_name(), {})
    if not res:
        problems.append("the compiler reported no resources for the kernel")
    if res.get("spill_bytes"):
        problems.append(f"spills {res['spill_bytes']} bytes")
    if res.get("stack_bytes"):
        problems.append(f"uses {res['stack_bytes']} bytes of stack / scratch")
    dyn = dynamic_smem(spec)
    if dyn is not None and (res.get("shared_bytes") or 0) + dyn > smem_limit(spec.arch):
        problems.append(f"static {res.get('shared_bytes') or 0} + dynamic {dyn} bytes of shared memory exceed "
                        f"the {smem_limit(spec.arch)} bytes a block may use on {spec.arch}")
    if spec.vendor == "amd":
        from .toolchain.amd_elf import parse_elf_header
        info = parse_elf_header(binary)
        if info.get("e_machine") != 224:
            problems.append(f"ELF machine {info.get('e_machine')} is not EM_AMDGPU (224)")
        if info.get("target") != spec.arch:
            problems.append(f"ELF targets {info.get('target')}, not {spec.arch}")
        if res.get("wavefront") not in (None, 32):
            problems.append(f"wavefront {res.get('wavefront')}, expected 32")
        if spec.op in MATRIX_INSTRUCTION and not problems:
            problems += _check_amd_matrix_unit(spec, binary)
    elif not binary.startswith(b"\x7fELF"):
        problems.append("not an ELF cubin")
    elif spec.op in SASS_EXPECTED:
        problems += _check_nvidia_sass(spec, binary)
    return problems


# the gfx12 instruction each product kernel must contain (its products' unit)
MATRIX_INSTRUCTION = {"fused": "v_wmma_f32_16x16x16_f16", "fused_i8": "v_wmma_i32_16x16x16_iu8"}
DOT_INSTRUCTION = "v_dot4_i32_iu8"          # fused_i8 with dot=1 (M = 1): the integer dot unit


def expected_instruction(spec: KernelSpec) -> str:
    return DOT_INSTRUCTION if spec.op == "fused_i8" and spec.params.get("dot") else MATRIX_INSTRUCTION[spec.op]


def _check_amd_matrix_unit(spec: KernelSpec, binary: bytes) -> list[str]:
    """The fused kernels must really run on the unit they are written for (expected_instruction)."""
    from .errors import ToolchainUnavailable
    from .toolchain.amd_elf import disassemble
    want = expected_instruction(spec)
    try:
        asm = disassemble(binary, spec.arch)
    except (ToolchainUnavailable, RuntimeError) as e:
        return [f"cannot disassemble to check for v_wmma: {e}"]
    return [] if want in asm else [f"no {want} in the disassembly"]


# what each NVIDIA kernel's SASS must contain: its products' unit (the matrix unit; the integer dot
# unit for fused_i8 with dot=1), the fused and prep kernels' L2 prefetch of the layer's scales
# (prefetch.global.L2 -> CCTL.E.PF2), and on sm_90+ the programmatic-dependent-launch pair the host
# relies on (griddepcontrol.wait -> ACQBULK, griddepcontrol.launch_dependents -> PREEXIT); the coded
# GEMM's activation tiles arrive by TMA (cp.async.bulk.tensor -> UTMALDG)
SASS_EXPECTED = {"fused": ("HMMA.16816.F32",), "fused_i8": ("IMMA.16832.U8.S8",), "gemm": ("HGMMA", "UTMALDG"),
                 "prep": ()}
SASS_DOT = "IDP.4A.S8.U8"
SASS_PREFETCH = {"fused": ("CCTL.E.PF2",), "fused_i8": ("CCTL.E.PF2",), "prep": ("CCTL.E.PF2",)}
SASS_PDL = {"fused": ("ACQBULK", "PREEXIT"), "fused_i8": ("ACQBULK", "PREEXIT"), "prep": ("ACQBULK", "PREEXIT")}


# what those kernels' SASS must not contain: BRA.DIV, ptxas' test for a diverged wave in front of a
# shuffle whose wave it cannot prove converged (each such shuffle then also gets an out-of-line
# WARPSYNC.COLLECTIVE copy: 22-46 tests and 30-40 % of a fused kernel's instructions before session
# 36, its compile time with them). Their wave index comes from platform_cuda.h wave_index().
SASS_FORBIDDEN = {"fused": ("BRA.DIV",), "fused_i8": ("BRA.DIV",), "prep": ("BRA.DIV",), "gemm": ("BRA.DIV",)}


def expected_sass(spec: KernelSpec) -> tuple:
    want = SASS_EXPECTED[spec.op]
    if spec.op == "fused_i8" and spec.params.get("dot"):
        want = (SASS_DOT,)
    want += SASS_PREFETCH.get(spec.op, ())
    if nvidia_sm(spec.arch) >= 90:
        want += SASS_PDL.get(spec.op, ())
    return want


def unchecked(arch: str) -> Optional[str]:
    """Why check_code_object cannot check the instructions of ``arch``'s kernels on this machine,
    or None when it can. NVIDIA: the SASS check is skipped without cuobjdump (the ``sass`` extra);
    AMD: a missing disassembler is a problem of every product kernel, so nothing to say here."""
    from .toolchain.sass import find_cuobjdump
    if nvidia_sm(arch) and not find_cuobjdump():
        return "SASS not checked: cuobjdump not found (pip install 'escha_jit[sass]')"
    return None


def _check_nvidia_sass(spec: KernelSpec, binary: bytes) -> list[str]:
    """The instructions of expected_sass must be in the cubin's SASS, those of SASS_FORBIDDEN not
    (skipped without cuobjdump: the ``sass`` extra, see unchecked(); CI installs it)."""
    from .toolchain.sass import disassemble, find_cuobjdump
    tool = find_cuobjdump()
    if not tool:
        return []
    try:
        sass = disassemble(binary, tool)
    except RuntimeError as e:
        return [f"cannot disassemble to check the SASS: {e}"]
    return ([f"no {w} in the SASS" for w in expected_sass(spec) if w not in sass]
            + [f"{w} in the SASS" for w in SASS_FORBIDDEN.get(spec.op, ()) if w in sass])


def _compile_one(args: tuple) -> CompileRow:
    spec, extra, cache_dir, toolchain = args
    t0 = time.perf_counter()
    try:
        entry = compile_spec(spec, extra, cache=KernelCache(cache_dir), toolchain=toolchain)
    except EschaError as e:
        return CompileRow(str(spec), time.perf_counter() - t0, False, error=str(e))
    return CompileRow.of_code(spec, entry.code.compile_seconds if entry.compiled else time.perf_counter() - t0,
                              not entry.compiled, entry.code)


def compile_all(arch: str, full: bool = True, cache_dir: Optional[str] = None, jobs: Optional[int] = None,
                toolchain: Optional[str] = None, specs: Optional[Iterable[tuple[KernelSpec, dict[str, Any]]]] = None,
                progress=None) -> list[CompileRow]:
    """Compile every shipped spec of ``arch`` (or ``specs``) into ``cache_dir``; rows in spec order."""
    tc = toolchain_for(arch, toolchain)
    tc.fingerprint()                                   # fail early, and once, if it cannot run
    work = [(s, e, cache_dir, tc.name) for s, e in (specs if specs is not None else shipped_specs(arch, full))]
    jobs = jobs or os.cpu_count() or 1
    rows: list[Optional[CompileRow]] = [None] * len(work)
    if jobs == 1:
        for i, w in enumerate(work):
            rows[i] = _compile_one(w)
            if progress:
                progress(rows[i])
    else:
        with cf.ProcessPoolExecutor(jobs) as pool:
            futs = {pool.submit(_compile_one, w): i for i, w in enumerate(work)}
            for f in cf.as_completed(futs):
                rows[futs[f]] = f.result()
                if progress:
                    progress(rows[futs[f]])
    return [r for r in rows if r is not None]


def format_table(rows: list[CompileRow]) -> str:
    lines = [f"{'specialization':<72} {'s':>6} {'regs':>5} {'spill':>5} {'smem':>6} {'status'}"]
    for r in rows:
        status = "ok" + (" (cached)" if r.cached else "") if r.ok else \
            ("ERROR " + r.error.splitlines()[0] if r.error else "; ".join(r.problems))
        lines.append(f"{r.spec:<72} {r.seconds:>6.2f} {r.registers if r.registers is not None else '-':>5} "
                     f"{r.spill_bytes if r.spill_bytes is not None else '-':>5} "
                     f"{r.shared_bytes if r.shared_bytes is not None else '-':>6} {status}")
    return "\n".join(lines)

"""NVRTC's output buffers (CPU: NVRTC needs no GPU)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in a child process: a corrupted b" " would poison every later test of this one.
# A program compiled without ptxas' -v has an empty log: NVRTC writes 1 byte (its NUL).
CHILD = r"""
from cuda.bindings import nvrtc
from escha_jit.toolchain.nvrtc import program_cubin, program_log

def compiled():
    _, prog = nvrtc.nvrtcCreateProgram(b'extern "C" __global__ void k(int* p) { *p = 1; }', b"k.cu", 0, [], [])
    status, = nvrtc.nvrtcCompileProgram(prog, 1, [b"--gpu-architecture=sm_90"])
    assert int(status) == 0, status
    assert nvrtc.nvrtcGetProgramLogSize(prog)[1] == 1          # the case that corrupted b" "
    return prog

def spaces_intact(n=3):
    # n is a run-time value so that b" " * n is built from the shared b" " when called, not folded
    # into a constant at compile time; bytes([32, 32, 32]) is a fresh object to compare with
    return b" " * n == bytes([32, 32, 32])

prog = compiled()
text, cubin = program_log(nvrtc, prog), program_cubin(nvrtc, prog)
ours = spaces_intact() and text == "" and cubin[:4] == b"\x7fELF"
# the detector works: the old code's immutable one-byte buffer is CPython's shared b" "
nvrtc.nvrtcGetProgramLog(compiled(), b" " * 1)
print(f"{ours},{not spaces_intact()}")    # one string: a lone " " written out would be the NUL itself
"""


def test_compile_outputs_leave_shared_bytes_alone():
    """Session 25: NVRTCToolchain passed ``b" " * size`` as the log buffer; for an empty log that is
    CPython's one shared b" ", which NVRTC overwrote with NUL, so every later ``b" " * n`` of the
    process gave NULs (safetensors headers padded with NULs on the H200's parallel test runs)."""
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stdout + r.stderr
    ours, detector = r.stdout.strip().split(",")
    assert detector == "True", "the check no longer sees the old code's corruption: " + r.stdout
    assert ours == "True", "program_log / program_cubin wrote into a shared bytes object or read wrong"


# Two kernels, one with a local array stored to and read from at data-dependent places (a stack
# frame, as spills have). (A volatile array read at one place compiled to no frame with the H200
# host's NVRTC 13.0 in session 27: ptxas' lines and the cubin both said 0 bytes.)
STACK_SRC = r"""
extern "C" __global__ void escha_t_stack(int* p, int i) {
    int a[64];
    for (int j = 0; j < 64; ++j) a[(7 * j + p[j]) & 63] = p[64 + j];
    int s = 0;
    for (int j = 0; j < 8; ++j) s += a[(p[128 + j] + i) & 63];
    p[0] = s;
}
extern "C" __global__ void escha_t_plain(int* p) { p[threadIdx.x] += 1; }
"""


def test_cubin_resources_match_ptxas():
    """Registers and stack frame read from the cubin agree with ptxas' own lines, for each kernel
    the log describes (this machine's and CI's NVRTC describe both; the H200 host's NVRTC 13.0 left
    its log empty even on a process's first compile in session 27's run of this test), and are
    right on their own."""
    from escha_jit.toolchain.base import parse_ptxas_log
    from escha_jit.toolchain.cubin_info import cubin_resources
    from escha_jit.toolchain.nvrtc import NVRTCToolchain
    co = NVRTCToolchain().compile(STACK_SRC, "sm_90")
    log, cub = parse_ptxas_log(co.log), cubin_resources(co.binary)
    assert set(cub) == {"escha_t_stack", "escha_t_plain"}, cub
    for k, r in cub.items():
        if k in log:
            assert (r["registers"], r["stack_bytes"]) == (log[k]["registers"], log[k].get("stack_bytes", 0)), (k, r, log[k])
    assert cub["escha_t_plain"]["registers"] > 0
    assert cub["escha_t_stack"]["stack_bytes"] >= 256 and cub["escha_t_plain"]["stack_bytes"] == 0
    assert cubin_resources(b"not an ELF") == {}


def test_resources_from_the_cubin_when_the_log_is_silent(monkeypatch):
    """Session 26: NVRTC 13.0 on the H200 host prints ptxas' lines only for a process's first compile
    of a program; without them the no-spill checks reported "no resources". The cubin says it."""
    import escha_jit.toolchain.nvrtc as N
    monkeypatch.setattr(N, "parse_ptxas_log", lambda text: {})
    res = N.NVRTCToolchain().compile(STACK_SRC, "sm_90").resources
    assert res["escha_t_stack"]["stack_bytes"] >= 256 and res["escha_t_plain"]["registers"] > 0

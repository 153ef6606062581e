"""Real hipRTC (Debian sid's libhiprtc6 via hip-python) compiling gfx1201 through the package's own
escha_jit.toolchain.hiprtc, inside the chroot of scripts/sid_chroot.sh (TOOLCHAINS.md route 2).

The chroot has no torch and no LLVM tools: the snippet compiles there and hands the code object
back as base64 JSON; it is inspected here with the host's llvm-readelf/llvm-objdump.
CI sets the chroot up first (scripts/bootstrap.sh --test), so a missing chroot FAILS here;
set ESCHA_JIT_SKIP_AMD=1 to skip deliberately.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest

from escha_jit import env

from test_amd_toolchain import ARCH, WMMA_SOURCE, check_wmma_code_object, require_clang_amd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "sid_chroot.sh")
CHROOT = env.sid_chroot()

# Runs in the chroot with its venv's python; the kernel source comes on stdin.
SNIPPET = r"""
import base64, json, sys
from escha_jit.errors import CompileError
from escha_jit.toolchain.hiprtc import HipRTCToolchain
tc = HipRTCToolchain()
assert tc.available(), "hipRTC not loadable in the chroot"
co = tc.compile(sys.stdin.read(), "%s", name="wmma.hip")
try:
    tc.compile('extern "C" __global__ void broken(float* p) {\n  p[0] = undeclared_thing;\n}\n', "%s", name="broken.hip")
    err = None
except CompileError as e:
    err = {"message": str(e), "source_path": e.source_path}
print(json.dumps({"version": tc.version(), "fingerprint": tc.fingerprint(), "fingerprint2": tc.fingerprint(),
                  "seconds": co.compile_seconds, "binary": base64.b64encode(co.binary).decode(),
                  "error": err, "torch_loaded": "torch" in sys.modules}))
""" % (ARCH, ARCH)


def _require_chroot() -> None:
    """Skip on ESCHA_JIT_SKIP_AMD=1; otherwise fail loudly when the chroot cannot be used."""
    if env.skip_amd():
        pytest.skip("ESCHA_JIT_SKIP_AMD=1: AMD toolchain tests skipped on purpose")
    if not os.path.isfile(os.path.join(CHROOT, ".escha-ready")):
        pytest.fail(f"no sid chroot at {CHROOT}: run scripts/sid_chroot.sh setup (as root), "
                    "or set ESCHA_JIT_SKIP_AMD=1 to skip")
    if os.geteuid() != 0:
        pytest.fail("the sid chroot needs root (mount, chroot); set ESCHA_JIT_SKIP_AMD=1 to skip")


def run_in_chroot() -> dict:
    _require_chroot()
    r = subprocess.run([SCRIPT, "run", "python", "-c", SNIPPET], input=WMMA_SOURCE, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"chroot run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def chroot_result() -> dict:
    return run_in_chroot()


def test_hiprtc_wmma_gfx1201(chroot_result):
    require_clang_amd()   # the host's llvm-readelf/objdump inspect the result
    out = chroot_result
    assert out["version"].startswith("hipRTC 6.4"), out["version"]
    assert not out["torch_loaded"]
    check_wmma_code_object(base64.b64decode(out["binary"]))


def test_hiprtc_fingerprint_and_error(chroot_result):
    out = chroot_result
    assert out["fingerprint"] == out["fingerprint2"] and out["version"] in out["fingerprint"]
    err = out["error"]
    assert err is not None, "a broken kernel compiled"
    assert "error: use of undeclared identifier 'undeclared_thing'" in err["message"]
    assert err["source_path"] and err["source_path"] in err["message"]


# ---------------------------------------------------------------- the fused kernels through hipRTC
# A representative subset of the shipped gfx1201 fused specializations (every codebook, integer and
# half rates, f16 and bf16, 1..8 m tiles, both A-operand modes), the opt-in int8-activation kernels
# (mul1, M <= 8; op "fused_i8", v_wmma_i32_16x16x16_iu8) and the XH prep kernel, compiled
# inside the chroot by the package's own path: escha_jit.kernels.* -> escha_jit.render ->
# escha_jit.jit.compile_spec(toolchain="hiprtc") -> hip-python -> libhiprtc. No torch there.
FUSED_SUBSET = [(4.0, "mcg", 1, "f16"), (4.0, "mul1", 1, "bf16"), (2.0, "3inst", 16, "f16"),
                (2.5, "mul1", 32, "f16"), (3.0, "mcg", 128, "bf16"), (8.0, "mul1", 4, "f16")]
INT8_SUBSET = [(2.0, "mul1", 1, "f16"), (3.5, "mul1", 8, "bf16")]

FUSED_SNIPPET = r"""
import base64, json, sys, tempfile, time
from escha_jit.cache import KernelCache
from escha_jit.jit import compile_spec
from escha_jit.kernels import fused, prep
cases, int8_cases = json.loads(sys.stdin.read())
cache = KernelCache(tempfile.mkdtemp(prefix="escha-hiprtc-"))
out = []
specs = [(fused.spec_for("%s", K, cb, dt, dt, fused.default_config(M, "amd")), None) for K, cb, M, dt in cases]
specs += [(fused.spec_for("%s", K, cb, dt, dt, fused.default_config_i8(M, "amd"), act_quant="int8"), None)
          for K, cb, M, dt in int8_cases]
specs.append((prep.spec_for("%s", "f16"), None))
for spec, _ in specs:
    extra = fused.render_extra(spec) if spec.op.startswith("fused") else prep.render_extra(spec)
    t0 = time.perf_counter()
    e = compile_spec(spec, extra, cache=cache, toolchain="hiprtc")
    out.append({"spec": spec.to_json(), "name": spec.kernel_name(), "seconds": time.perf_counter() - t0,
                "toolchain": e.code.toolchain, "binary": base64.b64encode(e.code.binary).decode()})
print(json.dumps({"rows": out, "torch_loaded": "torch" in sys.modules}))
""" % (ARCH, ARCH, ARCH)


@pytest.fixture(scope="module")
def chroot_fused() -> dict:
    _require_chroot()
    r = subprocess.run([SCRIPT, "run", "python", "-c", FUSED_SNIPPET], input=json.dumps([FUSED_SUBSET, INT8_SUBSET]),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"chroot run failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_hiprtc_fused_gfx1201(chroot_fused):
    """Every kernel of the subset: a gfx1201 wave32 code object with no spills or scratch, and the
    fused ones run on the WMMA unit (checked here with the host's LLVM tools)."""
    require_clang_amd()
    from escha_jit.offline import check_code_object
    from escha_jit.spec import KernelSpec
    from escha_jit.toolchain import amd_elf
    out = chroot_fused
    assert not out["torch_loaded"]
    assert len(out["rows"]) == len(FUSED_SUBSET) + len(INT8_SUBSET) + 1
    for row in out["rows"]:
        assert row["toolchain"].startswith("hiprtc|hipRTC 6.4"), row["toolchain"]
        d = dict(row["spec"])
        tile = d.pop("tile")
        spec = KernelSpec.make(d.pop("op"), d.pop("arch"), tile=tile, **d)
        assert spec.kernel_name() == row["name"]
        binary = base64.b64decode(row["binary"])
        res = amd_elf.kernel_resources(binary)
        assert check_code_object(spec, binary, res) == [], row["name"]
        k = res[row["name"]]
        assert k["wavefront"] == 32 and not k["spill_bytes"] and not k["stack_bytes"], (row["name"], k)
        if spec.op.startswith("fused"):
            asm = amd_elf.disassemble(binary, ARCH)
            from escha_jit.offline import expected_instruction
            assert expected_instruction(spec) in asm, row["name"]

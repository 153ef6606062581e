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

from test_amd_toolchain import ARCH, WMMA_SOURCE, check_wmma_code_object, require_clang_amd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "sid_chroot.sh")
CHROOT = os.environ.get("ESCHA_JIT_SID_CHROOT") or os.path.join(REPO, ".ci-cache", "sid")

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


def run_in_chroot() -> dict:
    if os.environ.get("ESCHA_JIT_SKIP_AMD") == "1":
        pytest.skip("ESCHA_JIT_SKIP_AMD=1: AMD toolchain tests skipped on purpose")
    if not os.path.isfile(os.path.join(CHROOT, ".escha-ready")):
        pytest.fail(f"no sid chroot at {CHROOT}: run scripts/sid_chroot.sh setup (as root), "
                    "or set ESCHA_JIT_SKIP_AMD=1 to skip")
    if os.geteuid() != 0:
        pytest.fail("the sid chroot needs root (mount, chroot); set ESCHA_JIT_SKIP_AMD=1 to skip")
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

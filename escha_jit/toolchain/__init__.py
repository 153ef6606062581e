"""Compilers that turn rendered HIP-dialect sources into code objects (torch-free)."""
from __future__ import annotations


def describe_toolchains() -> list[tuple[str, str]]:
    """(name, one-line description) of every toolchain this machine has, or why it is missing."""
    out = []
    try:
        from cuda.bindings import nvrtc
        err, major, minor = nvrtc.nvrtcVersion()
        out.append(("nvrtc", f"NVRTC {major}.{minor} (cuda-bindings)" if int(err) == 0 else f"unusable: {err}"))
    except Exception as e:  # noqa: BLE001 - any import/load failure means "not available"
        out.append(("nvrtc", f"not available ({type(e).__name__}: {e}); pip install 'escha_jit[cuda]'"))
    try:
        from hip import hiprtc
        err, major, minor = hiprtc.hiprtcVersion()
        out.append(("hiprtc", f"hipRTC {major}.{minor} (hip-python)"))
    except Exception as e:  # noqa: BLE001
        out.append(("hiprtc", f"not available ({type(e).__name__}: {str(e)[:80]}); pip install 'escha_jit[rocm]'"))
    return out

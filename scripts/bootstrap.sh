#!/usr/bin/env bash
# Set up a fresh machine for escha_jit: a virtual environment in .venv with torch, the package
# (editable) and its NVIDIA compile extras. With --test, also the test dependencies.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=0
for a in "$@"; do
  case "$a" in
    --test) want_test=1 ;;
    *) echo "usage: $0 [--test]" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# CPU torch: on our Debian machines pip takes 2.13.0 from a local file; elsewhere from PyPI.
python -c 'import torch' 2>/dev/null || python -m pip install -q "torch==2.13.0"
extras="cuda,sass"
[ "$want_test" = 1 ] && extras="$extras,test"
python -m pip install -q -e ".[$extras]"
# AMD gfx1201 compile routes for the tests (root: apt, debootstrap): clang-22 + hipRTC header and
# device libs, and the Debian sid chroot with real hipRTC; the oldest NVRTC the cuda extra allows.
# All are no-ops when already set up.
if [ "$want_test" = 1 ]; then ./scripts/setup_amd_toolchain.sh; ./scripts/sid_chroot.sh setup; ./scripts/nvrtc_floor.sh; fi
echo "bootstrap: done ($(python -c 'import torch, escha_jit; print("torch", torch.__version__, "escha_jit", escha_jit.__version__)'))"

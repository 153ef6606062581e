#!/usr/bin/env bash
# A virtual environment with the OLDEST NVRTC that pyproject's `cuda` extra allows (13.0: what
# torch's cu130 wheels bring, e.g. on our H200), for the test that compiles every shipped sm_90
# specialization with it. NVRTC front ends differ between minor versions: 13.5 accepted a generic
# lambda in a device function that 13.0 rejects as a host function (benchmarks/RESULTS.md
# session 13), and CI's main environment gets the newest. Torch-free: the offline compile path
# needs only cuda-bindings, NVRTC, the CUDA runtime headers and jinja2.
# Location: $ESCHA_JIT_NVRTC_FLOOR (default <repo>/.ci-cache/nvrtc-floor). Idempotent.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${ESCHA_JIT_NVRTC_FLOOR:-$REPO/.ci-cache/nvrtc-floor}
PY=${PYTHON:-python3}
# keep these at the floor of pyproject.toml's `cuda` extra
PINS=("cuda-bindings==13.0.*" "nvidia-cuda-nvrtc==13.0.48" "nvidia-cuda-runtime==13.0.*" "jinja2>=3")
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -c 'from cuda.bindings import nvrtc; import jinja2; assert nvrtc.nvrtcVersion()[1:] == (13, 0)' 2>/dev/null \
  || "$VENV/bin/python" -m pip install -q "${PINS[@]}"
echo "nvrtc floor: $("$VENV/bin/python" -c 'from cuda.bindings import nvrtc; print("NVRTC %d.%d" % tuple(nvrtc.nvrtcVersion()[1:]))') in $VENV"

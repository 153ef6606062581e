#!/usr/bin/env bash
# Session 51's device runs. The standing figure is an H200 figure, so both steps stop at once on
# any other card (the reply names it).
#   decode  the standing figure (144 decode cells, session 46's step) of this checkout
#   twins   session 50's four twin-adopted table entries against the configs they replaced
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-.out}; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu"
case "$gpu" in *H200*) ;; *) [ -n "${ANY_GPU:-}" ] || { echo "not an H200: skipped"; exit 3; } ;; esac
case "${1:-}" in
  decode) TAG=${TAG:-s51} OUT=$OUT bash docs/experiments/s46-gpu-plan.sh decode ;;
  twins)  OUT=$OUT bash docs/experiments/s50-twins-check.sh ;;
  *) echo "usage: $0 decode|twins"; exit 2 ;;
esac

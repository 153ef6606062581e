#!/usr/bin/env bash
# A Debian sid chroot with real hipRTC (TOOLCHAINS.md route 2), for compiling through the package's
# own hipRTC code path on a machine without ROCm or an AMD GPU.
#
#   scripts/sid_chroot.sh setup            create it (idempotent; a no-op when it is ready)
#   scripts/sid_chroot.sh run CMD [ARG..]  run CMD in the chroot, cwd /repo = this checkout
#                                          (bind-mounted read-only), with the chroot venv's python
#                                          first on PATH and PYTHONPATH=/repo (no torch in there)
#   scripts/sid_chroot.sh versions         print what is installed in it
#
# Location: $ESCHA_JIT_SID_CHROOT (default <repo>/.ci-cache/sid). Needs root, mount and chroot.
#
# Why these versions (sid as served here in Nov 2026):
#   * hipRTC is libhiprtc6 6.4.3 (paired with comgr libamd-comgr3 7.0.2 and LLVM 21);
#   * hip-python must match hipRTC's major.minor: 6.4.3.555.40. hip-python 10.x is a different
#     (ROCm 7+) binding set, 7.2.x targets ROCm 7.2. 6.4.x wheels exist only up to CPython 3.13,
#     while sid's default python3 is 3.14, so the venv is made with sid's python3.13 (not
#     python3-venv). hip-python dlopens the unversioned libhiprtc.so, which libamdhip64-dev ships.
#   * sid's Release file on the mirror is past Valid-Until (a frozen snapshot): the chroot's apt
#     gets Acquire::Check-Valid-Until=false; signatures are still verified.
# sid moves: every package is pinned, and a missing pin fails with what sid has now.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CHROOT=${ESCHA_JIT_SID_CHROOT:-$REPO/.ci-cache/sid}
MIRROR=${ESCHA_JIT_SID_MIRROR:-http://deb.debian.org/debian}
VENV=/opt/escha-venv
CHROOT_PY=python3.13
# --- pins ---
DEBS="libhiprtc6=6.4.3-5 libamd-comgr3=7.0.2+dfsg-3 rocm-device-libs-21=7.0.2+dfsg-3
      libamdhip64-dev=6.4.3-5 python3.13-venv=3.13.18-1"
WHEELS="hip-python==6.4.3.555.40 numpy==2.4.6 jinja2==3.1.6 markupsafe==3.0.4"
STAMP_TEXT="debs: $(echo $DEBS) | wheels: $WHEELS"
STAMP=$CHROOT/.escha-ready

die() { echo "sid_chroot: ERROR: $*" >&2; exit 1; }
say() { echo "sid_chroot: $*"; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, mount, chroot)"

# Mount /proc (and the repo, for `run`) and undo it on any exit. umount -l so that a process
# still holding a file there cannot leave the mount behind.
MOUNTED=()
cleanup() {
  local i
  for (( i=${#MOUNTED[@]}-1; i>=0; i-- )); do umount -l "${MOUNTED[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP   # so that the EXIT trap (umount) also runs when we are killed
mount_proc() {
  mountpoint -q "$CHROOT/proc" || { mount -t proc proc "$CHROOT/proc" && MOUNTED+=("$CHROOT/proc"); }
}
in_chroot() { chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                DEBIAN_FRONTEND=noninteractive "$@"; }

setup() {
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ]; then
    say "ready at $CHROOT"; return 0
  fi
  local t0; t0=$(date +%s)
  if ! command -v debootstrap >/dev/null; then
    say "apt-get install debootstrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
      die "could not install debootstrap"
  fi
  # A half-made chroot (interrupted run, changed pins) is rebuilt from scratch: cheaper than
  # reasoning about its state. Refuse if something is still mounted inside it.
  if [ -e "$CHROOT" ]; then
    grep -q " $CHROOT/" /proc/mounts && die "something is mounted under $CHROOT; umount it first"
    say "removing stale $CHROOT"; rm -rf "$CHROOT"
  fi
  mkdir -p "$CHROOT"
  say "debootstrap sid (minbase) -> $CHROOT"
  # minbase: dpkg+apt only. The rest is installed by apt inside (dependency resolution by apt,
  # not by debootstrap's simpler resolver).
  debootstrap --variant=minbase sid "$CHROOT" "$MIRROR" > "$CHROOT.debootstrap.log" 2>&1 ||
    die "debootstrap failed; last lines of $CHROOT.debootstrap.log:
$(tail -n 15 "$CHROOT.debootstrap.log")"
  rm -f "$CHROOT.debootstrap.log"
  cat > "$CHROOT/etc/apt/apt.conf.d/90escha" <<'EOF'
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Dpkg::Options { "--force-unsafe-io"; };
EOF
  mount_proc
  say "apt-get install $(echo $DEBS)"
  in_chroot apt-get update -qq || die "apt-get update in the chroot failed"
  local d name ver cand
  for d in $DEBS; do   # check every pin before installing, to say exactly what moved
    name=${d%%=*}; ver=${d#*=}
    cand=$(in_chroot apt-cache madison "$name" | awk -v v="$ver" '$3==v{print $3}')
    [ "$cand" = "$ver" ] || die "sid moved: $name=$ver is not available (sid has: $(in_chroot apt-cache madison "$name" | awk '{print $3}' | tr '\n' ' ')); update DEBS in $0"
  done
  in_chroot apt-get install -y -qq $DEBS > "$CHROOT/root/apt-install.log" 2>&1 ||
    die "apt-get install failed in the chroot; see $CHROOT/root/apt-install.log:
$(tail -n 15 "$CHROOT/root/apt-install.log")"
  in_chroot apt-get clean

  # Wheels are downloaded on the host (the chroot has no pip), for the chroot's CPython and glibc.
  local pyver; pyver=$(in_chroot $CHROOT_PY -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
    die "$CHROOT_PY is missing in the chroot"
  local PY=${PYTHON:-}
  [ -n "$PY" ] || { [ -x "$REPO/.venv/bin/python" ] && PY="$REPO/.venv/bin/python"; } || PY=python3
  "$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip; run scripts/bootstrap.sh first or set PYTHON"
  say "pip download $WHEELS (cp${pyver/./}, manylinux x86_64)"
  mkdir -p "$CHROOT/tmp/wheels"
  "$PY" -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp \
      --abi "cp${pyver/./}" --abi abi3 --abi none --platform manylinux_2_28_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
      -d "$CHROOT/tmp/wheels" $WHEELS || die "pip download of $WHEELS for CPython $pyver failed"
  in_chroot $CHROOT_PY -m venv "$VENV" || die "venv creation failed"
  in_chroot "$VENV/bin/python" -m pip install -q --no-index --find-links /tmp/wheels $WHEELS ||
    die "pip install in the chroot failed"
  rm -rf "$CHROOT/tmp/wheels"
  # hiprtcVersion says a fixed 9.0 on ROCm 6.4; the HIP runtime version is the real one.
  in_chroot "$VENV/bin/python" -c 'from hip import hip, hiprtc
e, a, b = hiprtc.hiprtcVersion(); assert int(e) == 0, e
e, v = hip.hipRuntimeGetVersion(); assert int(e) == 0, e
print("sid_chroot: hip-python loads hipRTC (hiprtcVersion %d.%d), HIP runtime %d" % (a, b, v))' ||
    die "hip-python cannot load libhiprtc in the chroot"
  echo "$STAMP_TEXT" > "$STAMP"
  versions
  say "ready in $(( $(date +%s) - t0 )) s at $CHROOT ($(du -sh --one-file-system "$CHROOT" | cut -f1))"
}

versions() {
  [ -f "$STAMP" ] || die "no chroot at $CHROOT; run: $0 setup"
  in_chroot dpkg-query -W -f='  ${Package}=${Version}\n' $(for d in $DEBS; do echo "${d%%=*}"; done)
  in_chroot "$VENV/bin/python" -m pip list --format=freeze 2>/dev/null | sed 's/^/  /'
}

run() {
  [ $# -gt 0 ] || die "usage: $0 run CMD [ARG...]"
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ] || die "no (current) chroot at $CHROOT; run: $0 setup"
  # One run at a time: the mounts at /repo and /proc are shared by all runs.
  exec 9>"$CHROOT.lock"; flock 9
  mount_proc
  mkdir -p "$CHROOT/repo"
  mount --bind "$REPO" "$CHROOT/repo" && MOUNTED+=("$CHROOT/repo") || die "mount --bind $REPO failed"
  # Read-only, so nothing inside can change the checkout (pycache included).
  mount -o remount,bind,ro "$CHROOT/repo" || echo "sid_chroot: warning: /repo stays writable" >&2
  local rc=0
  chroot "$CHROOT" /usr/bin/env -i PATH="$VENV/bin:/usr/bin:/bin" HOME=/root LANG=C.UTF-8 \
      PYTHONPATH=/repo PYTHONDONTWRITEBYTECODE=1 ESCHA_JIT_LOG_LEVEL="${ESCHA_JIT_LOG_LEVEL:-INFO}" \
      /bin/sh -c 'cd /repo && exec "$@"' sh "$@" || rc=$?
  return $rc
}

case "${1:-}" in
  setup) setup ;;
  run) shift; run "$@" ;;
  versions) versions ;;
  *) echo "usage: $0 setup | run CMD [ARG...] | versions" >&2; exit 2 ;;
esac

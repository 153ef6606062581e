#!/usr/bin/env bash
# Install the offline AMD gfx12 compile route (TOOLCHAINS.md route 1) on Debian 12, as root:
#   * clang-22 / lld-22 / llvm-22 from Debian's archive;
#   * hipRTC's builtin header hiprtc_runtime.h, taken out of the rocm-llvm-python wheel (PyPI);
#   * ROCm device-library bitcode (ocml/ockl/oclc .bc) from Debian sid's rocm-device-libs-21 .deb.
# Header and bitcode go to $ESCHA_JIT_AMD_SYSROOT (default <repo>/.ci-cache/amd):
#   include/hiprtc_runtime.h, bitcode/*.bc, VERSIONS.
# Idempotent: each step is skipped when its result is already there (and checksums match).
#
# What we found (Nov 2026, deb.debian.org as served to these machines):
#   * clang-22/lld-22/llvm-22 1:22.1.8-1~deb12u1 live in the *bookworm-security* suite, which the
#     stock /etc/apt/sources.list.d/debian.sources already lists; only `apt-get update` is needed
#     (a fresh image's package lists may be empty or stale). No extra source, no backports.
#   * sid's Release file there is past its Valid-Until date (the mirror is a frozen snapshot), so
#     our private sid apt config sets Acquire::Check-Valid-Until=false. Signatures are still checked
#     against the host's debian-archive-keyring.
#   * hiprtc_runtime.h: AMD generates it per release from clang's HIP wrapper headers; the wheel
#     carries it as rocm/amd_comgr/hiprtc_runtime.h (6.4.x and 7.x wheels alike). We pin AMD's
#     ROCm 7.0.2 copy (the comgr version sid pairs with hipRTC). sid's hipRTC 6.4.3 embeds its
#     own copy, generated at Debian build time, in libhiprtc-builtins.so: it differs in a few math
#     wrappers (exp10f/logf call __builtin_* there, __ocml_* in AMD's), so routes 1 and 2 need not
#     produce byte-identical code objects.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SYSROOT=${ESCHA_JIT_AMD_SYSROOT:-$REPO/.ci-cache/amd}

# --- pins (change together; the sha256 makes a silently re-uploaded artifact fail loudly) ---
LLVM_MAJOR=22
RLP_VERSION=7.0.2.555.43                     # rocm-llvm-python wheel carrying the header
RLP_HEADER=rocm/amd_comgr/hiprtc_runtime.h
RLP_HEADER_SHA256=8bd4af007ad6057e0047660a505d17d526c92ad3062ef935ef9b162a8eb72661
DEVLIBS_PKG=rocm-device-libs-21
DEVLIBS_VERSION=7.0.2+dfsg-3                 # Debian sid
SID_MIRROR=${ESCHA_JIT_SID_MIRROR:-http://deb.debian.org/debian}

die() { echo "setup_amd_toolchain: ERROR: $*" >&2; exit 1; }
say() { echo "setup_amd_toolchain: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get install)"
command -v apt-get >/dev/null || die "needs a Debian system with apt-get"
mkdir -p "$SYSROOT/include" "$SYSROOT/bitcode"
t0=$(date +%s)

# --- 1. clang/lld/llvm 22 -------------------------------------------------------------------
pkgs="clang-$LLVM_MAJOR lld-$LLVM_MAJOR llvm-$LLVM_MAJOR"
have_llvm() {
  command -v "clang-$LLVM_MAJOR" >/dev/null && command -v "ld.lld-$LLVM_MAJOR" >/dev/null &&
    command -v "llvm-readelf-$LLVM_MAJOR" >/dev/null && command -v "llvm-objdump-$LLVM_MAJOR" >/dev/null
}
if have_llvm; then
  say "clang-$LLVM_MAJOR already installed"
else
  say "apt-get install $pkgs"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null ||
    die "apt-get install $pkgs failed; on bookworm they come from the bookworm-security suite (see: apt-cache policy clang-$LLVM_MAJOR)"
  have_llvm || die "installed $pkgs but clang-$LLVM_MAJOR/ld.lld-$LLVM_MAJOR/llvm-readelf-$LLVM_MAJOR are not on PATH"
fi

# --- 2. hiprtc_runtime.h from the rocm-llvm-python wheel ---------------------------------------
hdr="$SYSROOT/include/hiprtc_runtime.h"
if [ -f "$hdr" ] && echo "$RLP_HEADER_SHA256  $hdr" | sha256sum -c --status; then
  say "hiprtc_runtime.h already there"
else
  # Any Python with pip can download it: prefer the project's venv (bootstrap.sh made it).
  PY=${PYTHON:-}
  [ -n "$PY" ] || { [ -x "$REPO/.venv/bin/python" ] && PY="$REPO/.venv/bin/python"; } || PY=python3
  "$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip; run scripts/bootstrap.sh first or set PYTHON"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  say "pip download rocm-llvm-python==$RLP_VERSION (only for $RLP_HEADER)"
  # The header is identical in every wheel of a version; fixing the tags makes the file deterministic.
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
      --abi cp311 --platform manylinux_2_27_x86_64 -d "$tmp" "rocm-llvm-python==$RLP_VERSION" ||
    die "pip download rocm-llvm-python==$RLP_VERSION failed"
  "$PY" - "$tmp" "$RLP_HEADER" "$hdr.tmp" <<'EOF' || die "could not extract the header from the wheel"
import glob, sys, zipfile
whl, = glob.glob(sys.argv[1] + "/*.whl")
with zipfile.ZipFile(whl) as z, open(sys.argv[3], "wb") as f:
    f.write(z.read(sys.argv[2]))
EOF
  echo "$RLP_HEADER_SHA256  $hdr.tmp" | sha256sum -c --status ||
    die "hiprtc_runtime.h from rocm-llvm-python==$RLP_VERSION has sha256 $(sha256sum "$hdr.tmp" | cut -d' ' -f1), expected $RLP_HEADER_SHA256"
  mv "$hdr.tmp" "$hdr"
  rm -rf "$tmp"; trap - EXIT
fi

# --- 3. device-library bitcode from sid's rocm-device-libs-21 ------------------------------------
stamp="$SYSROOT/bitcode/.version"
if [ -f "$SYSROOT/bitcode/ocml.bc" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$DEVLIBS_PKG=$DEVLIBS_VERSION" ]; then
  say "$DEVLIBS_PKG bitcode already there"
else
  # A private apt configuration: sid's lists and the .deb live under $apt, the system's
  # sources, lists and dpkg status are never touched.
  apt="$SYSROOT/.apt-sid"
  rm -rf "$apt"; mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/empty" "$apt/deb"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $SID_MIRROR sid main" > "$apt/sources.list"
  cat > "$apt/apt.conf" <<EOF
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "$apt/empty";
Dir::Etc::Parts "$apt/empty";
Dir::Etc::PreferencesParts "$apt/empty";
Dir::State::Lists "$apt/lists";
Dir::State::status "/dev/null";
Dir::Cache "$apt/cache";
Acquire::Check-Valid-Until "false";
Acquire::Languages "none";
APT::Sandbox::User "root";
EOF
  say "apt-get download $DEVLIBS_PKG=$DEVLIBS_VERSION from sid"
  APT_CONFIG="$apt/apt.conf" apt-get update -qq || die "apt-get update of sid ($SID_MIRROR) failed"
  (cd "$apt/deb" && APT_CONFIG="$apt/apt.conf" apt-get download -qq "$DEVLIBS_PKG=$DEVLIBS_VERSION") ||
    die "sid moved: $DEVLIBS_PKG=$DEVLIBS_VERSION is gone (sid has: $(APT_CONFIG="$apt/apt.conf" apt-cache policy "$DEVLIBS_PKG" | awk '/Candidate/{print $2}')); update DEVLIBS_VERSION in $0"
  dpkg-deb -x "$apt"/deb/*.deb "$apt/root"
  bcdir=$(find "$apt/root" -type f -name ocml.bc -printf '%h\n' | head -n1)
  [ -n "$bcdir" ] || die "no ocml.bc in $DEVLIBS_PKG"
  rm -rf "$SYSROOT/bitcode"; mkdir -p "$SYSROOT/bitcode"
  cp "$bcdir"/*.bc "$SYSROOT/bitcode/"
  echo "$DEVLIBS_PKG=$DEVLIBS_VERSION" > "$stamp"
  rm -rf "$apt"
fi

# --- report ------------------------------------------------------------------------------------
clang_v=$("clang-$LLVM_MAJOR" --version | head -n1)
deb_v=$(dpkg-query -W -f='${Package}=${Version} ' $pkgs)
{
  echo "clang: $clang_v"
  echo "debs: $deb_v"
  echo "hiprtc_runtime.h: rocm-llvm-python==$RLP_VERSION sha256=$RLP_HEADER_SHA256"
  echo "bitcode: $(cat "$stamp") ($(ls "$SYSROOT/bitcode" | wc -l) files)"
} > "$SYSROOT/VERSIONS"
sed 's/^/setup_amd_toolchain:   /' "$SYSROOT/VERSIONS"
say "ready in $(( $(date +%s) - t0 )) s: ESCHA_JIT_AMD_SYSROOT=$SYSROOT ($(du -sh "$SYSROOT" | cut -f1))"

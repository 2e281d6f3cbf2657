#!/bin/sh
# Opt-in: build oneDNN 3.7.2 from Debian 13's source into /opt/onednn-3.7,
# which CMake then prefers to the oneDNN 3.2 that scripts/install-deps.sh
# installs (docs/INSTALL.md, "Opt-in: oneDNN 3.7 from source"). On AVX2 its
# convolutions are 4-11 % faster than 3.2's (bench/RESULTS.md, "Issue 32:
# oneDNN 3.7 from source"); the build takes about 45 minutes on 2 cores,
# which is why it is not the default. Debian 13's binary package cannot
# serve: it needs glibc 2.38, Debian 12 has 2.36.
#
#   scripts/build-onednn.sh            download (Debian's archive), check, build, install
#   scripts/build-onednn.sh DIR        the same from DIR/onednn_3.7.2+ds.orig.tar.xz
#                                      (no network)
#   env: ONEDNN_PREFIX=/opt/onednn-3.7  JOBS=$(nproc)
#
# The build: CPU engine, GNU OpenMP (gpud's own loops use it: one OpenMP
# runtime per process), only the primitives gpud calls, every ISA's kernels
# (AVX2, AVX-512, AMX) picked at run time. Needs cmake, g++, curl and xz
# (scripts/install-deps.sh installs them). Idempotent: an installed 3.7.2
# in the prefix is kept.
set -eu
VERSION=3.7.2
TARBALL=onednn_3.7.2+ds.orig.tar.xz
SHA256=0cc51ca26c1af6a2bb1e71e378e7046f3ceb3e71791ee9d4e246d50f904a6ea6
URL=http://deb.debian.org/debian/pool/main/o/onednn/$TARBALL
PRIMITIVES="CONVOLUTION;INNER_PRODUCT;REORDER;BATCH_NORMALIZATION;ELTWISE;POOLING"
PREFIX=${ONEDNN_PREFIX:-/opt/onednn-3.7}
JOBS=${JOBS:-$(nproc)}
SUDO=
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

hdr=$PREFIX/include/oneapi/dnnl/dnnl_version.h
if [ -e "$PREFIX/lib/libdnnl.so.3" ] && [ -f "$hdr" ] &&
   grep -q "^#define DNNL_VERSION_MINOR 7$" "$hdr" && grep -q "^#define DNNL_VERSION_PATCH 2$" "$hdr"; then
    echo "build-onednn: oneDNN $VERSION already in $PREFIX"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM   # through the EXIT trap: no half-built tree left in /tmp
if [ $# -ge 1 ]; then
    src=$1/$TARBALL
    [ -f "$src" ] || { echo "build-onednn: $src missing" >&2; exit 1; }
else
    src=$work/$TARBALL
    curl -fsSL --retry 3 -o "$src" "$URL" ||
        { echo "build-onednn: could not download $URL; check the network, or fetch it" \
               "elsewhere and pass its folder: scripts/build-onednn.sh DIR" >&2; exit 1; }
fi
echo "$SHA256  $src" | sha256sum -c --quiet - ||
    { echo "build-onednn: $src does not match its SHA-256 ($SHA256); delete it and retry" >&2
      exit 1; }
tar -xJf "$src" -C "$work"
log=$work/build.log
echo "build-onednn: building oneDNN $VERSION with $JOBS jobs into $PREFIX (about 45 minutes" \
     "on 2 cores)"
if ! { cmake -S "$work/oneDNN-$VERSION" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
           -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
           -DDNNL_CPU_RUNTIME=OMP -DDNNL_GPU_RUNTIME=NONE -DONEDNN_BUILD_GRAPH=OFF \
           -DDNNL_BUILD_TESTS=OFF -DDNNL_BUILD_EXAMPLES=OFF \
           -DDNNL_ENABLE_PRIMITIVE="$PRIMITIVES" &&
       cmake --build "$work/build" -j "$JOBS" &&
       $SUDO cmake --install "$work/build"; } >"$log" 2>&1; then
    tail -30 "$log" >&2
    cp "$log" /tmp/build-onednn.log 2>/dev/null || true
    echo "build-onednn: the build failed (the log's end above, whole in /tmp/build-onednn.log);" \
         "it needs cmake and g++: scripts/install-deps.sh" >&2
    exit 1
fi
echo "build-onednn: oneDNN $VERSION in $PREFIX; reconfigure ddpipe's build (a fresh build" \
     "folder, or -DDDPIPE_ONEDNN_ROOT=$PREFIX) to use it"

#!/bin/sh
# Pack a built tree for a GPU machine that has the NVIDIA stack (driver, CUDA,
# cuDNN, NCCL, e.g. from PyTorch's wheels) but none of ddpipe's Debian
# libraries and no package registry (offline GPU clusters):
#   scripts/gpu-bundle.sh [--gpu-only] BUILD OUT.tar.xz
# BUILD is a configured and built tree (-DDDPIPE_CUDA=ON, Release). The archive
# holds, under BUILD's absolute path: the executables (bin/, the tests' and
# benches' programs), every CTestTestfile.cmake (ctest runs there unchanged),
# and lib/ with the shared libraries they need apart from the C runtime and
# the NVIDIA stack (those must match the machine's driver: they come from it).
# On the GPU machine, with this source tree at the same path as here (or a
# link to it): scripts/gpu-check.sh --bundle OUT.tar.xz
# Built on an older glibc than the GPU machine's: the binaries run there.
# --gpu-only: only the programs a device call runs (gpu-check.sh
# --no-cpu-suite, gpu-probe, gpu-nccl, gpu-e2e): bin/'s programs but its
# tests, the ctest label gpu's, and those the device scripts name under
# $BUILD (scripts/gpu-programs.sh); the CPU suite's 200 programs stay here (2 MB of the 17.5 MB
# archive: xz finds most of their static engine shared). gpu-check says
# NOT RUN for its CPU suite on such a bundle.
# GPU_BUNDLE_NCCL=FILE adds that libnccl.so.2 (scripts/nccl-build.sh: one
# architecture, gpud's collectives only) to lib/, which the machine's
# library path puts first: gpud and the tests load it instead of the
# machine's NCCL (two ranks on one GPU need >= 2.30.3).
set -eu
GPU_ONLY=0
[ "${1:-}" = --gpu-only ] && { GPU_ONLY=1; shift; }
[ $# -eq 2 ] || { sed -n '2,23p' "$0"; exit 2; }
BUILD=$(cd "$1" && pwd)
OUT=$2
[ -f "$BUILD/CMakeCache.txt" ] || { echo "gpu-bundle: $BUILD is not a build tree" >&2; exit 2; }
grep -q '^DDPIPE_CUDA:STRING=ON' "$BUILD/CMakeCache.txt" ||
    echo "gpu-bundle: warning: $BUILD was not configured with -DDDPIPE_CUDA=ON" >&2

EXES=$(mktemp) LIST=$(mktemp) LIBS=$(mktemp -d) STAGE=$(mktemp -d) KEEP=$(mktemp)
trap 'rm -rf "$EXES" "$EXES.keep" "$LIST" "$LIBS" "$STAGE" "$KEEP"' EXIT
# executables: every ELF file under the tree, not the object files, nor the
# kernel emulator's builds (gpud/cuda on the CPU: a GPU machine runs the real ones),
# nor shared libraries (lib-bundle/ holds those the executables need)
find "$BUILD" -type f -perm -u+x ! -path '*/CMakeFiles/*' ! -path '*/emu-bin/*' \
    ! -name '*_emu' ! -name 'test_cuemu' ! -name '*.so' ! -name '*.so.*' | while read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$f"
done > "$EXES"
if [ "$GPU_ONLY" = 1 ]; then
    (cd "$BUILD" && ctest -L '^gpu$' -N -V) | sed -n 's/^.*Test command: *\([^ ]*\).*$/\1/p' > "$KEEP"
    [ -s "$KEEP" ] || { echo "gpu-bundle: --gpu-only: $BUILD has no test labelled gpu" >&2; exit 2; }
    # what the device scripts run from the tree (those only looked for too)
    sh "$(dirname "$0")/gpu-programs.sh" | sed "s|^|$BUILD/|" >> "$KEEP"
    sed "s|^$BUILD/||" "$EXES" | grep -v '^tests/\|^bench/\|^bin/test_' | sed "s|^|$BUILD/|" >> "$KEEP" || true
    grep -Fxf "$KEEP" "$EXES" > "$EXES.keep" || true
    mv "$EXES.keep" "$EXES"
    echo "the programs a device call runs (scripts/gpu-bundle.sh --gpu-only)" > "$BUILD/bundle-gpu-only"
else
    rm -f "$BUILD/bundle-gpu-only"
fi
cp "$EXES" "$LIST"
[ "$GPU_ONLY" = 0 ] || echo "$BUILD/bundle-gpu-only" >> "$LIST"
find "$BUILD" -name CTestTestfile.cmake >> "$LIST"
[ -f "$BUILD/DartConfiguration.tcl" ] && echo "$BUILD/DartConfiguration.tcl" >> "$LIST"

# the C runtime and the NVIDIA stack stay the machine's own
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcudnn|libcublas|libnccl|libnvidia|libnvrtc|libnvJitLink)'
while read -r f; do
    ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done < "$EXES" | sort -u | while read -r name path; do
    echo "$name" | grep -Eq "$system" && continue
    cp -L "$path" "$LIBS/$name"
    # symbols only: the device call carries 64 MiB (libdnnl is 54 MB unstripped)
    strip --strip-unneeded "$LIBS/$name" 2>/dev/null || true
done
rm -rf "$BUILD/lib-bundle"
mkdir -p "$BUILD/lib-bundle"
cp "$LIBS"/* "$BUILD/lib-bundle/" 2>/dev/null || true
if [ -n "${GPU_BUNDLE_NCCL:-}" ]; then
    [ -f "$GPU_BUNDLE_NCCL" ] || { echo "gpu-bundle: GPU_BUNDLE_NCCL=$GPU_BUNDLE_NCCL: no such file" >&2; exit 2; }
    cp -L "$GPU_BUNDLE_NCCL" "$BUILD/lib-bundle/libnccl.so.2"
fi
echo "$BUILD/lib-bundle" >> "$LIST"
# the archive is made from a copy of those paths whose executables are
# stripped too (the tree here keeps its symbols): with xz -9's larger
# window the test programs, each holding the same static engine, share
# more of it (together about 1 MB less of the call's 64 MiB)
sed 's|^/||' "$LIST" | tar -C / -cf - -T - | tar -C "$STAGE" -xf -
while read -r f; do
    strip --strip-unneeded "$STAGE$f" 2>/dev/null || true
done < "$EXES"
# the same entries as the list (under the absolute path, without the leading /)
sed 's|^/||' "$LIST" | tar -C "$STAGE" -cf - -T - | xz -9 -T1 > "$OUT"
echo "gpu-bundle: $OUT ($(du -h "$OUT" | cut -f1)): $(grep -c . "$LIST") entries, libraries: $(ls "$BUILD/lib-bundle" | tr '\n' ' ')"

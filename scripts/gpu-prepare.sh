#!/bin/sh
# Prepare, on a build machine without a GPU, everything the device calls
# carry (docs/CUDA.md "A lent device's calls"):
#   scripts/gpu-prepare.sh [--nccl-src DIR] [--fmnist DIR]
# - build-gpu: configured Release with the cuda backend, built;
# - build-gpu/bundle.tar.xz (scripts/gpu-bundle.sh --gpu-only: the calls
#   run gpu-check with --no-cpu-suite);
# - build-gpu/fmnist: the Fashion-MNIST t10k files the end-to-end steps use
#   (default from /usr/share/datasets/fashion-mnist);
# - with --nccl-src DIR (an NCCL source tree >= 2.30.3): build-nccl
#   (scripts/nccl-build.sh for sm_90), for scripts/gpu-nccl.sh's call;
# - where scripts/install-deps.sh put nvJPEG (/opt/nvjpeg-13):
#   build-nccl/libnvjpeg.so.13.xz, for gpu-nccl.sh --nvjpeg (--decode gpu
#   on a machine that has no nvJPEG of its own);
# then the size each call carries beside the tracked tree, against a
# device call's 64 MiB: gpu-check's (bundle + t10k), gpu-nccl's on a warm
# machine (the library alone) and on a fresh one (bundle + library.xz).
# Exits 1 when gpu-check's call would not fit.
set -eu
cd "$(dirname "$0")/.."
NCCL_SRC= FMNIST=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
    case "$1" in
        --nccl-src) NCCL_SRC=$2; shift ;;
        --fmnist) FMNIST=$2; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "gpu-prepare: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
cmake -S . -B build-gpu -DDDPIPE_CUDA=ON -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build-gpu -j"$(nproc)"
sh scripts/gpu-bundle.sh --gpu-only build-gpu build-gpu/bundle.tar.xz
mkdir -p build-gpu/fmnist
cp "$FMNIST"/t10k-images-idx3-ubyte.gz "$FMNIST"/t10k-labels-idx1-ubyte.gz build-gpu/fmnist/
[ -z "$NCCL_SRC" ] || sh scripts/nccl-build.sh "$NCCL_SRC" build-nccl 90
NVJ=${NVJPEG_PREFIX:-/opt/nvjpeg-13}/lib/libnvjpeg.so.13
if [ -f "$NVJ" ]; then
    mkdir -p build-nccl
    xz -9 -c "$NVJ" > build-nccl/libnvjpeg.so.13.xz
fi

bytes() { cat "$@" 2>/dev/null | wc -c; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
# what every call carries: the tracked files and the untracked ones git
# does not ignore
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 cat 2>/dev/null | wc -c)
limit=$((64 * 1048576))
check=$((tree + $(bytes build-gpu/bundle.tar.xz) + $(bytes build-gpu/fmnist/*)))
echo "gpu-prepare: the tree $(mib "$tree"); gpu-check's call $(mib "$check") of 64 MiB" \
    "(carry build-gpu/bundle.tar.xz, build-gpu/fmnist)"
if [ -f build-nccl/libnccl.so.2 ]; then
    nvj=$(bytes build-nccl/libnvjpeg.so.13.xz)
    warm=$((tree + $(bytes build-nccl/libnccl.so.2) + nvj))
    cold=$((tree + $(bytes build-gpu/bundle.tar.xz) + $(bytes build-nccl/libnccl.so.2.xz)))
    echo "gpu-prepare: gpu-nccl's call $(mib "$warm") on the warm machine (carry" \
        "build-nccl/libnccl.so.2 and libnvjpeg.so.13.xz), $(mib "$cold") on a fresh one (carry" \
        "the bundle and build-nccl/libnccl.so.2.xz; no t10k: the jobs not run)"
    [ "$cold" -le "$limit" ] || echo "gpu-prepare: a fresh machine's NCCL call would not fit" >&2
fi
if [ -f build-nccl/libnvjpeg.so.13.xz ]; then
    cold=$((tree + $(bytes build-gpu/bundle.tar.xz) + $(bytes build-nccl/libnvjpeg.so.13.xz)))
    echo "gpu-prepare: gpu-nccl --nvjpeg alone on a fresh machine $(mib "$cold") (carry the" \
        "bundle and build-nccl/libnvjpeg.so.13.xz; no t10k, which the JPEG job does not need)"
fi
[ "$check" -le "$limit" ] || { echo "gpu-prepare: gpu-check's call does not fit 64 MiB" >&2; exit 1; }

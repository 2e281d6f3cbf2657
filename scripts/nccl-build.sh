#!/bin/sh
# Build an NCCL small enough to carry to a lent GPU machine, for gpud's
# two ranks on one GPU (NCCL >= 2.30.3 with NCCL_MULTI_RANK_GPU_ENABLE=1;
# the machines' PyTorch wheels carried 2.28.3):
#   scripts/nccl-build.sh SRC OUTDIR [ARCH]
# SRC    an NCCL source tree >= 2.30.3, e.g.
#        git clone -b v2.30.7-1 https://github.com/NVIDIA/nccl
# OUTDIR gets libnccl.so.2 (stripped), libnccl.so.2.xz and VERSION
# ARCH   the one GPU architecture to build for (default 90: H100, H200)
# Only the collectives gpud calls (gpud/cuda/cuda_nccl.c: all-reduce sums of
# f32, f64 and i64, the max of u32) and one architecture: the PyPI wheel
# nvidia-nccl-cu13's libnccl.so.2 is 252 MB (sm_75 to sm_120, every
# collective), a device call carries 64 MiB. Any other collective fails at
# its call with ncclInvalidUsage. Needs nvcc (CUDA 12 or 13) and g++; 14
# minutes on 2 cores (2.30.7, sm_90). Then: GPU_BUNDLE_NCCL=OUTDIR/libnccl.so.2
# scripts/gpu-bundle.sh BUILD OUT.tar.xz puts it in the bundle, first on
# the device's library path (docs/CUDA.md, "NCCL in gpud").
set -eu
[ $# -ge 2 ] || { sed -n '2,17p' "$0"; exit 2; }
SRC=$(cd "$1" && pwd)
OUT=$2
ARCH=${3:-90}
[ -f "$SRC/makefiles/version.mk" ] || { echo "nccl-build: $SRC is not an NCCL source tree" >&2; exit 2; }
v() { sed -n "s/^NCCL_$1 *:= *\([0-9]*\).*/\1/p" "$SRC/makefiles/version.mk"; }
CODE=$(( $(v MAJOR) * 10000 + $(v MINOR) * 100 + $(v PATCH) ))
[ "$CODE" -ge 23003 ] ||
    { echo "nccl-build: $SRC is NCCL $CODE; two ranks on one GPU need >= 23003 (2.30.3)" >&2; exit 2; }
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -x "$CUDA_HOME/bin/nvcc" ] || { echo "nccl-build: no nvcc under $CUDA_HOME (CUDA_HOME)" >&2; exit 2; }
# CUDA's include folder without the NCCL headers it may hold (the CUDA
# images carry an older NCCL's nccl.h and nccl_device/ there, which the
# host compiler would take before the source's own)
INC=$(mktemp -d)
trap 'rm -rf "$INC"' EXIT
for e in "$CUDA_HOME"/include/*; do
    case "$(basename "$e")" in nccl*) ;; *) ln -s "$e" "$INC/" ;; esac
done
# generate.py's filter: "coll redop type algo proto", | between patterns
FUNCS="AllReduce Sum f32 * *|AllReduce Sum f64 * *|AllReduce Sum i64 * *|AllReduce Sum u64 * *"
FUNCS="$FUNCS|AllReduce MinMax u32 * *"
rm -rf "$SRC/build"   # objects of an earlier build may hold the other headers
make -C "$SRC" -j"$(nproc)" src.build CUDA_HOME="$CUDA_HOME" CUDA_INC="$INC" \
    NVCC_GENCODE="-gencode=arch=compute_$ARCH,code=sm_$ARCH" ONLY_FUNCS="$FUNCS"
lib=$(ls "$SRC"/build/lib/libnccl.so.2.* | head -n 1)
mkdir -p "$OUT"
cp -L "$lib" "$OUT/libnccl.so.2"
strip --strip-unneeded "$OUT/libnccl.so.2"
# the same under xz (4.4 MB for 2.30.7 on sm_90): what fits a device call
# beside a bundle and the source tree (scripts/gpu-nccl.sh --nccl LIB.xz)
xz -9 -T1 -c "$OUT/libnccl.so.2" > "$OUT/libnccl.so.2.xz"
echo "$CODE sm_$ARCH $FUNCS" > "$OUT/VERSION"
echo "nccl-build: $OUT/libnccl.so.2 ($(du -h "$OUT/libnccl.so.2" | cut -f1)), NCCL $CODE for sm_$ARCH"

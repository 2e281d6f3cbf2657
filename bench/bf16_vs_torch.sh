#!/bin/sh
# --precision bf16 on CPU in one short run (about 90 s on 16 cores): ResNet-18
# eval and train step, ddpipe bf16 (oneDNN's native bf16 kernels where gpud's
# probe finds avx512_bf16/amx, else emulated: the ddpipe line's precision=
# says which, docs/BF16.md) against PyTorch autocast bf16 + channels_last,
# each beside fp32 (PyTorch NCHW and channels_last: its best fp32 layout
# differs by machine), one round of bench/resnet18_vs_torch.sh each.
#   bench/bf16_vs_torch.sh [BUILD_DIR]        (default build-bench, Release)
#   PY=python3 THREADS=16 BATCH=64 bench/bf16_vs_torch.sh build-rel
# PY: a python with torch and torchvision (default /usr/bin/python3).
# THREADS: default all cores. DDPIPE_BF16=native|emulated forces gpud's choice.
set -eu

cd "$(dirname "$0")/.."
BUILD=${1:-build-bench}
PY=${PY:-/usr/bin/python3}
THREADS=${THREADS:-$(nproc)}
BATCH=${BATCH:-64}
EVAL_ITERS=${EVAL_ITERS:-5}
TRAIN_ITERS=${TRAIN_ITERS:-3}
export PY THREADS BATCH

echo "cpu:$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cpus"
echo "bf16 flags: $(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "DDPIPE_BF16=${DDPIPE_BF16:-(unset: native where the CPU has avx512_bf16/amx)}"
"$PY" -c '
import torch
try:
    bf = torch.ops.mkldnn._is_mkldnn_bf16_supported()
except Exception:
    bf = "?"
print("python: torch %s, mkldnn bf16 supported: %s" % (torch.__version__, bf))'
t0=$(date +%s)
for mode in eval train; do
    iters=$EVAL_ITERS
    [ "$mode" = train ] && iters=$TRAIN_ITERS
    for prec in bf16 fp32 fp32-cl; do
        echo "== $mode $prec"
        ITERS=$iters ROUNDS=1 PRECISION=$prec bench/resnet18_vs_torch.sh "$mode" "$BUILD" |
            grep -E '^(ddpipe|torch|mean:)'
    done
done
echo "total $(( $(date +%s) - t0 )) s"

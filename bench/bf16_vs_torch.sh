#!/bin/sh
# --precision bf16 on CPU in one short run (about 90 s on 16 cores with 1.13 alone):
# ResNet-18 eval and train step, ddpipe bf16 (oneDNN's native bf16 kernels
# where gpud's probe finds AMX, else emulated: the ddpipe line's
# precision= says which, docs/BF16.md) against PyTorch autocast bf16 +
# channels_last, each beside fp32 (PyTorch NCHW and channels_last: its best
# fp32 layout differs by machine and by version), one round of
# bench/resnet18_vs_torch.sh each, every PyTorch peer in it (bench/peers.sh:
# 1.13 and 2.15).
#   bench/bf16_vs_torch.sh [BUILD_DIR]        (default build-bench, Release)
#   THREADS=16 BATCH=64 bench/bf16_vs_torch.sh build-rel
# PEERS="1.13 2.15" (default), PEERS=1.13, or PY=python alone (bench/peers.sh).
# THREADS: default all cores. DDPIPE_BF16=native|emulated forces gpud's choice.
set -eu

cd "$(dirname "$0")/.."
. bench/peers.sh
BUILD=${1:-build-bench}
THREADS=${THREADS:-$(nproc)}
BATCH=${BATCH:-64}
EVAL_ITERS=${EVAL_ITERS:-5}
TRAIN_ITERS=${TRAIN_ITERS:-3}
peers_init "$(pwd)"
PEERS=$PEER_SPECS   # resolved once: the missing-2.15 note is said here, not per run
export PEERS THREADS BATCH

echo "cpu:$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cpus"
echo "bf16 flags: $(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "DDPIPE_BF16=${DDPIPE_BF16:-(unset: native where the CPU has AMX)}"
for p in $PEER_LABELS; do
    "$(peer_py "$p")" - "$p" <<'PYEOF'
import sys
import torch
try:
    bf = torch.ops.mkldnn._is_mkldnn_bf16_supported()
except Exception:
    bf = "?"
print("peer %s: torch %s, mkldnn bf16 supported: %s" % (sys.argv[1], torch.__version__, bf))
PYEOF
done
t0=$(date +%s)
for mode in eval train; do
    iters=$EVAL_ITERS
    [ "$mode" = train ] && iters=$TRAIN_ITERS
    for prec in bf16 fp32; do
        echo "== $mode $prec"
        ITERS=$iters ROUNDS=1 PRECISION=$prec bench/resnet18_vs_torch.sh "$mode" "$BUILD" |
            grep -E '^(\||vs torch)'
    done
done
echo "total $(( $(date +%s) - t0 )) s"

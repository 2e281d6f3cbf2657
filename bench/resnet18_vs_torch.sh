#!/bin/sh
# ResNet-18 on CPU, ddpipe vs PyTorch 1.13 with the same thread count, batch
# and 224x224 input, in one run: the two are interleaved ROUNDS times so a
# noisy machine hurts both alike. Prints the ratio of the best iteration of
# each, of the means, and of process CPU time per image.
#   bench/resnet18_vs_torch.sh eval|train [BUILD_DIR]   (default: build-bench, Release)
#   THREADS=2 BATCH=32 ITERS=6 ROUNDS=2 bench/resnet18_vs_torch.sh eval
#   PY=python3 PRECISION=bf16 bench/resnet18_vs_torch.sh eval   (ddpipe --precision bf16 vs PyTorch
#          autocast bf16 + channels_last, compute only; the CPU's flags are printed)
#   eval:  bench/eval_resnet18  (model_forward_u8)          vs bench/eval_resnet18_torch.py
#   train: bench/train_resnet18 (model_train_step_u8 + SGD) vs bench/train_resnet18_torch.py
set -eu

cd "$(dirname "$0")/.."
MODE=${1:?usage: bench/resnet18_vs_torch.sh eval|train [BUILD_DIR]}
BUILD=${2:-build-bench}
case "$MODE" in
    eval) PROG=eval_resnet18; WHAT="eval"; ITERS=${ITERS:-6} ;;
    train) PROG=train_resnet18; WHAT="train step"; ITERS=${ITERS:-3} ;;
    *) echo "bench/resnet18_vs_torch.sh: mode is eval or train" >&2; exit 2 ;;
esac
THREADS=${THREADS:-2}
BATCH=${BATCH:-32}
ROUNDS=${ROUNDS:-2}
PRECISION=${PRECISION:-fp32}
case "$PRECISION" in
    fp32) PFLAG="" ;;
    fp32-cl) PFLAG="" TFLAG="--channels-last" ;;   # ddpipe fp32 vs PyTorch fp32 channels_last
    bf16) PFLAG="--bf16" ;;
    *) echo "bench/resnet18_vs_torch.sh: PRECISION is fp32, fp32-cl or bf16" >&2; exit 2 ;;
esac
PY=${PY:-/usr/bin/python3}   # a python with torch and torchvision

if [ ! -x "$BUILD/bench/$PROG" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target "$PROG" -j2 >/dev/null
fi

echo "ResNet-18 $WHAT, batch $BATCH, ${THREADS} threads, $ITERS timed iterations x $ROUNDS rounds, $PRECISION"
echo "cpu flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    "$BUILD/bench/$PROG" --batch "$BATCH" --threads "$THREADS" --iters "$ITERS" $PFLAG | tee -a "$out"
    $PY "bench/${PROG}_torch.py" --batch "$BATCH" --threads "$THREADS" --iters "$ITERS" $PFLAG ${TFLAG:-} | tee -a "$out"
    r=$((r + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    /^ddpipe/ { if (v["best_img/s"] > db) db = v["best_img/s"]; dm += v["img/s"]; dn++
                dc += v["cpu_ms/img"] }
    /^torch/  { if (v["best_img/s"] > tb) tb = v["best_img/s"]; tm += v["img/s"]; tn++
                tc += v["cpu_ms/img"] }
    END {
        printf "best:  ddpipe %.2f img/s, torch %.2f img/s, ratio %.2fx\n", db, tb, db / tb
        printf "mean:  ddpipe %.2f img/s, torch %.2f img/s, ratio %.2fx\n", dm / dn, tm / tn,
               (dm / dn) / (tm / tn)
        if (dc > 0 && tc > 0)
            printf "cpu:   ddpipe %.1f ms/img, torch %.1f ms/img, ratio %.2fx\n", dc / dn, tc / tn,
                   (tc / tn) / (dc / dn)
    }' "$out"

#!/bin/sh
# ResNet-18 CPU training step: ddpipe (model_train_step_u8 + SGD, oneDNN)
# vs PyTorch 1.13 (forward, CrossEntropyLoss, backward, SGD step) with the
# same thread count, batch 32, 224x224. Interleaved ROUNDS times so that a
# noisy machine hurts both alike; the ratio is of the best step of each
# (and of the means, and of process CPU time per image).
#
#   bench/train_resnet18.sh [BUILD_DIR]     (default: build-bench, Release)
#   THREADS=2 BATCH=32 ITERS=3 ROUNDS=2 bench/train_resnet18.sh
set -eu

cd "$(dirname "$0")/.."
BUILD=${1:-build-bench}
THREADS=${THREADS:-2}
BATCH=${BATCH:-32}
ITERS=${ITERS:-3}
ROUNDS=${ROUNDS:-2}
PY=/usr/bin/python3

if [ ! -x "$BUILD/bench/train_resnet18" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target train_resnet18 -j2 >/dev/null
fi

echo "ResNet-18 train step, batch $BATCH, ${THREADS} threads, $ITERS timed steps x $ROUNDS rounds"
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    "$BUILD/bench/train_resnet18" --batch "$BATCH" --threads "$THREADS" --iters "$ITERS" \
        | tee -a "$out"
    $PY bench/train_resnet18_torch.py --batch "$BATCH" --threads "$THREADS" --iters "$ITERS" \
        | tee -a "$out"
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
        printf "cpu:   ddpipe %.1f ms/img, torch %.1f ms/img, ratio %.2fx\n", dc / dn, tc / tn,
               (tc / tn) / (dc / dn)
    }' "$out"

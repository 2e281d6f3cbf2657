#!/bin/sh
# Train a small WideResNet (channels 8,16,32,64, from a seeded PyTorch-default
# init) on Fashion-MNIST with 2 workers through all four daemons, validating on
# the 10,000 test images after every epoch, until val top-1 >= 0.85 for 2
# epochs in a row (early stop by patience) or 10 epochs. Each epoch sees the
# first $LIMIT training images (default 12000) in a fresh seeded order, so the
# demo takes minutes on 2 cores, not an hour. Leaves runs/train-demo with
# metrics.csv, the seed course's CSV, plots, checkpoint.safetensors and
# model.safetensors (loadable by `ddpipe eval --weights`).
#   scripts/demo_train.sh [extra ddpipe train flags]
#   LIMIT=60000 OUT=runs/full scripts/demo_train.sh      # whole training set
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LIMIT=${LIMIT:-12000}
OUT=${OUT:-runs/train-demo}
FMNIST=/usr/share/datasets/fashion-mnist
if [ -z "${SKIP_BUILD:-}" ]; then
    scripts/install-deps.sh
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target ddpipe gpud loaderd reducerd reporterd
fi
rm -rf "$OUT"
"$BUILD/bin/ddpipe" train --data "idx:$FMNIST/train" --limit "$LIMIT" --val "idx:$FMNIST/t10k" \
    --model wideresnet --channels 8,16,32,64 --workers 2 --batch-size 64 \
    --lr 0.05 --momentum 0.9 --epochs 10 --target-accuracy 0.85 --patience 2 \
    --seed 0 --out "$OUT" "$@"
echo "run directory: $OUT ($(ls "$OUT" | tr '\n' ' '))"
# the trained weights are an ordinary model file:
"$BUILD/bin/ddpipe" eval --data "idx:$FMNIST/t10k" --model wideresnet --channels 8,16,32,64 \
    --weights "$OUT/model.safetensors" --workers 2 --quiet --out "$OUT/eval"

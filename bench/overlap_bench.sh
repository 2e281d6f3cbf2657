#!/bin/sh
# The gradient all-reduce overlapped with backward (gpud/buckets.h) against
# the same buckets run after backward (DDPIPE_NO_OVERLAP=1): `ddpipe train`
# on this host (its ring is ipc://, so the ring is cheap here: the overlap
# can win at most the ring's share of a step), rounds interleaving the two.
# A throttled link needs gpuds started by hand with --ring-bind tcp://...
# (bench/wire_bench.sh shows the netns + tc set-up); not done here.
#
#   bench/overlap_bench.sh [BUILD_DIR] [ROUNDS]
#   env: LIMIT=1920 WORKERS=2 BATCH=64 CHANNELS=16,32,64,128
#
# Prints each run's train img/s (metrics.csv, the epoch's) and its train
# loss, which must be equal with and without overlap (same bytes).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
ROUNDS=${2:-2}
LIMIT=${LIMIT:-1920}
W=${WORKERS:-2}
BATCH=${BATCH:-64}
CHANNELS=${CHANNELS:-16,32,64,128}
FM=/usr/share/datasets/fashion-mnist
[ -x "$BUILD/bin/ddpipe" ] || { echo "overlap_bench: $BUILD/bin/ddpipe missing; build first" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "WideResNet $CHANNELS, $LIMIT Fashion-MNIST images, $W workers x $BATCH, 1 epoch;" \
     "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| round | mode | train img/s | train loss |"
echo "|---|---|---|---|"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for mode in overlap after; do
        out="$dir/$mode$r"
        env_set=""
        [ "$mode" = after ] && env_set="DDPIPE_NO_OVERLAP=1"
        env $env_set "$BUILD/bin/ddpipe" train --data "idx:$FM/train" \
            --limit "$LIMIT" --model wideresnet --channels "$CHANNELS" --workers "$W" \
            --batch-size "$BATCH" --epochs 1 --lr 0.05 --momentum 0.9 --seed 0 --threads 1 \
            --loader-threads 1 --quiet --out "$out" >"$dir/log" 2>&1 || { cat "$dir/log"; exit 1; }
        awk -F, -v r="$r" -v m="$mode" '$3 == "train" { v = $8; l = $5 }
            END { printf "| %d | %s | %.1f | %s |\n", r, m, v, l }' "$out/metrics.csv"
    done
    r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

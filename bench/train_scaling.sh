#!/bin/sh
# Training throughput of `ddpipe train` with 1, 2, ... workers at the same
# global batch: the same job (WideResNet on a Fashion-MNIST subset, same seed,
# same data order, same weights at the end) split over W gpud ranks that
# sum their gradients with the CPU ring all-reduce every step.
#
#   bench/train_scaling.sh [BUILD_DIR]            (default build-rel, Release)
#   WORKERS="1 2" N=6144 G=128 EPOCHS=2 CHANNELS=8,16,32,64 bench/train_scaling.sh
#
# Each worker gets cores/W compute threads (THREADS overrides). Prints one
# row per W: train images/s of the last epoch (reducerd's: samples / epoch
# wall time, so loading, all-reduce and stragglers count), the run's wall
# time, and the speed-up over W = 1. The last epoch is used so the first
# epoch's start-up (process launch, join, first oneDNN primitives) is left
# out. The ring itself is measured apart by bench/allreduce_bench (GB/s vs
# memcpy, RESULTS.md "CPU ring all-reduce").
set -eu

cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
WORKERS=${WORKERS:-"1 2"}
N=${N:-6144}
G=${G:-128}
EPOCHS=${EPOCHS:-2}
CHANNELS=${CHANNELS:-8,16,32,64}
DATA=${DATA:-idx:/usr/share/datasets/fashion-mnist/train}
CORES=$(nproc)

for t in ddpipe gpud loaderd reducerd reporterd; do
    if [ ! -x "$BUILD/bin/$t" ]; then
        cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$BUILD" -j2 --target ddpipe gpud loaderd reducerd reporterd >/dev/null
        break
    fi
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "ddpipe train, WideResNet $CHANNELS, $N Fashion-MNIST images, global batch $G, $EPOCHS epochs"
echo "host: $CORES cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| workers | threads/worker | train img/s (last epoch) | wall s | speed-up |"
echo "|---|---|---|---|---|"
base=""
for w in $WORKERS; do
    th=${THREADS:-$(( CORES / w > 0 ? CORES / w : 1 ))}
    out="$dir/w$w"
    t0=$(date +%s.%N)
    "$BUILD/bin/ddpipe" train --data "$DATA" --limit "$N" --model wideresnet --channels "$CHANNELS" \
        --workers "$w" --global-batch-size "$G" --epochs "$EPOCHS" --lr 0.05 --momentum 0.9 \
        --seed 1 --threads "$th" --loader-threads 1 --quiet --out "$out" >"$dir/w$w.txt" 2>&1 || {
        echo "workers $w failed:"; cat "$dir/w$w.txt"; exit 1; }
    t1=$(date +%s.%N)
    ips=$(awk -F, '$3 == "train" { v = $8 } END { print v }' "$out/metrics.csv")
    [ -n "$base" ] || base=$ips
    awk -v w="$w" -v th="$th" -v ips="$ips" -v t0="$t0" -v t1="$t1" -v base="$base" \
        'BEGIN { printf "| %s | %s | %.1f | %.1f | %.2fx |\n", w, th, ips, t1 - t0, ips / base }'
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

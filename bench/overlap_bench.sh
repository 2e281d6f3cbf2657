#!/bin/sh
# The gradient all-reduce overlapped with backward (gpud/buckets.h) against
# the same buckets run after backward (DDPIPE_NO_OVERLAP=1), on a link
# throttled to RATE: the job runs in a network namespace of its own whose
# loopback gets a token-bucket filter (tc tbf), so the ring's tcp traffic
# pays for bandwidth as between hosts, and nothing outside the namespace is
# touched. RATE=none: the plain loopback. Rounds interleave the two.
#
#   bench/overlap_bench.sh [BUILD_DIR] [ROUNDS]
#   env: RATE=200mbit LIMIT=1920 WORKERS=2 BATCH=64 CHANNELS=16,32,64,128
#
# Prints each run's train img/s (metrics.csv, the epoch's) and the last
# train loss, which must be equal with and without overlap (same bytes).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
ROUNDS=${2:-2}
RATE=${RATE:-200mbit}
LIMIT=${LIMIT:-1920}
W=${WORKERS:-2}
BATCH=${BATCH:-64}
CHANNELS=${CHANNELS:-16,32,64,128}
FM=/usr/share/datasets/fashion-mnist
[ "$(id -u)" = 0 ] || { echo "overlap_bench: needs root (ip netns add)" >&2; exit 1; }
[ -x "$BUILD/bin/ddpipe" ] || { echo "overlap_bench: $BUILD/bin/ddpipe missing; build first" >&2; exit 1; }
NS=ddp-ovl-$$
dir=$(mktemp -d)
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
if [ "$RATE" != none ]; then
    ip netns exec "$NS" tc qdisc add dev lo root tbf rate "$RATE" burst 256kb latency 50ms
fi
echo "WideResNet $CHANNELS, $LIMIT Fashion-MNIST images, $W workers x $BATCH, 1 epoch," \
     "loopback rate $RATE; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| round | mode | train img/s | last train loss |"
echo "|---|---|---|---|"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for mode in overlap after; do
        out="$dir/$mode$r"
        env_set=""
        [ "$mode" = after ] && env_set="DDPIPE_NO_OVERLAP=1"
        ip netns exec "$NS" env $env_set "$BUILD/bin/ddpipe" train --data "idx:$FM/train" \
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

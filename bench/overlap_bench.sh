#!/bin/sh
# The gradient all-reduce overlapped with backward (gpud/buckets.h) against
# the same buckets run after backward (DDPIPE_NO_OVERLAP=1), rounds
# interleaving the two.
#
#   bench/overlap_bench.sh [BUILD_DIR] [ROUNDS]
#   env: LIMIT=1920 WORKERS=2 BATCH=64 CHANNELS=16,32,64,128 RATE=
#
# Without RATE: `ddpipe train` on this host; its ring is ipc://, so the ring
# is cheap here and the overlap can win at most the ring's share of a step.
# RATE=200mbit (needs root): the same job across a slow link. A network
# namespace is made here, its loopback throttled with `tc qdisc add dev lo
# root tbf rate $RATE burst 256kb latency 400ms`, and the daemons are
# started in it by hand, as `ddpipe train` would start them but with the
# ranks' ring over TCP on that loopback (the launcher's ring is always
# ipc://); the other daemons talk over ipc:// (not throttled): only the
# ring crosses the link.
#
# Prints each run's train img/s and epoch seconds (metrics.csv, the
# epoch's) and its train loss, which must be equal with and without overlap
# (same bytes).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
ROUNDS=${2:-2}
LIMIT=${LIMIT:-1920}
W=${WORKERS:-2}
BATCH=${BATCH:-64}
CHANNELS=${CHANNELS:-16,32,64,128}
RATE=${RATE:-}
FM=/usr/share/datasets/fashion-mnist
BIN=$(cd "$BUILD/bin" 2>/dev/null && pwd) ||
    { echo "overlap_bench: $BUILD/bin missing; build first" >&2; exit 1; }
for b in ddpipe reducerd reporterd loaderd gpud; do
    [ -x "$BIN/$b" ] || { echo "overlap_bench: $BIN/$b missing; build first" >&2; exit 1; }
done
[ -z "$RATE" ] || [ "$(id -u)" = 0 ] || { echo "overlap_bench: RATE needs root (ip netns)" >&2; exit 1; }
dir=$(mktemp -d)
NS=ddpovl$$
cleanup() {
    if [ -n "$RATE" ]; then
        ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null || true
        ip netns del "$NS" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
if [ -n "$RATE" ]; then
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    ip netns exec "$NS" tc qdisc add dev lo root tbf rate "$RATE" burst 256kb latency 400ms
fi

# job MODE OUT: one epoch, overlapped or after backward (E: its environment)
port=$((20000 + $$ % 10000))
job() {
    mode=$1 out=$2
    e=""
    [ "$mode" = after ] && e="DDPIPE_NO_OVERLAP=1"
    if [ -z "$RATE" ]; then
        env $e "$BIN/ddpipe" train --data "idx:$FM/train" --limit "$LIMIT" --model wideresnet \
            --channels "$CHANNELS" --workers "$W" --batch-size "$BATCH" --epochs 1 --lr 0.05 \
            --momentum 0.9 --seed 0 --threads 1 --loader-threads 1 --quiet --out "$out" \
            > "$dir/log" 2>&1 || { cat "$dir/log"; exit 1; }
        return
    fi
    # by hand in the namespace, the ring on ports of its own (the job
    # before's may still be held)
    ipc=$dir/ipc g=$((W * BATCH)) x="ip netns exec $NS"
    port=$((port + W))
    mkdir -p "$out" "$ipc"
    $x "$BIN/reducerd" --bind "ipc://$ipc/reducer" --pub "ipc://$ipc/events" --workers "$W" \
        --done-timeout 600 --train --no-val --resume-dir "$out" > "$out/reducerd.log" 2>&1 &
    $x "$BIN/reporterd" --sub "ipc://$ipc/events" --reducer "ipc://$ipc/reducer" --out "$out" \
        > "$out/reporterd.log" 2>&1 &
    $x "$BIN/loaderd" --data "idx:$FM/train" --bind "ipc://$ipc/loader" \
        --reducer "ipc://$ipc/reducer" --threads 1 --prefetch 5 --channels 1 --limit "$LIMIT" \
        --train --workers "$W" --global-batch-size "$g" > "$out/loaderd.log" 2>&1 &
    k=0   # (not r: the caller's round)
    while [ "$k" -lt "$W" ]; do
        $x env $e "$BIN/gpud" --loader "ipc://$ipc/loader" --reducer "ipc://$ipc/reducer" \
            --model wideresnet --channels "$CHANNELS" --in-channels 1 --threads 1 --rank "$k" \
            --decode-threads 1 --train --lr 0.05 --momentum 0.9 --weight-decay 0 \
            --ring-bind "tcp://127.0.0.1:$((port + k))" --insecure --commit-timeout 70 \
            --global-batch-size "$g" > "$out/gpud.$k.log" 2>&1 &
        k=$((k + 1))
    done
    wait
    rm -rf "$ipc"
    [ -s "$out/metrics.csv" ] || { tail -n 3 "$out"/*.log; exit 1; }
}

echo "WideResNet $CHANNELS, $LIMIT Fashion-MNIST images, $W workers x $BATCH, 1 epoch, ring" \
     "${RATE:+over TCP at $RATE}${RATE:-ipc://}; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| round | mode | train img/s | epoch s | train loss |"
echo "|---|---|---|---|---|"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for mode in overlap after; do
        out="$dir/$mode$r"
        job "$mode" "$out"
        awk -F, -v r="$r" -v m="$mode" '$3 == "train" { v = $8; s = $10; l = $5 }
            END { printf "| %d | %s | %.1f | %.2f | %s |\n", r, m, v, s, l }' "$out/metrics.csv"
    done
    r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

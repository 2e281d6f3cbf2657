#!/bin/sh
# The gradient all-reduce overlapped with backward (gpud/buckets.h) against
# the same buckets after backward (DDPIPE_NO_OVERLAP=1), across a slow link:
# bench/overlap_bench.sh's job (2 cpu ranks, the demo WideResNet), but the
# ranks' ring over TCP on the loopback of a network namespace made here,
# throttled with `tc qdisc add dev lo root tbf rate $RATE burst 256kb
# latency 400ms`. The other daemons talk over ipc:// (not throttled): only
# the ring crosses the link. The daemons are started by hand, as `ddpipe
# train` would start them, because the launcher's ring is always ipc://.
#
#   bench/overlap_link.sh [BUILD_DIR] [ROUNDS]      (needs root: ip netns)
#   env: RATE=200mbit LIMIT=1280 CHANNELS=16,32,64,128 BATCH=64
#
# Prints each run's train img/s and epoch seconds (metrics.csv) and its
# train loss, which must be the same with and without overlap (same bytes).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
ROUNDS=${2:-2}
RATE=${RATE:-200mbit}
LIMIT=${LIMIT:-1280}
CHANNELS=${CHANNELS:-16,32,64,128}
BATCH=${BATCH:-64}
BIN=$(cd "$BUILD/bin" && pwd)
FM=/usr/share/datasets/fashion-mnist/train
[ "$(id -u)" = 0 ] || { echo "overlap_link: needs root (ip netns add)" >&2; exit 1; }
for b in reducerd reporterd loaderd gpud; do
    [ -x "$BIN/$b" ] || { echo "overlap_link: $BIN/$b missing: build $BUILD first" >&2; exit 1; }
done
NS=ddpovl$$
dir=$(mktemp -d)
cleanup() {
    ip netns pids "$NS" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
ip netns add "$NS"
ip -n "$NS" link set lo up
ip netns exec "$NS" tc qdisc add dev lo root tbf rate "$RATE" burst 256kb latency 400ms

# one job: MODE overlap|after, OUT; every process in the namespace, the
# ring on ports of its own (a port of the job before may still be held)
port=$((20000 + $$ % 10000))
job() {
    port=$((port + 2))
    mode=$1 out=$2 ipc=$dir/ipc
    mkdir -p "$out" "$ipc"
    e=""
    [ "$mode" = after ] && e="DDPIPE_NO_OVERLAP=1"
    g=$((2 * BATCH))
    ip netns exec "$NS" "$BIN/reducerd" --bind "ipc://$ipc/reducer" --pub "ipc://$ipc/events" \
        --workers 2 --done-timeout 600 --train --no-val --resume-dir "$out" \
        > "$out/reducerd.log" 2>&1 &
    ip netns exec "$NS" "$BIN/reporterd" --sub "ipc://$ipc/events" --reducer "ipc://$ipc/reducer" \
        --out "$out" > "$out/reporterd.log" 2>&1 &
    ip netns exec "$NS" "$BIN/loaderd" --data "idx:$FM" --bind "ipc://$ipc/loader" \
        --reducer "ipc://$ipc/reducer" --threads 1 --prefetch 5 --channels 1 --limit "$LIMIT" \
        --train --workers 2 --global-batch-size "$g" > "$out/loaderd.log" 2>&1 &
    for k in 0 1; do   # (not r: the caller's round)
        ip netns exec "$NS" env $e "$BIN/gpud" --loader "ipc://$ipc/loader" \
            --reducer "ipc://$ipc/reducer" --model wideresnet --channels "$CHANNELS" \
            --in-channels 1 --threads 1 --rank "$k" --decode-threads 1 --train --lr 0.05 \
            --momentum 0.9 --weight-decay 0 --ring-bind "tcp://127.0.0.1:$((port + k))" \
            --insecure --commit-timeout 70 --global-batch-size "$g" > "$out/gpud.$k.log" 2>&1 &
    done
    wait
    rm -rf "$ipc"
}

echo "WideResNet $CHANNELS, $LIMIT Fashion-MNIST images, 2 ranks x $BATCH, 1 epoch, ring over" \
     "TCP at $RATE; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| round | mode | train img/s | epoch s | train loss |"
echo "|---|---|---|---|---|"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for mode in overlap after; do
        out="$dir/$mode$r"
        job "$mode" "$out"
        [ -s "$out/metrics.csv" ] || { tail -n 3 "$out"/*.log; exit 1; }
        awk -F, -v r="$r" -v m="$mode" '$3 == "train" { v = $8; s = $10; l = $5 }
            END { printf "| %d | %s | %.1f | %.2f | %s |\n", r, m, v, s, l }' "$out/metrics.csv"
    done
    r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

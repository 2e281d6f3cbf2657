#!/bin/bash
# What CURVE costs end to end (issue 11): ResNet-18 eval at 224x224, W=2 gpuds,
# every daemon on loopback TCP, with and without --curve-dir, alternated
# ROUNDS times in one run so a noisy machine hurts both alike. Prints the
# img/s of each run (reporterd's summary.json), the ratio of the means and
# of the best, and the bytes the loader->gpud link carries per img/s. Then a
# socket-only figure: PUSH/PULL of 150,528-byte frames (one 224x224x3 uint8
# sample) over loopback with and without CURVE (python3-zmq), MB/s, one core
# each side: CURVE's ceiling in samples/s.
#   bench/curve_bench.sh [BUILD_DIR]      (default build-bench, Release)
#   N=256 ROUNDS=3 THREADS=1 BATCH=32 bench/curve_bench.sh
# Weights: tests/golden/resnet18.safetensors (torchvision's layout; accuracy
# is irrelevant to throughput). Images: the first N of 1000 synthetic 320x240
# RGB JPEGs, one per class (ddpipe-mkjpeg, as it_resnet18; loaderd --limit),
# resized to 256 and cropped to 224, so every batch carries what an ImageNet eval does: 150,528 B/sample.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${1:-build-bench}
N=${N:-256}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1}
BATCH=${BATCH:-32}
PY=/usr/bin/python3
BIN=$BUILD/bin
W=tests/golden/resnet18.safetensors

if [ ! -x "$BIN/gpud" ] || [ ! -x "$BIN/ddpipe-mkjpeg" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j2 --target gpud loaderd reducerd reporterd ddpipe ddpipe-mkjpeg >/dev/null
fi
tmp=$(mktemp -d /tmp/ddpipe-curve-bench-XXXXXX)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
"$BIN/ddpipe-mkjpeg" --synthetic 1000 "$tmp/data" --size 320x240 --classes 1000 >/dev/null
"$BIN/ddpipe" keygen "$tmp/keys" >/dev/null

port() {   # a free loopback port
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# one eval job; $1: label, $2...: security flags; prints "label img/s wall_s"
job() {
    label=$1; shift
    out="$tmp/run-$label-$r"
    mkdir -p "$out"
    red=tcp://127.0.0.1:$(port); pub=tcp://127.0.0.1:$(port); ld=tcp://127.0.0.1:$(port)
    pids=""
    "$BIN/reducerd" --bind "$red" --pub "$pub" --workers 2 "$@" >"$out/reducerd.log" 2>&1 &
    rp=$!
    "$BIN/reporterd" --sub "$pub" --reducer "$red" --out "$out" "$@" >"$out/reporterd.log" 2>&1 &
    pids="$rp $!"
    "$BIN/loaderd" --data "$tmp/data" --bind "$ld" --reducer "$red" --batch-size "$BATCH" \
        --limit "$N" --resize 256 --crop 224 --channels 3 --threads "$THREADS" "$@" >"$out/loaderd.log" 2>&1 &
    pids="$pids $!"
    for g in 0 1; do
        "$BIN/gpud" --loader "$ld" --reducer "$red" --rank $g --threads "$THREADS" \
            --model resnet18 --weights "$W" "$@" >"$out/gpud$g.log" 2>&1 &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p" || { echo "a daemon failed: see below" >&2; tail -n 5 "$out"/*.log >&2; exit 1; }; done
    pids=""
    $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], s["images_per_sec"], s["wall_seconds"], s["samples"])' \
        "$out/summary.json" "$label"
}

echo "ResNet-18 eval 224x224, W=2 gpuds x $THREADS threads, loader $THREADS threads, batch $BATCH, $N images, $ROUNDS rounds"
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); build $BUILD"
res="$tmp/results"
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    job plain | tee -a "$res"
    job curve --curve-dir "$tmp/keys" | tee -a "$res"
    r=$((r + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v batch="$BATCH" '
    { s[$1] += $2; n[$1]++; if ($2 > b[$1]) b[$1] = $2 }
    END {
        pm = s["plain"] / n["plain"]; cm = s["curve"] / n["curve"]
        printf "mean: plain %.2f img/s, curve %.2f img/s, curve/plain %.3f (cost %.1f%%)\n", pm, cm, cm / pm, 100 * (1 - cm / pm)
        printf "best: plain %.2f img/s, curve %.2f img/s, curve/plain %.3f\n", b["plain"], b["curve"], b["curve"] / b["plain"]
        # BATCH: 224*224*3 pixels + 8 B id + 4 B label per sample, ~200 B msgpack per batch;
        # RESULT back: 36 B per sample + ~200 B per batch
        per = 150528 + 12 + 200 / batch
        printf "link: %.0f B per img/s to the gpuds (%.2f MB/s at the curve mean), %.0f B per img/s back\n", per, per * cm / 1e6, 36 + 200 / batch
    }' "$res"

# CURVE alone on the socket path, one 150,528-byte frame per sample
$PY - <<'EOF'
import threading, time, zmq
SIZE, COUNT = 150528, 2000
def run(curve):
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    if curve:
        spub, ssec = zmq.curve_keypair()
        cpub, csec = zmq.curve_keypair()
        pull.curve_server, pull.curve_secretkey = True, ssec
        push.curve_serverkey, push.curve_publickey, push.curve_secretkey = spub, cpub, csec
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    push.connect("tcp://127.0.0.1:%d" % port)
    push.send(b"x"); pull.recv()            # handshake done
    buf = b"\0" * SIZE
    t = threading.Thread(target=lambda: [push.send(buf, copy=False) for _ in range(COUNT)])
    t0 = time.perf_counter(); t.start()
    for _ in range(COUNT):
        pull.recv(copy=False)
    dt = time.perf_counter() - t0
    t.join(); ctx.destroy(linger=0)
    return COUNT * SIZE / dt / 1e6, COUNT / dt
for curve in (False, True, False, True):
    mb, sps = run(curve)
    print("socket %-5s %7.0f MB/s = %6.0f samples/s of 224x224x3 uint8" % ("curve" if curve else "plain", mb, sps))
EOF

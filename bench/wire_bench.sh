#!/bin/sh
# --wire uint8 vs --wire jpeg across a throttled link (issue 15 item 7).
#
#   bench/wire_bench.sh [BUILD_DIR]          (default build-bench, a Release build)
#   N=256 RATE=1gbit THREADS=1 DECODE=1 RUNS=2 bench/wire_bench.sh build-bench
#
# A network namespace and a veth pair are made here (10.214.X.1 in this
# namespace, 10.214.X.2 in the other; X from the PID) and throttled with
# `tc qdisc add dev VETH root tbf rate $RATE burst 256kb latency 50ms` on
# both ends. reducerd, reporterd and loaderd run in this namespace bound to
# the veth address (TCP, --insecure: a private link to a namespace of our
# own), one gpud in the other namespace connects across it. The data: N
# 256x256 RGB JPEGs (quality 90, 7 classes: Fashion-MNIST drawings upscaled,
# tinted and textured with noise so they compress like photos, ~15-25 KB;
# made with Pillow, nothing downloaded; class folders 0..6 read with
# --classes numeric --outputs 1000), evaluated with --resize 256 --crop 224
# by ResNet-18 (tests/golden/resnet18.safetensors, seeded init: the
# accuracy means nothing, the bytes and the pace do). On a small CPU box
# ResNet-18 is slower than a 1 Gb/s link carries uint8 224x224 RGB (~830
# img/s): run also with a lower RATE to see the link-bound regime.
# For each wire, RUNS runs, alternating: loaderd's "bytes per sample" (the
# BATCH data frames it sent / samples) and reducerd's img/s (summary.json
# images_per_sec). The namespace is deleted on exit, whatever happens.
set -eu

cd "$(dirname "$0")/.."
BUILD=${1:-build-bench}
BIN=$BUILD/bin
N=${N:-256}
RATE=${RATE:-1gbit}
THREADS=${THREADS:-1}
DECODE=${DECODE:-1}
RUNS=${RUNS:-2}
BATCH=${BATCH:-32}
PY=/usr/bin/python3
MODEL="--model resnet18 --weights tests/golden/resnet18.safetensors"

[ "$(id -u)" = 0 ] || { echo "wire_bench: needs root (ip netns add)" >&2; exit 1; }
for b in reducerd reporterd loaderd gpud; do
    [ -x "$BIN/$b" ] || { echo "wire_bench: $BIN/$b missing: build $BUILD first" >&2; exit 1; }
done

X=$(( $$ % 250 + 1 ))
NS=ddpwire$$
VA=dwa$$
VB=dwb$$
A=10.214.$X.1
B=10.214.$X.2
dir=$(mktemp -d)
cleanup() {
    for p in $(cat "$dir"/pids 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true   # takes its end of the veth pair with it
    ip link del "$VA" 2>/dev/null || true
    [ -n "${KEEP:-}" ] && echo "kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT INT TERM

ip netns add "$NS"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VB" netns "$NS"
ip addr add "$A/30" dev "$VA"
ip -n "$NS" addr add "$B/30" dev "$VB"
ip link set "$VA" up
ip -n "$NS" link set lo up
ip -n "$NS" link set "$VB" up
tc qdisc add dev "$VA" root tbf rate "$RATE" burst 256kb latency 50ms
ip netns exec "$NS" tc qdisc add dev "$VB" root tbf rate "$RATE" burst 256kb latency 50ms

# the images
$PY - "$dir/data" "$N" <<'EOF'
import gzip, os, random, struct, sys
from PIL import Image
out, n = sys.argv[1], int(sys.argv[2])
with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f:
    _, count, h, w = struct.unpack(">IIII", f.read(16))
    raw = f.read(n * h * w)
rng = random.Random(15)
for i in range(n):
    c = i % 7
    os.makedirs(os.path.join(out, "%d" % c), exist_ok=True)
    gray = Image.frombytes("L", (w, h), raw[i * h * w:(i + 1) * h * w]).resize((256, 256), Image.BILINEAR)
    tint = tuple(rng.randrange(40, 255) for _ in range(3))
    rgb = Image.merge("RGB", [gray.point(lambda v, t=t: v * t // 255) for t in tint])
    noise = Image.frombytes("RGB", (256, 256), rng.randbytes(256 * 256 * 3))
    Image.blend(rgb, noise, 0.12).save(os.path.join(out, "%d" % c, "%05d.jpg" % i), quality=90)
EOF
jpeg_bytes=$(du -sb "$dir/data" | cut -f1)
echo "host: $(nproc) cpus ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -o 'avx2\|avx512f\|sse4_2' | sort -u | tr '\n' ' ')"
echo "link: veth $VA <-> $NS/$VB, tbf rate $RATE burst 256kb latency 50ms both ways"
echo "data: $N JPEGs 256x256 RGB, $((jpeg_bytes / N)) bytes per file on disk; --resize 256 --crop 224; batch $BATCH; loaderd --threads $THREADS, gpud --threads $THREADS --decode-threads $DECODE"

port=$(( 20000 + $$ % 20000 ))
run() { # run WIRE OUT
    wire=$1 out=$2
    port=$((port + 3))
    rep=tcp://$A:$port ev=tcp://127.0.0.1:$((port + 1)) ld=tcp://$A:$((port + 2))
    mkdir -p "$out"
    : > "$dir/pids"
    "$BIN/reducerd" --bind "$rep" --pub "$ev" --workers 1 --insecure > "$out/reducerd.log" 2>&1 &
    echo $! >> "$dir/pids"
    "$BIN/reporterd" --sub "$ev" --reducer "$rep" --out "$out" --insecure > "$out/reporterd.log" 2>&1 &
    echo $! >> "$dir/pids"
    "$BIN/loaderd" --data "$dir/data" --bind "$ld" --reducer "$rep" --insecure --batch-size "$BATCH" \
        --threads "$THREADS" --resize 256 --crop 224 --channels 3 --classes numeric --outputs 1000 \
        --wire "$wire" > "$out/loaderd.log" 2>&1 &
    echo $! >> "$dir/pids"
    ip netns exec "$NS" "$BIN/gpud" --loader "$ld" --reducer "$rep" --insecure --rank 0 \
        --threads "$THREADS" --decode-threads "$DECODE" --window 4 $MODEL > "$out/gpud.log" 2>&1
    for p in $(cat "$dir/pids"); do wait "$p" 2>/dev/null || true; done
    : > "$dir/pids"
    bps=$(sed -n 's/.*(\([0-9]*\) bytes per sample.*/\1/p' "$out/loaderd.log")
    ips=$($PY -c "import json,sys; s=json.load(open(sys.argv[1])); print('%.1f img/s, %d samples, %d failed' % (s['images_per_sec'], s['samples'], s['failed']))" "$out/summary.json")
    echo "  --wire $wire: $bps bytes per sample, $ips"
}

i=0
while [ "$i" -lt "$RUNS" ]; do
    echo "run $((i + 1)):"
    run uint8 "$dir/u8-$i"
    run jpeg "$dir/jp-$i"
    i=$((i + 1))
done

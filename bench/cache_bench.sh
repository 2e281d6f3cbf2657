#!/bin/sh
# --cache (issue 14 item 5): a decode-bound ImageFolder training job's
# throughput per epoch with and without the decoded-sample cache, in the
# same run. Synthetic photo-like 500x375 JPEGs (ddpipe-mkjpeg), a tiny
# WideResNet (4,8,16,32) at 28x28 RGB behind RandomResizedCrop + flip, so
# decoding is the cost; reducerd's train img/s per epoch from metrics.csv.
#
#   [SIZE=WxH] bench/cache_bench.sh BUILD_DIR [IMAGES] [EPOCHS]   (defaults 500x375, 800, 3)
#
# BUILD_DIR: a build without sanitizers (cmake -DCMAKE_BUILD_TYPE=Release).
# Target: epochs 2+ with --cache >= 3x epoch 1 (the first epoch decodes and
# fills the cache).
set -eu
build=${1:?usage: bench/cache_bench.sh BUILD_DIR [IMAGES] [EPOCHS]}
images=${2:-800}
epochs=${3:-3}
bin=$build/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpipe-cachebench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bin/ddpipe-mkjpeg" --synthetic "$images" "$work/images" --size "${SIZE:-500x375}" --classes 4 \
  --quality 90 >/dev/null
echo "$images synthetic ${SIZE:-500x375} JPEGs, $epochs epochs, 1 gpud (2 threads), loader threads 2," \
     "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
grep -o 'avx512[a-z_0-9]*\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
train() { # NAME EXTRA...
  name=$1; shift
  "$bin/ddpipe" train --data "$work/images" --out "$work/$name" --workers 1 --threads 2 \
    --loader-threads 2 --model wideresnet --channels 4,8,16,32 --in-channels 3 --num-classes 4 \
    --resize 28 --crop 28 --augment crop-flip --epochs "$epochs" --batch-size 64 --seed 1 \
    --quiet --overwrite "$@" >/dev/null
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "images_per_sec") c = i; next }
           $3 == "train" { printf "  epoch %d: %.1f img/s\n", $2, $c; r[$2] = $c }
           END { if (r[0] > 0) for (e = 1; e in r; e++)
                   printf "  epoch %d / epoch 0: %.2fx\n", e, r[e] / r[0] }' "$work/$name/metrics.csv"
}
echo "without --cache:"; train plain
echo "with --cache memory:"; train cached --cache memory

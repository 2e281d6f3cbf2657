#!/bin/sh
# Loader benchmark: ddpipe's loader (bench/loader_bench.c) vs torchvision's
# ImageFolder + DataLoader (bench/loader_torch.py) on the same synthetic
# ImageNet-sized JPEGs, same number of threads/workers, in the same run.
#
#   bench/run_loader_bench.sh [BUILD_DIR] [IMAGES] [THREADS] [EPOCHS]
#
# BUILD_DIR must hold bin/loader_bench and bin/ddpipe-mkjpeg (build it
# without sanitizers, e.g. -DCMAKE_BUILD_TYPE=Release). Defaults: build,
# 400 images of 500x375, 2 threads, 3 timed epochs.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
images=${2:-400}
threads=${3:-2}
epochs=${4:-3}
bin=$build/bin
for tool in loader_bench ddpipe-mkjpeg; do
  [ -x "$bin/$tool" ] || { echo "run_loader_bench: $bin/$tool missing; build first" >&2; exit 1; }
done
data=$(mktemp -d "${TMPDIR:-/tmp}/ddpipe-loaderbench.XXXXXX")
trap 'rm -rf "$data"' EXIT
"$bin/ddpipe-mkjpeg" --synthetic "$images" "$data" --size 500x375 --classes 4 --quality 90 >/dev/null
echo "$images synthetic 500x375 JPEGs (q90, 4:2:0, $(du -sk "$data" | cut -f1) KiB), $threads threads, Resize(256) CenterCrop(224) uint8"
ours=$("$bin/loader_bench" "$data" --threads "$threads" --epochs "$epochs")
echo "$ours"
dct=$("$bin/loader_bench" "$data" --threads "$threads" --epochs "$epochs" --dct 1)
echo "$dct  [--dct 1]"
torch=$(/usr/bin/python3 "$here/loader_torch.py" "$data" --threads "$threads" --epochs "$epochs")
echo "$torch"
rate() { echo "$1" | sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p'; }
sum() { echo "$1" | sed -n 's/.*checksum \([0-9]*\).*/\1/p'; }
awk -v a="$(rate "$ours")" -v b="$(rate "$torch")" \
  'BEGIN { printf "speedup ddpipe/torchvision: %.2fx\n", a / b }'
if [ "$(sum "$ours")" = "$(sum "$torch")" ]; then
  echo "pixels: identical checksums (PIL-exact)"
else
  echo "pixels: checksums differ: ddpipe $(sum "$ours") torchvision $(sum "$torch")"
  exit 1
fi

#!/bin/sh
# Loader benchmark: ddpipe's loader (bench/loader_bench.c) vs torchvision's
# ImageFolder + DataLoader (bench/loader_torch.py) on the same synthetic
# photo-like JPEGs, same number of threads/workers, in the same run, under
# every PyTorch peer (bench/peers.sh: Debian's torch 1.13 / torchvision
# 0.14 and the 2.15 / 0.29 of bench/setup-peers.sh; PEERS=1.13 for one).
# torchvision runs twice per peer: with PILToTensor() (uint8 batches, the same bytes
# ddpipe delivers) and with the standard eval transform ToTensor() +
# Normalize(ImageNet) (float32 batches: what a PyTorch DataLoader delivers
# to the model; ddpipe's gpud normalises its uint8 batches on the device,
# so this is the end-to-end like-for-like).
#
#   bench/run_loader_bench.sh [BUILD_DIR] [IMAGES] [THREADS] [EPOCHS]   (exit 1: pixels differ)
#   env: SIZE=500x375 (source JPEG size), RESIZE=256, CROP=224
#
# BUILD_DIR must hold bin/loader_bench and bin/ddpipe-mkjpeg (build it
# without sanitizers, e.g. -DCMAKE_BUILD_TYPE=Release). Defaults: build,
# 400 images, 2 threads, 3 timed epochs. ddpipe runs twice: PIL-exact
# (--dct 0, whose pixel checksum must equal torchvision's) and with
# libjpeg-turbo DCT scaling allowed (--dct 1; only used when the resize
# target is at most half the source, so not at all for 500x375 -> 256).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/peers.sh"
peers_init "$(dirname "$here")"
build=${1:-build}
images=${2:-400}
threads=${3:-2}
epochs=${4:-3}
size=${SIZE:-500x375}
resize=${RESIZE:-256}
crop=${CROP:-224}
bin=$build/bin
for tool in loader_bench ddpipe-mkjpeg; do
  [ -x "$bin/$tool" ] || { echo "run_loader_bench: $bin/$tool missing; build first" >&2; exit 1; }
done
data=$(mktemp -d "${TMPDIR:-/tmp}/ddpipe-loaderbench.XXXXXX")
trap 'rm -rf "$data"' EXIT
"$bin/ddpipe-mkjpeg" --synthetic "$images" "$data" --size "$size" --classes 4 --quality 90 >/dev/null
echo "$images synthetic $size JPEGs (q90, 4:2:0, $(du -sk "$data" | cut -f1) KiB), $threads threads," \
     "Resize($resize) CenterCrop($crop) to uint8, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
common="--threads $threads --epochs $epochs --resize $resize --crop $crop"
ours=$("$bin/loader_bench" "$data" $common --dct 0)
echo "$ours"
dct=$("$bin/loader_bench" "$data" $common --dct 1)
echo "$dct  [--dct 1]"
peers_describe
torchargs="--threads $threads --epochs $epochs --resize $resize --crop $crop"
rate() { echo "$1" | sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p'; }
cpu() { echo "$1" | sed -n 's/.* \([0-9.]*\) CPU ms\/img.*/\1/p'; }
sum() { echo "$1" | sed -n 's/.*checksum \([0-9]*\).*/\1/p'; }
ratio() { # OURS THEIRS LABEL
  awk -v a="$(rate "$1")" -v b="$(rate "$2")" -v c="$(cpu "$1")" -v d="$(cpu "$2")" \
    -v what="$3" 'BEGIN { printf "speedup %s: %.2fx img/s, %.2fx CPU per image\n", what, a / b, d / c }'
}
status=0
line=""
for p in $PEER_LABELS; do
  py=$(peer_py "$p")
  torch=$("$py" "$here/loader_torch.py" "$data" $torchargs --to uint8)
  echo "[torch $p] $torch"
  torchf=$("$py" "$here/loader_torch.py" "$data" $torchargs --to float)
  echo "[torch $p] $torchf"
  ratio "$ours" "$torch" "ddpipe uint8 / torchvision $p PILToTensor (uint8)"
  ratio "$ours" "$torchf" "ddpipe uint8 / torchvision $p ToTensor+Normalize (float32)"
  ratio "$dct" "$torch" "ddpipe --dct 1 / torchvision $p PILToTensor (uint8)"
  line="$line${line:+  }$(awk -v a="$(rate "$ours")" -v b="$(rate "$torch")" -v p="$p" \
    'BEGIN { printf "vs torch %s: %.2fx", p, a / b }')"
  for t in "$torch" "$torchf"; do
    if [ "$(sum "$ours")" != "$(sum "$t")" ]; then
      echo "pixels: checksums differ: ddpipe $(sum "$ours") torchvision $p $(sum "$t")"
      status=1
    fi
  done
done
echo "$line   (ddpipe uint8 img/s / torchvision PILToTensor uint8 img/s)"
[ $status = 0 ] && echo "pixels: identical checksums, uint8 and float, every peer (PIL-exact)"
exit $status

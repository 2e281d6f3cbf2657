#!/bin/sh
# Peak memory of densenet121 transfer training with the features frozen
# (issue 14 item 3): ddpipe's gpud (its exit line's peak RSS) against
# PyTorch doing the same steps (ru_maxrss), in the same run.
#
#   bench/densenet_memory.sh BUILD_DIR [BATCH] [STEPS]        (defaults 16, 3)
#
# BUILD_DIR: a build without sanitizers. Synthetic 224x224 JPEGs in 4
# classes; densenet121 with 4 outputs, --freeze features (every features.*
# parameter frozen, BatchNorm still in training mode, as model.train() with
# requires_grad False), SGD momentum 0.9, 2 threads on both sides.
# Target: ddpipe's peak <= 1.5x PyTorch's.
set -eu
build=${1:?usage: bench/densenet_memory.sh BUILD_DIR [BATCH] [STEPS]}
batch=${2:-16}
steps=${3:-3}
bin=$build/bin
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpipe-dnmem.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=$((batch * steps))
"$bin/ddpipe-mkjpeg" --synthetic "$n" "$work/images" --size 224x224 --classes 4 --quality 90 \
  >/dev/null
echo "densenet121, features frozen, batch $batch, $steps steps, 224x224, 2 threads," \
     "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
"$bin/ddpipe" train --data "$work/images" --out "$work/run" --workers 1 --threads 2 \
  --loader-threads 1 --model densenet121 --num-classes 4 --freeze features --epochs 1 \
  --batch-size "$batch" --lr 0.01 --momentum 0.9 --augment none --quiet --overwrite >/dev/null
ours=$(sed -n 's/.*peak RSS \([0-9]*\) MB.*/\1/p' "$work/run/logs/gpud.0.log" | tail -1)
theirs=$(/usr/bin/python3 "$here/densenet_memory_torch.py" "$batch" "$steps")
echo "ddpipe gpud peak RSS: $ours MB"
echo "PyTorch peak RSS:     $theirs MB"
awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "ratio ddpipe / PyTorch: %.2fx (target <= 1.5x)\n", a / b }'

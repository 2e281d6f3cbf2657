#!/bin/sh
# Peak memory of densenet121 transfer training with the features frozen
# (issue 14 item 3): ddpipe's gpud (its exit line's peak RSS) against
# PyTorch doing the same steps (ru_maxrss), in the same run, under every
# PyTorch peer (bench/peers.sh: Debian's 1.13 and the 2.15 of
# bench/setup-peers.sh; PEERS=1.13 for one). Each peer's RSS after
# `import torch, torchvision` alone is printed beside it: 2.15 from PyPI is
# the CUDA build, whose CUDA libraries are mapped at import even on a CPU.
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
. "$here/peers.sh"
peers_init "$(dirname "$here")"
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
echo "ddpipe gpud peak RSS: $ours MB"
line=""
for p in $PEER_LABELS; do
  py=$(peer_py "$p")
  theirs=$("$py" "$here/densenet_memory_torch.py" "$batch" "$steps")
  base=$("$py" -c 'import resource, torch, torchvision
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)')
  echo "PyTorch $p peak RSS: $theirs MB (after import alone: $base MB)"
  awk -v a="$ours" -v b="$theirs" -v p="$p" \
    'BEGIN { printf "ratio ddpipe / PyTorch %s: %.2fx (target <= 1.5x)\n", p, a / b }'
  line="$line${line:+  }$(awk -v a="$ours" -v b="$theirs" -v p="$p" 'BEGIN { printf "vs torch %s: %.2fx", p, a / b }')"
done
echo "$line   (peak RSS, ddpipe / PyTorch)"

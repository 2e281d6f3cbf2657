#!/bin/sh
# The small-model training pipeline against PyTorch DDP (issue 14 item 6):
# the same job, `ddpipe train` (all four daemons) and PyTorch 1.13
# DistributedDataParallel with W gloo processes (bench/train_ddp_torch.py),
# interleaved ROUNDS times in one run; each reports the train images/s of
# its last epoch (loading, compute, all-reduce and waiting all count) and
# its val top-1 (equal accuracy is part of the comparison).
#
#   bench/train_pipeline.sh [BUILD_DIR] [ROUNDS]
#   env: WORKERS=2 LIMIT=12000 BATCH=64 (per rank) EPOCHS=3 CHANNELS=16,32,64,128
#        PY=/usr/bin/python3 (a python with torch)
#
# One compute thread per worker on both sides (the peer's best on a machine
# with W cores: more threads oversubscribe). PyTorch's data is a tensor in
# memory (its best case); ddpipe's loaderd reads IDX and ships every batch.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
ROUNDS=${2:-1}
W=${WORKERS:-2}
LIMIT=${LIMIT:-12000}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
CHANNELS=${CHANNELS:-16,32,64,128}
FM=/usr/share/datasets/fashion-mnist
PY=${PY:-/usr/bin/python3}   # a python with torch
for t in ddpipe gpud loaderd reducerd reporterd; do
    [ -x "$BUILD/bin/$t" ] || { echo "train_pipeline: $BUILD/bin/$t missing; build first" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "WideResNet $CHANNELS, first $LIMIT Fashion-MNIST images, $W workers x batch $BATCH," \
     "SGD 0.05/0.9, $EPOCHS epochs, val t10k; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo
echo "| round | ddpipe img/s | ddpipe val top-1 | torch DDP img/s | torch val top-1 | ratio |"
echo "|---|---|---|---|---|---|"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    out="$dir/run$r"
    "$BUILD/bin/ddpipe" train --data "idx:$FM/train" --limit "$LIMIT" --val "idx:$FM/t10k" \
        --model wideresnet --channels "$CHANNELS" --workers "$W" --batch-size "$BATCH" \
        --epochs "$EPOCHS" --lr 0.05 --momentum 0.9 --seed 0 --threads 1 --loader-threads 1 \
        --quiet --out "$out" >"$dir/ddpipe$r.txt" 2>&1 || { cat "$dir/ddpipe$r.txt"; exit 1; }
    ips=$(awk -F, '$3 == "train" { v = $8 } END { print v }' "$out/metrics.csv")
    top=$(awk -F, '$3 == "val" { v = $6 } END { print v }' "$out/metrics.csv")
    # each side as soon as it is known: a run cut short still reports one
    echo "round $r ddpipe: $ips img/s, val top-1 $top" >&2
    torch=$("$PY" bench/train_ddp_torch.py --data "$FM" --workers "$W" --limit "$LIMIT" \
        --batch "$BATCH" --epochs "$EPOCHS" --channels "$CHANNELS" | tail -1)
    tips=$(echo "$torch" | sed -n 's/.*img\/s=\([0-9.]*\).*/\1/p')
    ttop=$(echo "$torch" | sed -n 's/.*top1=\([0-9.]*\).*/\1/p')
    awk -v r="$r" -v a="$ips" -v at="$top" -v b="$tips" -v bt="$ttop" \
        'BEGIN { printf "| %d | %.1f | %.4f | %.1f | %.4f | %.2fx |\n", r, a, at, b, bt, a / b }'
    r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

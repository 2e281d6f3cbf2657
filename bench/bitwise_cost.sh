#!/bin/sh
# The cost of bitwise training (issue 31, docs/TRAINING.md "Bitwise
# training"): the same `ddpipe train` job (all four daemons) without and
# with --chunk N, interleaved A B A B ROUNDS times in one run; each reports
# the train images/s of its last epoch (metrics.csv: loading, compute,
# all-reduce and waiting all count) and the ratio chunked / plain of the
# same round. With and without --sync-bn (SYNC=1).
#
#   bench/bitwise_cost.sh [BUILD_DIR] [ROUNDS]
#   env: WORKERS=2 LIMIT=3072 G=64 CHUNKS="8 16" EPOCHS=1
#        CHANNELS=16,32,64,128 SYNC=0
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
ROUNDS=${2:-2}
W=${WORKERS:-2}
LIMIT=${LIMIT:-3072}
G=${G:-64}
CHUNKS=${CHUNKS:-8 16}
EPOCHS=${EPOCHS:-1}
CHANNELS=${CHANNELS:-16,32,64,128}
SYNC=${SYNC:-0}
FM=/usr/share/datasets/fashion-mnist
for t in ddpipe gpud loaderd reducerd reporterd; do
    [ -x "$BUILD/bin/$t" ] || { echo "bitwise_cost: $BUILD/bin/$t missing; build first" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sync_flag=""
[ "$SYNC" = 1 ] && sync_flag="--sync-bn"
echo "WideResNet $CHANNELS, first $LIMIT Fashion-MNIST images, $W workers, global batch $G," \
     "SGD 0.05/0.9, $EPOCHS epoch(s) ${sync_flag:-(BatchNorm per rank / per chunk)}; $(nproc) CPUs," \
     "load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo
run() {   # run NAME EXTRA-FLAGS...: prints the last epoch's train img/s
    name=$1
    shift
    "$BUILD/bin/ddpipe" train --data "idx:$FM/train" --limit "$LIMIT" --model wideresnet \
        --channels "$CHANNELS" --workers "$W" --global-batch-size "$G" --epochs "$EPOCHS" \
        --lr 0.05 --momentum 0.9 --seed 0 --threads 1 --loader-threads 1 $sync_flag "$@" \
        --quiet --out "$dir/$name" >"$dir/$name.txt" 2>&1 || { cat "$dir/$name.txt" >&2; exit 1; }
    awk -F, '$3 == "train" { v = $8 } END { printf "%.1f\n", v }' "$dir/$name/metrics.csv"
}
printf '| round | plain img/s |'
for c in $CHUNKS; do printf ' --chunk %s img/s | ratio |' "$c"; done
echo
printf '|---|---|'
for c in $CHUNKS; do printf -- '---|---|'; done
echo
r=1
while [ "$r" -le "$ROUNDS" ]; do
    a=$(run "plain$r")
    line="| $r | $a |"
    for c in $CHUNKS; do
        b=$(run "chunk$c-$r" --chunk "$c")
        line="$line $b | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2fx", b / a }') |"
    done
    echo "$line"
    r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

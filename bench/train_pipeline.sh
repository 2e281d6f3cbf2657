#!/bin/sh
# The small-model training pipeline against PyTorch DDP (issue 14 item 6):
# the same job, `ddpipe train` (all four daemons) and PyTorch
# DistributedDataParallel with W gloo processes (bench/train_ddp_torch.py)
# under every PyTorch peer (bench/peers.sh: Debian's 1.13 and the 2.15 of
# bench/setup-peers.sh), interleaved ROUNDS times in one run; each reports
# the train images/s of its last epoch (loading, compute, all-reduce and
# waiting all count) and its val top-1 (equal accuracy is part of the
# comparison). One ratio per peer: ddpipe img/s / that peer's.
#
#   bench/train_pipeline.sh [BUILD_DIR] [ROUNDS]
#   env: WORKERS=2 LIMIT=12000 BATCH=64 (per rank) EPOCHS=3 CHANNELS=16,32,64,128
#        PEERS="1.13 2.15" (default), PEERS=1.13, or PY=python alone (bench/peers.sh)
#        SEEDS="0" (default): round r's data-order seed is the r-th of the list
#        (cycled; ddpipe --seed, the peers' DistributedSampler seed). A val
#        top-1 moves by up to 6 points with the seed after 3 epochs at lr
#        0.05 (bench/RESULTS.md, 2026-12-01): compare accuracy over several,
#        e.g. SEEDS="0 1 2 3" with 4 rounds; the last line gives each side's
#        mean val top-1 over the rounds.
#        TMAX=T: both sides anneal the lr on a cosine over T epochs
#        (ddpipe --lr-schedule cosine --t-max T, the peers CosineAnnealingLR);
#        default: a constant lr.
#
# One compute thread per worker on both sides (the peer's best on a machine
# with W cores: more threads oversubscribe). PyTorch's data is a tensor in
# memory (its best case); ddpipe's loaderd reads IDX and ships every batch.
# Every side starts from the same weights (PyTorch's default init, seed 0,
# written once by train_ddp_torch.py --save-init; ddpipe --weights, the
# peers --init), and every side scores the whole t10k set (ddpipe --val-limit 0),
# so the val top-1s differ by data order and arithmetic only.
set -eu
cd "$(dirname "$0")/.."
. bench/peers.sh
BUILD=${1:-build-rel}
ROUNDS=${2:-1}
W=${WORKERS:-2}
LIMIT=${LIMIT:-12000}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
CHANNELS=${CHANNELS:-16,32,64,128}
FM=/usr/share/datasets/fashion-mnist
peers_init "$(pwd)"
for t in ddpipe gpud loaderd reducerd reporterd; do
    [ -x "$BUILD/bin/$t" ] || { echo "train_pipeline: $BUILD/bin/$t missing; build first" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 bench/train_ddp_torch.py --save-init "$dir/init.safetensors" \
    --channels "$CHANNELS" --seed 0
echo "WideResNet $CHANNELS, first $LIMIT Fashion-MNIST images, $W workers x batch $BATCH," \
     "SGD 0.05/0.9${TMAX:+ (cosine over $TMAX epochs)}, $EPOCHS epochs, val t10k; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
peers_describe
echo
hdr="| round | ddpipe img/s | ddpipe val top-1 |"
sep="|---|---|---|"
for p in $PEER_LABELS; do
    hdr="$hdr torch $p DDP img/s | torch $p val top-1 | ddpipe / torch $p |"
    sep="$sep---|---|---|"
done
echo "$hdr"
echo "$sep"
: >"$dir/ratios"
SEEDS=${SEEDS:-0}
TMAX=${TMAX:-}
sched="" peer_sched=""
if [ -n "$TMAX" ]; then
    sched="--lr-schedule cosine --t-max $TMAX" peer_sched="--t-max $TMAX"
fi
nseeds=$(echo $SEEDS | wc -w)
: >"$dir/tops"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    out="$dir/run$r"
    seed=$(echo $SEEDS | cut -d' ' -f$(( (r - 1) % nseeds + 1 )))
    "$BUILD/bin/ddpipe" train --data "idx:$FM/train" --limit "$LIMIT" --val "idx:$FM/t10k" \
        --val-limit 0 \
        --model wideresnet --channels "$CHANNELS" --workers "$W" --batch-size "$BATCH" \
        --epochs "$EPOCHS" --lr 0.05 --momentum 0.9 --seed "$seed" $sched --threads 1 --loader-threads 1 \
        --weights "$dir/init.safetensors" --quiet --out "$out" >"$dir/ddpipe$r.txt" 2>&1 ||
        { cat "$dir/ddpipe$r.txt"; exit 1; }
    ips=$(awk -F, '$3 == "train" { v = $8 } END { print v }' "$out/metrics.csv")
    top=$(awk -F, '$3 == "val" { v = $6 } END { print v }' "$out/metrics.csv")
    # each side as soon as it is known: a run cut short still reports one
    echo "round $r (seed $seed) ddpipe: $ips img/s, val top-1 $top" >&2
    echo "ddpipe $top" >>"$dir/tops"
    row=$(awk -v r="$r" -v a="$ips" -v at="$top" 'BEGIN { printf "| %d | %.1f | %.4f |", r, a, at }')
    for p in $PEER_LABELS; do
        torch=$("$(peer_py "$p")" bench/train_ddp_torch.py --data "$FM" --workers "$W" \
            --limit "$LIMIT" --batch "$BATCH" --epochs "$EPOCHS" --channels "$CHANNELS" \
            --init "$dir/init.safetensors" --seed "$seed" $peer_sched | tail -1)
        tips=$(echo "$torch" | sed -n 's/.*img\/s=\([0-9.]*\).*/\1/p')
        ttop=$(echo "$torch" | sed -n 's/.*top1=\([0-9.]*\).*/\1/p')
        echo "round $r torch $p: $tips img/s, val top-1 $ttop" >&2
        echo "torch-$p $ttop" >>"$dir/tops"
        row="$row$(awk -v a="$ips" -v b="$tips" -v bt="$ttop" \
            'BEGIN { printf " %.1f | %.4f | %.2fx |", b, bt, a / b }')"
        echo "$p $ips $tips" >>"$dir/ratios"
    done
    echo "$row"
    r=$((r + 1))
done
echo
# over the rounds: the mean of ddpipe's img/s over the mean of each peer's
awk -v peers="$PEER_LABELS" '
    { a[$1] += $2; b[$1] += $3 }
    END {
        n = split(peers, P, " "); line = ""
        for (i = 1; i <= n; i++)
            line = line sprintf("%svs torch %s: %.2fx", i > 1 ? "  " : "", P[i], a[P[i]] / b[P[i]])
        print line
    }' "$dir/ratios"
# the val top-1 of each side, the mean over the rounds (seeds: SEEDS)
awk '{ s[$1] += $2; n[$1]++; if (!($1 in o)) { o[$1] = ++k; name[k] = $1 } }
     END { line = "mean val top-1 over the rounds:"
           for (i = 1; i <= k; i++) line = line sprintf(" %s %.4f", name[i], s[name[i]] / n[name[i]])
           print line }' "$dir/tops"
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

#!/bin/sh
# The ceiling of a training-step ratio over PyTorch when both sides run the
# same convolution kernels (issue 14: "where a target is missed, say what
# the limit is"). In one run, on one thread, the seed WideResNet, batch 64:
#   - PyTorch's step (bench/train_fmnist_torch.py) and its convolution ops'
#     share of a step (bench/torch_conv_share.py), for every PyTorch peer
#     (bench/peers.sh: Debian's 1.13 with oneDNN 2.6, the 2.15 of
#     bench/setup-peers.sh with oneDNN 3.x; PEERS=1.13 for one);
#   - ddpipe's step (bench/train_fmnist) and the time of its oneDNN
#     convolution primitives per step (ONEDNN_VERBOSE=1 exec lines: forward,
#     backward data, backward weights; validation excluded), two ways:
#     as run by default (NHWC) and on blocked activations
#     (DDPIPE_CONV_LAYOUT=blocked);
#   - the floor: per convolution shape the fastest of the two for its
#     three passes, summed per step. No step of ddpipe that calls these
#     kernels can take less, whatever else it fuses, so each peer's step /
#     floor bounds the ratio over that peer; "left at 1.5x" is the time a 1.5x step leaves for everything
#     that is not a convolution (BatchNorm, ReLU, pooling, dropout, loss,
#     optimizer, all-reduce, loading), negative when 1.5x is out of reach.
#
#   bench/conv_floor.sh [BUILD_DIR]        (default build-rel)
#   env: STEPS=12 CHANNELS=16,32,64,128 PEERS="1.13 2.15" (or PY=python alone)
set -eu
cd "$(dirname "$0")/.."
. bench/peers.sh
BUILD=${1:-build-rel}
STEPS=${STEPS:-12}
CHANNELS=${CHANNELS:-16,32,64,128}
peers_init "$(pwd)"
B="$BUILD/bench/train_fmnist"
[ -x "$B" ] || { echo "conv_floor: $B missing; build first" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

echo "seed WideResNet $CHANNELS, 1x28x28, batch 64, 1 thread, $STEPS steps;" \
     "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
peers_describe

# the peers: each its training run (the first one's files feed ddpipe) and
# its profiled step
first=${PEER_LABELS%% *}
: >"$dir/peers"
for p in $PEER_LABELS; do
    pdir=$dir
    [ "$p" = "$first" ] || pdir=$dir/peer-$p
    "$(peer_py "$p")" bench/train_fmnist_torch.py --outdir "$pdir" --steps "$STEPS" --threads 1 \
        --channels "$CHANNELS" --test 64 >"$dir/torch_train-$p.txt"
    "$(peer_py "$p")" bench/torch_conv_share.py --model wideresnet --size 28 --batch 64 \
        --threads 1 --channels "$CHANNELS" >"$dir/torch_share-$p.txt"
    echo "$p $(sed -n 's/.*img\/s=\([0-9.]*\).*/\1/p' "$dir/torch_train-$p.txt")" \
         "$(sed -n 's/.*share=\([0-9.]*\).*/\1/p' "$dir/torch_share-$p.txt")" >>"$dir/peers"
done
# ddpipe: a plain run for the step time, then one verbose run per layout
"$B" --dir "$dir" --steps "$STEPS" --threads 1 --test 64 --channels "$CHANNELS" \
    >"$dir/ddpipe.txt"
ONEDNN_VERBOSE=1 "$B" --dir "$dir" --steps "$STEPS" --threads 1 --test 64 \
    --channels "$CHANNELS" >"$dir/default.txt" 2>&1
ONEDNN_VERBOSE=1 DDPIPE_CONV_LAYOUT=blocked "$B" --dir "$dir" --steps "$STEPS" --threads 1 \
    --test 64 --channels "$CHANNELS" >"$dir/blocked.txt" 2>&1

# each peer's step from its training run (the same data and steps as
# ddpipe's), its convolutions' share of a step from the profiled one; per
# step and convolution shape: ddpipe's primitives' exec ms (all directions);
# forward_inference is the test pass, not the step
dips=$(sed -n 's/.*img\/s=\([0-9.]*\).*/\1/p' "$dir/ddpipe.txt")
awk -F, -v steps="$STEPS" -v dips="$dips" -v peerfile="$dir/peers" '
    FNR == 1 { side++ }
    /^(onednn|dnnl)_verbose,exec,cpu,convolution,/ && $6 != "forward_inference" {
        t[side, $(NF - 1)] += $NF; keys[$(NF - 1)] = 1
    }
    END {
        np = 0
        while ((getline l < peerfile) > 0) {
            split(l, f, " "); np++; P[np] = f[1]; tips[np] = f[2]; share[np] = f[3]
        }
        for (k in keys) {
            best = t[1, k]
            for (r = 1; r <= 2; r++) {
                tot[r] += t[r, k]
                best = t[r, k] < best ? t[r, k] : best
            }
            floor += best
        }
        for (r = 1; r <= 2; r++)
            tot[r] /= steps
        floor /= steps
        dstep = 64000 / dips
        h = "\n| per step (ms) |"; sep = "|---|"
        for (i = 1; i <= np; i++) {
            h = h " PyTorch " P[i] " |"; sep = sep "---:|"
            tstep[i] = 64000 / tips[i]; tconv[i] = share[i] * tstep[i]
        }
        print h " ddpipe |"; print sep "---:|"
        row = "| step |"; crow = "| convolutions |"; blank = ""
        for (i = 1; i <= np; i++) {
            row = row sprintf(" %.1f |", tstep[i])
            crow = crow sprintf(" %.1f (its conv ops) |", tconv[i])
            blank = blank " |"
        }
        print row sprintf(" %.1f |", dstep)
        print crow sprintf(" %.1f (as run by default) |", tot[1])
        printf "| convolutions, blocked layout |%s %.1f |\n", blank, tot[2]
        printf "| convolutions, floor (fastest of the two per shape) |%s %.1f |\n", blank, floor
        printf "\n"
        line = ""
        for (i = 1; i <= np; i++) {
            printf "vs torch %s: step ratio now %.2fx; ceiling (its step / ddpipe conv floor): %.2fx;" \
                   " left at 1.5x for all else: %.1f ms a step\n", P[i], tstep[i] / dstep,
                   tstep[i] / floor, tstep[i] / 1.5 - floor
            line = line sprintf("%svs torch %s: %.2fx", i > 1 ? "  " : "", P[i], tstep[i] / dstep)
        }
        print line
    }' "$dir/default.txt" "$dir/blocked.txt"
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

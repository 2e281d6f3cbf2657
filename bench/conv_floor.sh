#!/bin/sh
# The ceiling of a training-step ratio over PyTorch when both sides run the
# same convolution kernels (issue 14: "where a target is missed, say what
# the limit is"). In one run, on one thread, the seed WideResNet, batch 64:
#   - PyTorch's step (bench/train_fmnist_torch.py) and its convolution ops'
#     share of a step (bench/torch_conv_share.py; PyTorch 1.13's oneDNN);
#   - ddpipe's step (bench/train_fmnist) and the time of its oneDNN
#     convolution primitives per step (ONEDNN_VERBOSE=1 exec lines: forward,
#     backward data, backward weights; validation excluded), two ways:
#     as run by default (NHWC) and on blocked activations
#     (DDPIPE_CONV_LAYOUT=blocked);
#   - the floor: per convolution shape the fastest of the two for its
#     three passes, summed per step. No step of ddpipe that calls these
#     kernels can take less, whatever else it fuses, so PyTorch's step /
#     floor bounds the ratio; "left at 1.5x" is the time a 1.5x step leaves for everything
#     that is not a convolution (BatchNorm, ReLU, pooling, dropout, loss,
#     optimizer, all-reduce, loading), negative when 1.5x is out of reach.
#
#   bench/conv_floor.sh [BUILD_DIR]        (default build-rel)
#   env: STEPS=12 CHANNELS=16,32,64,128 PY=/usr/bin/python3 (a python with torch)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-rel}
STEPS=${STEPS:-12}
CHANNELS=${CHANNELS:-16,32,64,128}
PY=${PY:-/usr/bin/python3}
B="$BUILD/bench/train_fmnist"
[ -x "$B" ] || { echo "conv_floor: $B missing; build first" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

echo "seed WideResNet $CHANNELS, 1x28x28, batch 64, 1 thread, $STEPS steps;" \
     "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"

"$PY" bench/train_fmnist_torch.py --outdir "$dir" --steps "$STEPS" --threads 1 \
    --channels "$CHANNELS" --test 64 >"$dir/torch_train.txt"
"$PY" bench/torch_conv_share.py --model wideresnet --size 28 --batch 64 --threads 1 \
    --channels "$CHANNELS" >"$dir/torch_share.txt"
# ddpipe: a plain run for the step time, then one verbose run per layout
"$B" --dir "$dir" --steps "$STEPS" --threads 1 --test 64 --channels "$CHANNELS" \
    >"$dir/ddpipe.txt"
ONEDNN_VERBOSE=1 "$B" --dir "$dir" --steps "$STEPS" --threads 1 --test 64 \
    --channels "$CHANNELS" >"$dir/default.txt" 2>&1
ONEDNN_VERBOSE=1 DDPIPE_CONV_LAYOUT=blocked "$B" --dir "$dir" --steps "$STEPS" --threads 1 \
    --test 64 --channels "$CHANNELS" >"$dir/blocked.txt" 2>&1

# PyTorch's step from its training run (the same data and steps as
# ddpipe's), its convolutions' share of a step from the profiled one
tips=$(sed -n 's/.*img\/s=\([0-9.]*\).*/\1/p' "$dir/torch_train.txt")
share=$(sed -n 's/.*share=\([0-9.]*\).*/\1/p' "$dir/torch_share.txt")
dips=$(sed -n 's/.*img\/s=\([0-9.]*\).*/\1/p' "$dir/ddpipe.txt")
# per step and convolution shape: its primitives' exec ms (all directions);
# forward_inference is the test pass, not the step
awk -F, -v steps="$STEPS" -v tips="$tips" -v share="$share" -v dips="$dips" '
    FNR == 1 { side++ }
    /^(onednn|dnnl)_verbose,exec,cpu,convolution,/ && $6 != "forward_inference" {
        t[side, $(NF - 1)] += $NF; keys[$(NF - 1)] = 1
    }
    END {
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
        dstep = 64000 / dips; tstep = 64000 / tips; tconv = share * tstep
        printf "\n| per step (ms) | PyTorch 1.13 | ddpipe |\n|---|---:|---:|\n"
        printf "| step | %.1f | %.1f |\n", tstep, dstep
        printf "| convolutions | %.1f (its conv ops) | %.1f (as run by default) |\n", tconv, tot[1]
        printf "| convolutions, blocked layout | | %.1f |\n", tot[2]
        printf "| convolutions, floor (fastest of the two per shape) | | %.1f |\n", floor
        printf "\nstep ratio now: %.2fx; ceiling (PyTorch step / ddpipe conv floor): %.2fx;" \
               " left at 1.5x for all else: %.1f ms a step\n", tstep / dstep, tstep / floor,
               tstep / 1.5 - floor
    }' "$dir/default.txt" "$dir/blocked.txt"
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"

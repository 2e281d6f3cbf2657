#!/bin/sh
# Fashion-MNIST training in one process, ddpipe vs PyTorch, from the same
# initial weights and the same data order: bench/train_fmnist_torch.py under
# the first PyTorch peer builds the seed WideResNet (channels 8,16,32,64,
# seed 0), writes its initial state_dict and a permutation of the first
# STEPS*64 training images to a temp dir and trains; bench/train_fmnist then
# trains from those files; every other peer (bench/peers.sh: PEERS="1.13
# 2.15" by default, the 2.15 of bench/setup-peers.sh) builds its own with the
# same seed and trains, and the run says whether its initial weights and
# order are the bytes the first peer wrote (its curve is comparable then).
# All:
# ToTensor only, batch 64, SGD lr 0.05 momentum 0.9, dropout off, BatchNorm
# in training mode; then top-1 on the first 2000 t10k images.
#   bench/run_train_fmnist.sh [BUILD_DIR]      (default: build-bench, Release)
#   STEPS=200 THREADS=1 LOG=losses.txt bench/run_train_fmnist.sh
#   PRECISION=bf16 bench/run_train_fmnist.sh   (ddpipe --precision bf16; PyTorch stays
#          fp32: its bf16 autocast training on an AVX2 CPU is far too slow to bench)
# Prints, every 20 steps, the 20-step mean loss of each and |diff|; then the
# first-step loss difference, final top-1 and training img/s of both. LOG: also
# write every step's "step torch_loss ddpipe_loss" there (to plot the curves).
# THREADS defaults to 1: on a small shared box, 2 OpenMP threads per process
# lose far more to oversubscription than they gain.
set -eu

cd "$(dirname "$0")/.."
. bench/peers.sh
BUILD=${1:-build-bench}
STEPS=${STEPS:-200}
THREADS=${THREADS:-1}
TEST=${TEST:-2000}
PRECISION=${PRECISION:-fp32}
case "$PRECISION" in
    fp32) PFLAG="" ;;
    bf16) PFLAG="--bf16" ;;
    *) echo "bench/run_train_fmnist.sh: PRECISION is fp32 or bf16" >&2; exit 2 ;;
esac
peers_init "$(pwd)"

if [ ! -x "$BUILD/bench/train_fmnist" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target train_fmnist -j2 >/dev/null
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "WideResNet 8,16,32,64 on Fashion-MNIST, $STEPS steps x 64, SGD 0.05 m0.9, $THREADS thread(s), ddpipe $PRECISION"
echo "cpu flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
peers_describe
first=${PEER_LABELS%% *}
files=""
for p in $PEER_LABELS; do
    pdir=$dir
    [ "$p" = "$first" ] || pdir=$dir/peer-$p
    "$(peer_py "$p")" bench/train_fmnist_torch.py --outdir "$pdir" --steps "$STEPS" \
        --threads "$THREADS" --test "$TEST" | sed "s/^torch /torch peer=$p /" >"$dir/torch-$p.txt"
    files="$files $dir/torch-$p.txt"
    if [ "$p" = "$first" ]; then
        "$BUILD/bench/train_fmnist" --dir "$dir" --steps "$STEPS" --threads "$THREADS" \
            --test "$TEST" $PFLAG >"$dir/ddpipe.txt"
    elif cmp -s "$dir/init.safetensors" "$pdir/init.safetensors" &&
         cmp -s "$dir/order.u32" "$pdir/order.u32"; then
        echo "torch $p: the same initial weights and data order as torch $first (bytes)"
    else
        echo "torch $p: initial weights or data order differ from torch $first's: its curve" \
             "is its own, only its speed compares"
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -h 'fmnist-train' $files "$dir/ddpipe.txt"
if [ -n "${LOG:-}" ]; then
    paste -d' ' "$dir/torch-$first.txt" "$dir/ddpipe.txt" | awk '$1 == "step" { print $2, $4, $8 }' >"$LOG"
fi
# files: the peers in order, ddpipe last
awk -v peers="$PEER_LABELS" '
    FNR == 1 { side++ }
    /^step / { loss[side, $2] = $4; n = $2 > n ? $2 : n }
    /fmnist-train/ {
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[side, kv[1]] = kv[2] }
    }
    END {
        np = split(peers, P, " "); d = np + 1
        h = "| steps |"; r = "|------:|"
        for (i = 1; i <= np; i++) { h = h " torch " P[i] " loss (mean) |"; r = r "------:|" }
        print h " ddpipe loss (mean) | abs diff (ddpipe - torch " P[1] ") |"
        print r "------:|------:|"
        for (lo = 1; lo <= n; lo += 20) {
            hi = lo + 19 > n ? n : lo + 19
            row = sprintf("| %d-%d |", lo, hi)
            for (s = 1; s <= d; s++) {
                m[s] = 0
                for (k = lo; k <= hi; k++) m[s] += loss[s, k]
                m[s] /= hi - lo + 1
                row = row sprintf(" %.4f |", m[s])
            }
            x = m[d] - m[1]
            print row sprintf(" %.4f |", x < 0 ? -x : x)
        }
        f = loss[1, 1] - loss[d, 1]
        printf "first step: torch %s %.7f, ddpipe %.7f, |diff| %.2g\n", P[1], loss[1, 1], loss[d, 1],
               (f < 0 ? -f : f)
        line = sprintf("test top-1 (first %s t10k):", v[1, "test"])
        for (i = 1; i <= np; i++) line = line sprintf(" torch %s %.4f,", P[i], v[i, "top1"])
        print line sprintf(" ddpipe %.4f", v[d, "top1"])
        line = sprintf("train img/s (steps 2..%d):", n)
        for (i = 1; i <= np; i++) line = line sprintf(" torch %s %.1f,", P[i], v[i, "img/s"])
        print line sprintf(" ddpipe %.1f", v[d, "img/s"])
        line = ""
        for (i = 1; i <= np; i++)
            line = line sprintf("%svs torch %s: %.2fx", i > 1 ? "  " : "", P[i], v[d, "img/s"] / v[i, "img/s"])
        print line
    }' $files "$dir/ddpipe.txt"

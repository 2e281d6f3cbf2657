#!/bin/sh
# Fashion-MNIST training in one process, ddpipe vs PyTorch 1.13, from the same
# initial weights and the same data order: bench/train_fmnist_torch.py builds
# the seed WideResNet (channels 8,16,32,64, seed 0), writes its initial
# state_dict and a permutation of the first STEPS*64 training images to a
# temp dir and trains; bench/train_fmnist then trains from those files. Both:
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
PY=/usr/bin/python3

if [ ! -x "$BUILD/bench/train_fmnist" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target train_fmnist -j2 >/dev/null
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "WideResNet 8,16,32,64 on Fashion-MNIST, $STEPS steps x 64, SGD 0.05 m0.9, $THREADS thread(s), ddpipe $PRECISION"
echo "cpu flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
$PY bench/train_fmnist_torch.py --outdir "$dir" --steps "$STEPS" --threads "$THREADS" \
    --test "$TEST" >"$dir/torch.txt"
"$BUILD/bench/train_fmnist" --dir "$dir" --steps "$STEPS" --threads "$THREADS" \
    --test "$TEST" $PFLAG >"$dir/ddpipe.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -h 'fmnist-train' "$dir/torch.txt" "$dir/ddpipe.txt"
if [ -n "${LOG:-}" ]; then
    paste -d' ' "$dir/torch.txt" "$dir/ddpipe.txt" | awk '$1 == "step" { print $2, $4, $8 }' >"$LOG"
fi
awk '
    FNR == 1 { side++ }
    /^step / { loss[side, $2] = $4; n = $2 > n ? $2 : n }
    /fmnist-train/ {
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[side, kv[1]] = kv[2] }
    }
    END {
        print "| steps | torch loss (mean) | ddpipe loss (mean) | abs diff |"
        print "|------:|------:|------:|------:|"
        for (lo = 1; lo <= n; lo += 20) {
            hi = lo + 19 > n ? n : lo + 19
            t = d = 0
            for (k = lo; k <= hi; k++) { t += loss[1, k]; d += loss[2, k] }
            t /= hi - lo + 1; d /= hi - lo + 1
            printf "| %d-%d | %.4f | %.4f | %.4f |\n", lo, hi, t, d, (t > d ? t - d : d - t)
        }
        f = loss[1, 1] - loss[2, 1]
        printf "first step: torch %.7f, ddpipe %.7f, |diff| %.2g\n", loss[1, 1], loss[2, 1],
               (f < 0 ? -f : f)
        printf "test top-1 (first %s t10k): torch %.4f, ddpipe %.4f\n", v[1, "test"],
               v[1, "top1"], v[2, "top1"]
        printf "train img/s (steps 2..%d): torch %.1f, ddpipe %.1f, ratio %.2fx\n", n,
               v[1, "img/s"], v[2, "img/s"], v[2, "img/s"] / v[1, "img/s"]
    }' "$dir/torch.txt" "$dir/ddpipe.txt"

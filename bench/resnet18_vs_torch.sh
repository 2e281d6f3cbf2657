#!/bin/sh
# ResNet-18 on CPU, ddpipe vs PyTorch with the same thread count, batch and
# 224x224 input, in one run, against every PyTorch peer (bench/peers.sh:
# Debian's 1.13 and the 2.15 of bench/setup-peers.sh): ddpipe and the peers
# are interleaved ROUNDS times so a noisy machine hurts all alike. Prints,
# per peer and layout, the ratio of the best iteration, of the means, and of
# process CPU time per image, then one line "vs torch 1.13: 1.52x  vs torch
# 2.15: 1.31x": ddpipe's mean img/s over each peer's best layout's.
#   bench/resnet18_vs_torch.sh eval|train [BUILD_DIR]   (default: build-bench, Release)
#   THREADS=2 BATCH=32 ITERS=6 ROUNDS=2 bench/resnet18_vs_torch.sh eval
#   PRECISION=fp32     PyTorch fp32 in both layouts, NCHW (its default) and
#                      channels_last (LAYOUTS="nchw cl"; LAYOUTS=nchw for one)
#   PRECISION=fp32-cl  PyTorch fp32 channels_last only
#   PRECISION=bf16     ddpipe --precision bf16 vs PyTorch autocast bf16 +
#                      channels_last, compute only (the CPU's flags are printed)
#   PEERS="1.13 2.15" (default; PEERS=1.13 for one), or PY=python alone: bench/peers.sh
#   eval:  bench/eval_resnet18  (model_forward_u8)          vs bench/eval_resnet18_torch.py
#   train: bench/train_resnet18 (model_train_step_u8 + SGD) vs bench/train_resnet18_torch.py
set -eu

cd "$(dirname "$0")/.."
. bench/peers.sh
MODE=${1:?usage: bench/resnet18_vs_torch.sh eval|train [BUILD_DIR]}
BUILD=${2:-build-bench}
case "$MODE" in
    eval) PROG=eval_resnet18; WHAT="eval"; ITERS=${ITERS:-6} ;;
    train) PROG=train_resnet18; WHAT="train step"; ITERS=${ITERS:-3} ;;
    *) echo "bench/resnet18_vs_torch.sh: mode is eval or train" >&2; exit 2 ;;
esac
THREADS=${THREADS:-2}
BATCH=${BATCH:-32}
ROUNDS=${ROUNDS:-2}
PRECISION=${PRECISION:-fp32}
case "$PRECISION" in
    fp32) PFLAG=""; LAYOUTS=${LAYOUTS:-nchw cl} ;;
    fp32-cl) PFLAG=""; LAYOUTS=cl ;;
    bf16) PFLAG="--bf16"; LAYOUTS=cl ;;   # PyTorch autocast bf16 in channels_last
    *) echo "bench/resnet18_vs_torch.sh: PRECISION is fp32, fp32-cl or bf16" >&2; exit 2 ;;
esac
for l in $LAYOUTS; do
    case "$l" in nchw|cl) ;; *) echo "bench/resnet18_vs_torch.sh: LAYOUTS: nchw, cl" >&2; exit 2 ;; esac
done
peers_init "$(pwd)"

if [ ! -x "$BUILD/bench/$PROG" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target "$PROG" -j2 >/dev/null
fi

echo "ResNet-18 $WHAT, batch $BATCH, ${THREADS} threads, $ITERS timed iterations x $ROUNDS rounds, $PRECISION"
echo "cpu flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
peers_describe
out=$(mktemp)
trap 'rm -f "$out"' EXIT
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    "$BUILD/bench/$PROG" --batch "$BATCH" --threads "$THREADS" --iters "$ITERS" $PFLAG | tee -a "$out"
    for p in $PEER_LABELS; do
        for l in $LAYOUTS; do
            TFLAG=""
            [ "$l" = cl ] && TFLAG="--channels-last"
            "$(peer_py "$p")" "bench/${PROG}_torch.py" --batch "$BATCH" --threads "$THREADS" \
                --iters "$ITERS" $PFLAG $TFLAG | sed "s/^torch /torch peer=$p layout=$l /" |
                tee -a "$out"
        done
    done
    r=$((r + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v peers="$PEER_LABELS" -v layouts="$LAYOUTS" '
    { delete v; for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    /^ddpipe/ { if (v["best_img/s"] > db) db = v["best_img/s"]; dm += v["img/s"]; dn++
                dc += v["cpu_ms/img"] }
    /^torch peer=/ { k = v["peer"] SUBSEP v["layout"]
                if (v["best_img/s"] > tb[k]) tb[k] = v["best_img/s"]; tm[k] += v["img/s"]; tn[k]++
                tc[k] += v["cpu_ms/img"] }
    END {
        np = split(peers, P, " "); nl = split(layouts, L, " ")
        name["nchw"] = "NCHW"; name["cl"] = "channels_last"
        dm /= dn; dc /= dn
        printf "\n| side | layout | best img/s | mean img/s | CPU ms/img | ddpipe / side: best | mean | CPU |\n"
        printf "|---|---|---:|---:|---:|---:|---:|---:|\n"
        printf "| ddpipe | | %.2f | %.2f | %.1f | | | |\n", db, dm, dc
        for (i = 1; i <= np; i++) {
            bm[i] = 0
            for (j = 1; j <= nl; j++) {
                k = P[i] SUBSEP L[j]
                if (!tn[k]) continue
                m = tm[k] / tn[k]; c = tc[k] / tn[k]
                printf "| torch %s | %s | %.2f | %.2f | %.1f | %.2fx | %.2fx | %.2fx |\n", P[i],
                       name[L[j]], tb[k], m, c, db / tb[k], dm / m, (c > 0 && dc > 0) ? c / dc : 0
                if (m > bm[i]) { bm[i] = m; bl[i] = L[j] }
            }
        }
        printf "\n"
        line = ""
        for (i = 1; i <= np; i++) {
            if (!bm[i]) continue
            printf "vs torch %s: best layout %s, %.2f img/s; ddpipe mean / that: %.2fx\n", P[i],
                   name[bl[i]], bm[i], dm / bm[i]
            line = line sprintf("%svs torch %s: %.2fx", line == "" ? "" : "  ", P[i], dm / bm[i])
        }
        print line
    }' "$out"

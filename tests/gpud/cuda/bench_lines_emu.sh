#!/bin/sh
# bench_cuda_lines_emu: the lines scripts/gpu-check.sh reads from
# bench/cuda_resnet18, from the same program built on the kernel emulator
# (cuda_resnet18_emu; ResNet-18 at batch 2 of 32x32, one step): a parsing
# pattern that no longer matches what the program prints fails here, not
# in a device run. Each check greps with gpu-check's own pattern:
#   - the bench line ("^ddpipe-cuda resnet18 " with img/s= and precision=);
#   - with DDPIPE_CUDNN_TUNE=1 and DDPIPE_CUDNN_PLANS (tuned_step): the
#     summary "cuda conv tune: " and each shape's "cuda conv tune <layer>",
#     and the plans file written;
#   - with DDPIPE_CUDA_PROFILE=1 (profile_step): "cuda profile graph" and
#     the engines' "cuda conv " lines;
#   - the backend's closing line as gpu-e2e.sh greps it;
#   - train --segments 4 (gpu-probe): its segments= flushes_per_step= fields.
#   bench_lines_emu.sh CUDA_RESNET18_EMU
set -u
B=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }
run() {   # log what precision [env...]
    log=$1 what=$2 prec=$3
    shift 3
    env "$@" "$B" "$what" --batch 2 --size 32 --iters 1 --warmup 0 --precision "$prec" \
        > "$T/$log" 2>&1 || no "cuda_resnet18_emu $what $prec ($*): exit $?: $(tail -n 2 "$T/$log")"
}
# one run each for train and eval with both variables: the tuning happens
# at plan time, the profile over the passes after it (gpu-check runs them
# apart, for their figures)
for what in train eval; do
    run $what "$what" bf16 DDPIPE_CUDNN_TUNE=1 DDPIPE_CUDNN_TUNE_MAX=2 \
        DDPIPE_CUDNN_PLANS="$T/plans-$what.txt" DDPIPE_CUDA_PROFILE=1
    grep '^ddpipe-cuda resnet18 ' "$T/$what" | tail -n 1 | grep -q "img/s=.*precision=bf16" ||
        no "$what bf16: no bench line"
    grep -q 'cuda conv tune: ' "$T/$what" || no "$what bf16 tuned: no 'cuda conv tune: ' line"
    grep -q 'cuda conv tune [a-z0-9]' "$T/$what" || no "$what bf16 tuned: no shape lines"
    grep -q '^plan ' "$T/plans-$what.txt" 2>/dev/null || no "$what bf16 tuned: no plans file"
    grep -q 'cuda profile graph' "$T/$what" || no "$what bf16: no 'cuda profile graph' line"
    grep 'cuda profile graph' "$T/$what" | grep -q '; between ops fwd [0-9.]* bwd' ||
        no "$what bf16: the profile line has no 'between ops' interval"
    grep -q 'cuda conv ' "$T/$what" || no "$what bf16: no 'cuda conv ' engine lines"
    grep -h -o -E "cuda backend: [0-9]+ cuDNN graph plans.*" "$T/$what" |
        grep -q "runtime-compiled" || no "$what bf16: no closing plans line"
done
# --segments (gpu-probe's segments-train): a stand-in grad queue, the pass
# recorded at the second step in segments and replayed at the third; 62
# gradients, a flush every 16: 3 a step, each step alike (a queue whose
# flushes move from step to step would be recorded again and again)
"$B" train --batch 2 --size 32 --iters 2 --warmup 1 --precision bf16 --segments 4 \
    > "$T/seg" 2>&1 || no "cuda_resnet18_emu train --segments 4: exit $?: $(tail -n 2 "$T/seg")"
grep '^ddpipe-cuda resnet18 train ' "$T/seg" | grep -q 'segments=4 flushes_per_step=3\.0' ||
    no "train --segments 4: not 'segments=4 flushes_per_step=3.0' in $(grep '^ddpipe-cuda' "$T/seg")"
[ "$fail" -eq 0 ] && echo "bench_cuda_lines_emu: every line gpu-check reads is there"
exit "$fail"

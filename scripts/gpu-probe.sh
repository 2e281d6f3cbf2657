#!/bin/sh
# The short device call after a gpu-check: where ResNet-18's bf16 batch goes,
# in about four minutes, from the same bundle (docs/CUDA.md "Probe"):
#   scripts/gpu-probe.sh --bundle FILE [--out DIR] [--py PYTHON]
# - eval and train, batch 256, bf16, with DDPIPE_CUDA_PROFILE=1: the per-op
#   device profile (the device's time between ops apart) and the input line
#   (host copy, upload, normalise); with DDPIPE_TRAIN_PROFILE=1 too, the
#   host's time queueing each op kind ("train profile" lines);
# - their img/s, with 1 input copy thread (DDPIPE_CUDA_COPY_THREADS: the
#   input path's A/B), eval with the stem in its plain form
#   (DDPIPE_CUDA_S2D=0), op by op without CUDA graphs (DDPIPE_CUDA_GRAPHS=0),
#   training recorded in 8 segments (bench --segments: NCCL's buckets' cuts),
#   eval with each batch in turn instead of the next one staged while one
#   runs (DDPIPE_EVAL_OVERLAP=0), the same at gpud's micro-batch 16,
#   training in turn (DDPIPE_TRAIN_OVERLAP=0), training without the
#   forward's fusions (DDPIPE_TRAIN_FUSE=0), and PyTorch's channels_last +
#   autocast bf16, all in the same run;
# - ResNet-50's training step: its profile, its rate fused and unfused and
#   on engines chosen by timing (DDPIPE_CUDNN_TUNE=1), PyTorch's with and
#   without deterministic cuDNN; PyTorch's ResNet-18 step under torch.compile;
# - gpud_cuda_fused and gpud_cuda_bf16, verbose (plan counts, cuDNN's
#   fallbacks, bf16 against the ref backend);
# - each kernel's device time over one eval and one training step of
#   ResNet-18 and one of ResNet-50 (Nsight Compute, where the machine lets
#   it read the GPU), the 15 longest of each.
# Every result line goes to DIR/probe.txt, the logs into DIR/logs.tar.gz
# (a device call returns 8 files). Each step is bounded (PROBE_STEP_S, 100),
# and no step starts after PROBE_BUDGET seconds (300).
set -u
cd "$(dirname "$0")/.."
BUNDLE= OUT=probe PY=${PY:-python3}
while [ $# -gt 0 ]; do
    case "$1" in
        --bundle) BUNDLE=$2; shift ;;
        --out) OUT=$2; shift ;;
        --py) PY=$2; shift ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "gpu-probe: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$BUNDLE" ] || { echo "gpu-probe: --bundle FILE (scripts/gpu-bundle.sh)" >&2; exit 2; }
. scripts/gpu-bundle-env.sh
bundle_env "$BUNDLE" || exit 2
mkdir -p "$OUT/logs"
R=$OUT/probe.txt
: > "$R"
S=${PROBE_STEP_S:-100}
B=$BUILD/bench/cuda_resnet18

# The whole probe's budget (PROBE_BUDGET seconds, default 300): a step that
# would start past it is not run (said in probe.txt), so the call returns
# with the files whatever the machine's speed
PB=${PROBE_BUDGET:-300}
T0=$(date +%s)
# time_left NAME: 0 while the budget lasts; else says NAME was not run, 1
time_left() {
    [ $(($(date +%s) - T0)) -lt "$PB" ] && return 0
    echo "$1: not run: probe budget ${PB} s spent (PROBE_BUDGET)" >> "$R"
    return 1
}

# run NAME CMD...: bounded, its log kept, its result lines in probe.txt
run() {
    name=$1; shift
    time_left "$name" || return 0
    timeout "$S" "$@" > "$OUT/logs/$name.log" 2>&1
    rc=$?
    grep -E '^(ddpipe-cuda|torch) |cuda profile|train profile|cuda conv tune: |cuda backend: [0-9]' \
        "$OUT/logs/$name.log" |
        sed "s/^/$name: /" >> "$R"
    [ $rc -eq 0 ] || echo "$name: exit $rc: $(tail -n 2 "$OUT/logs/$name.log" | tr '\n' ' ')" >> "$R"
}

for what in eval train; do
    run "profile-$what" env DDPIPE_CUDA_PROFILE=1 DDPIPE_TRAIN_PROFILE=1 "$B" "$what" \
        --batch 256 --iters 3 --precision bf16
done
# ResNet-50's bf16 training step (0.64x PyTorch's on 2026-11-30): where its
# time goes, and its rate with and without the forward's fusions (its
# bottleneck blocks end in BatchNorm + add + ReLU on 4x wider activations)
run "profile-r50-train" env DDPIPE_CUDA_PROFILE=1 "$B" train --arch resnet50 --batch 256 \
    --iters 3 --precision bf16
run "r50-train" "$B" train --arch resnet50 --batch 256 --iters 5 --precision bf16
run "r50-unfused-train" env DDPIPE_TRAIN_FUSE=0 "$B" train --arch resnet50 --batch 256 \
    --iters 5 --precision bf16
for what in eval train; do
    run "default-$what" "$B" "$what" --batch 256 --iters 5 --precision bf16
    run "copy1-$what" env DDPIPE_CUDA_COPY_THREADS=1 "$B" "$what" --batch 256 --iters 5 --precision bf16
done
run "s2d0-eval" env DDPIPE_CUDA_S2D=0 "$B" eval --batch 256 --iters 5 --precision bf16
# op by op instead of a recorded pass (what the recording saves), against
# default-*; and the pass recorded in 8 segments with the host's marks
# between them, as a multi-rank job's buckets cut it (bench --segments: a
# stand-in queue that sums nothing), against default-train and graphs0-train
for what in eval train; do
    run "graphs0-$what" env DDPIPE_CUDA_GRAPHS=0 "$B" "$what" --batch 256 --iters 5 --precision bf16
done
run "segments8-train" "$B" train --batch 256 --iters 5 --precision bf16 --segments 8
# eval in turn (DDPIPE_EVAL_OVERLAP=0), each batch written, run and read
# before the next, against default-eval (the next batch staged while one
# runs, as gpud's eval job); and at gpud's default micro-batch (16: 16
# forwards a batch), overlapped and in turn
run "inturn-eval" env DDPIPE_EVAL_OVERLAP=0 "$B" eval --batch 256 --iters 5 --precision bf16
run "mb16-eval" "$B" eval --batch 256 --micro-batch 16 --iters 5 --precision bf16
run "mb16-inturn-eval" env DDPIPE_EVAL_OVERLAP=0 "$B" eval --batch 256 --micro-batch 16 \
    --iters 5 --precision bf16
# training in turn (DDPIPE_TRAIN_OVERLAP=0: a step's batch written after the
# step before ended) against default-train (staged while it runs)
run "inturn-train" env DDPIPE_TRAIN_OVERLAP=0 "$B" train --batch 256 --iters 5 --precision bf16
# the training forward's fusions off (DDPIPE_TRAIN_FUSE=0: BatchNorm, add and
# ReLU as three passes) against default-train
run "unfused-train" env DDPIPE_TRAIN_FUSE=0 "$B" train --batch 256 --iters 5 --precision bf16
for what in eval train; do
    run "torch-$what" env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py "$what" \
        --batch 256 --iters 5 --mode cl-bf16
done
# ResNet-50's peer (cl-bf16, and under ddpipe's rule: deterministic cuDNN)
# and ddpipe's ResNet-50 step on engines chosen by timing: whether its gap
# is the engines heuristics give (each its own step's PROBE_STEP_S bound)
run "torch-r50-train" env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py train \
    --arch resnet50 --batch 256 --iters 5 --mode cl-bf16
run "torch-r50-det-train" env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py train \
    --arch resnet50 --batch 256 --iters 5 --mode cl-bf16-det
run "r50-tuned-train" env DDPIPE_CUDNN_TUNE=1 DDPIPE_CUDNN_TUNE_MAX=4 DDPIPE_CUDNN_TUNE_SECONDS=1 \
    "$B" train --arch resnet50 --batch 256 --iters 5 --precision bf16
# PyTorch's training step under torch.compile (its compilation in compile_s)
run "torch-compile-train" env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py train \
    --batch 256 --iters 5 --mode cl-bf16-compile
time_left ctest && (cd "$BUILD" && timeout "$S" ctest -R '^gpud_cuda_(fused|bf16)$' -V) > "$OUT/logs/ctest.log" 2>&1
grep -E 'plans:|graph vs|CHECK|vs ref bf16|space-to-depth|top-1 equal|Passed|Failed' \
    "$OUT/logs/ctest.log" 2>/dev/null | sed 's/^[0-9]*: //; s/^/ctest: /' | head -n 60 >> "$R"
# Nsight Compute (last: the slowest): one warm-up and one timed step, each kernel's duration
if command -v ncu > /dev/null 2>&1; then
    # (last, ResNet-50's training step: where its 0.64x goes, kernel by kernel)
    for what in eval train r50-train; do
        time_left "ncu-$what" || continue
        case $what in
            r50-train) args="train --arch resnet50" ;;
            *) args=$what ;;
        esac
        # shellcheck disable=SC2086 # args is two words or one
        # --cache-control none: kernels find L2 as the step leaves it (ncu's
        # default flushes it before each, which inflated the memory-bound
        # passes in the 2026-11-30 lists)
        timeout "$S" ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
            --print-units base "$B" $args --batch 256 --iters 1 --warmup 1 --precision bf16 \
            > "$OUT/logs/ncu-$what.csv" 2> "$OUT/logs/ncu-$what.err"
        "$PY" - "$OUT/logs/ncu-$what.csv" "$what" >> "$R" 2>&1 <<'PYX'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
if not rows:
    print("ncu-%s: no kernel rows (see ncu-%s.err)" % (sys.argv[2], sys.argv[2])); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    try: v = float(r[vi].replace(",", ""))
    except ValueError: continue
    tot[r[ki][:90]] += v; cnt[r[ki][:90]] += 1
s = sum(tot.values())
print("ncu-%s: %d kernels, %.3f ms in all (two steps)" % (sys.argv[2], sum(cnt.values()), s / 1e6))
for k, v in tot.most_common(25):
    print("ncu-%s: %8.3f ms %4d x %s" % (sys.argv[2], v / 1e6, cnt[k], k))
PYX
    done
else
    echo "ncu: not on PATH" >> "$R"
fi
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$OUT/logs"
cat "$R"

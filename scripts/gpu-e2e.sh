#!/bin/sh
# End-to-end jobs on the cuda backend against the cpu backend, all four
# daemons over real sockets (run by scripts/gpu-check.sh on a GPU machine):
#   scripts/gpu-e2e.sh BIN FMNIST OUT eval|train|bitwise|nccl|bf16|jpeg
# eval:  the demo's WideResNet on the 10,000 Fashion-MNIST test images,
#        --device cuda with 1 and 2 workers and --device cpu with 2. The two
#        cuda runs must give identical predictions.csv (deterministic cuDNN
#        algorithms, any worker count); cuda vs cpu may differ only where
#        fp32 sums in another order flip a near tie: at most 5 of 10,000 top-1.
#        The same in bf16 (--precision bf16: 1 and 2 workers identical), and
#        bf16 on tuned engines: a 1-worker run with DDPIPE_CUDNN_TUNE=1 writes
#        a plans file, a 2-worker run reading it gives the same predictions
#        (docs/CUDA.md "Tuned engines").
# train: WideResNet 8,16,32,64 from the seeded init, 1 epoch of the first
#        4,096 test images, 2 workers, then validated: cuda vs cpu epoch
#        train top-1 within 2 points (the same job; fp32 sums in another
#        order over 64 steps drift apart, so not bitwise), and the cuda run
#        ends with model.safetensors.
# nccl:  the train job's first 1,024 images with 2 gpuds on the machine's
#        one GPU summing over NCCL (NCCL_MULTI_RANK_GPU_ENABLE=1,
#        NCCL_NVLS_ENABLE=0; NCCL >= 2.30.3 allows two ranks on one device)
#        against the same job on the ZeroMQ ring (DDPIPE_NCCL=0): both logs
#        say which path summed, and the weights agree within 1e-4 (fp32
#        sums in another order). Exit 77 when NCCL is older (not run).
# bitwise: bitwise training (--chunk 16, --global-batch-size 96,
#        --sync-bn; docs/TRAINING.md "Bitwise training") of WideResNet
#        8,16,32,64 on t10k's first 384 images, 1 epoch (4 steps), with 1, 2
#        and 3 gpuds on the machine's GPU (over the ZeroMQ ring: the mode
#        never uses NCCL), and with 3 gpuds making the exact sums on the
#        host (DDPIPE_CUDA_XSUM=0; each job's seconds printed):
#        model.safetensors the same bytes for every run. What
#        the kernel emulator cannot say: that cuDNN's deterministic engines,
#        picked by its heuristics in each process, give every chunk the same
#        bits in separate processes.
# bf16:  the demo's training job (scripts/demo_train.sh: WideResNet
#        8,16,32,64, 12,000 training images an epoch, 2 workers, batch 64,
#        SGD 0.05/0.9) run its 10 epochs under a cosine schedule (--lr-schedule
#        cosine --t-max 10, no early stopping) on $E2E_DEVICE (cuda) in fp32
#        and in bf16, once per seed of $E2E_COURSE_SEEDS (default "0 1"):
#        bf16's final val top-1, averaged over the seeds, reaches fp32's
#        within 0.5 points (issue 30's bar). Why not demo_train.sh's own
#        run: at its constant lr the val top-1 swings 1-4 points from one
#        epoch to the next and its early stop (>= 0.85 twice) ends each run
#        at another epoch, so the two runs' last epochs differ by chance by
#        more than the bar (on a cpu, seed 0: fp32 ran 10 epochs to 0.835,
#        bf16 stopped at epoch 8 at 0.865; seed 2: 0.878 and 0.854). Annealed
#        to lr 0, a run's end is steady: on a cpu fp32 ended at 0.896 /
#        0.8985, bf16 at 0.8995 / 0.9055 (seeds 0 / 1). Without the training
#        set (a device call carries only t10k) t10k's first 8,000 images
#        train and its last 2,000 validate.
# jpeg:  end to end from files: $E2E_JPEGS (default 8192) synthetic 500x375
#        JPEGs (ddpipe-mkjpeg, q90, 8 parallel parts), ResNet-18 (random
#        init, exported by scripts/export_torchvision.py with $PY's
#        torchvision) through all four daemons, `ddpipe eval --device
#        $E2E_DEVICE (cuda) --precision bf16`, 1 worker, batch 256, loaderd on
#        every core; against bench/e2e_jpeg_torch.py (DataLoader, 16 PIL
#        workers, channels_last + AMP; python runs without LD_LIBRARY_PATH,
#        on its own stack). Prints the two bench lines gpu-check
#        keeps ("ddpipe-cuda resnet18 e2e-jpeg img/s=..." and "torch resnet18
#        e2e-jpeg img/s=...") and the ratio (issue 30's bar: >= 2x); fails
#        only when a side fails to run. With E2E_CUDNN_PLANS (a plans file
#        of the same shapes, docs/CUDA.md "Tuned engines") ddpipe's job runs
#        again on it (precision=bf16-plans, bf16-plans-steady). Then with
#        --wire jpeg --decode gpu (precision=bf16-decode-gpu, -steady: nvJPEG
#        and the resize on the device) and its predictions with 1 and 2
#        workers (PASS/FAIL line), batches of 32 against 64 (INFO), a
#        training epoch of those images with --decode gpu (PASS/FAIL), then on
#        the GPU's JPEG engines (DDPIPE_NVJPEG_BACKEND=hardware:
#        bf16-decode-gpu-hw); NOTRUN where gpud finds no nvJPEG.
#        ddpipe's figures are its own clock:
#        the whole job (the plan to the last result, summary.json
#        images_per_sec: gpud's start, the model's load and its cuDNN plans
#        in it) and the steady rate after the first result
#        (steady_images_per_sec, "precision=bf16-steady": comparable with
#        the peer's clock, which starts after its model and a warm-up
#        forward); both whole commands, each from its start to its exit
#        (precision=bf16-whole-command, mode=M-whole-command: the like-for-
#        like end to end, each side's start-up in it); then where the
#        start-up went (gpud's "ready in", its
#        first batch, the backend's plan times) and the loader alone on the
#        same files and threads (bench/loader_bench: the host's decode
#        ceiling, "precision=loader-only"). E2E_BATCH, E2E_TORCH_MODE
#        (amp|bf16|fp32), E2E_DEVICE=cpu check it anywhere.
# Prints the figures; exit 1 when a check fails.
set -eu
[ $# -eq 4 ] || { sed -n '2,76p' "$0"; exit 2; }
BIN=$1 FMNIST=$2 OUT=$3 WHAT=$4
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
DD="$BIN/ddpipe"

field() {   # field FILE KEY: a number from summary.json
    sed -n "s/^ *\"$2\": *\\([-0-9.e]*\\),*$/\\1/p" "$1" | head -n 1
}
last_top1() {   # last_top1 RUN PHASE: the top-1 of the last PHASE row of RUN/metrics.csv
    awk -F, -v p="$2" '$3 == p { v = $6 } END { print v }' "$1/metrics.csv"
}
mean_of() {   # mean_of FILE: the mean of its lines (empty: none)
    awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n }' "$1"
}
at_least() {   # at_least A B TOL: both present and A >= B - TOL
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { exit !(a != "" && b != "" && a >= b - t) }'
}
within() {   # within A B TOL: both present and |A - B| <= TOL
    awk -v a="$1" -v b="$2" -v t="$3" \
        'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= t) }'
}
top1_diff() {   # the rows of two predictions.csv whose top1 differs
    paste -d, "$1" "$2" | awk -F, 'NR > 1 && $4 != $13 {n++} END {print n + 0}'
}

case "$WHAT" in
eval)
    plans=$OUT/eval-cudnn-plans.txt
    rm -f "$plans"
    # name device workers precision tune: the tuning run writes the plans
    # file the run after it reads
    for run in "cuda-w1 cuda 1 fp32 0" "cuda-w2 cuda 2 fp32 0" "cpu-w2 cpu 2 fp32 0" \
               "bf16-w1 cuda 1 bf16 0" "bf16-w2 cuda 2 bf16 0" \
               "bf16-tune-w1 cuda 1 bf16 1" "bf16-plans-w2 cuda 2 bf16 0"; do
        set -- $run
        name=$1
        case $name in bf16-tune-*|bf16-plans-*) p=$plans ;; *) p= ;; esac
        # (the tuning run about exactness, not speed: 3 engines, 1 s a shape)
        DDPIPE_CUDNN_TUNE=$5 DDPIPE_CUDNN_TUNE_MAX=3 DDPIPE_CUDNN_TUNE_SECONDS=1 \
            DDPIPE_CUDNN_PLANS=$p "$DD" eval --data "idx:$FMNIST/t10k" \
            --model wideresnet --channels 16,32,64,128 --weights demo/wrn-fmnist.safetensors \
            --workers "$3" --batch-size 64 --precision "$4" --predictions topk --device "$2" \
            --out "$OUT/eval-$name" --overwrite --quiet
        echo "eval $name: top1 $(field "$OUT/eval-$name/summary.json" top1)" \
             "loss $(field "$OUT/eval-$name/summary.json" loss)" \
             "img/s $(field "$OUT/eval-$name/summary.json" images_per_sec)"
    done
    for pair in cuda-w1:cuda-w2 bf16-w1:bf16-w2 bf16-tune-w1:bf16-plans-w2; do
        if ! cmp -s "$OUT/eval-${pair%%:*}/predictions.csv" "$OUT/eval-${pair#*:}/predictions.csv"; then
            echo "FAIL: cuda predictions differ between ${pair%%:*} and ${pair#*:}"; exit 1
        fi
    done
    grep -q "cuDNN plans file .*convolution shapes' engines" "$OUT/eval-bf16-plans-w2/logs/"gpud*.log ||
        { echo "FAIL: the bf16 2-worker job did not read the plans file $plans"; exit 1; }
    d=$(top1_diff "$OUT/eval-cuda-w2/predictions.csv" "$OUT/eval-cpu-w2/predictions.csv")
    h=$(top1_diff "$OUT/eval-bf16-w2/predictions.csv" "$OUT/eval-cuda-w2/predictions.csv")
    n=$(($(wc -l < "$OUT/eval-cuda-w2/predictions.csv") - 1))
    echo "cuda 1 vs 2 workers: identical predictions.csv (fp32, bf16, bf16 on tuned engines);" \
         "cuda vs cpu: $d of $n top-1 differ; bf16 vs fp32: $h"
    [ "$d" -le 5 ] || { echo "FAIL: $d top-1 predictions differ between cuda and cpu"; exit 1; }
    ;;
train)
    for dev in cuda cpu; do
        "$DD" train --data "idx:$FMNIST/t10k" --limit 4096 --val "idx:$FMNIST/t10k" \
            --model wideresnet --channels 8,16,32,64 --workers 2 --batch-size 64 \
            --lr 0.05 --momentum 0.9 --epochs 1 --seed 0 --device "$dev" \
            --out "$OUT/train-$dev" --overwrite --quiet
        echo "train $dev: $(tail -n 1 "$OUT/train-$dev/metrics.csv")"
    done
    [ -s "$OUT/train-cuda/model.safetensors" ] || { echo "FAIL: no model.safetensors"; exit 1; }
    a=$(last_top1 "$OUT/train-cuda" train) b=$(last_top1 "$OUT/train-cpu" train)
    echo "epoch train top-1: cuda $a, cpu $b"
    within "$a" "$b" 0.02 || { echo "FAIL: train top-1 differs by more than 2 points"; exit 1; }
    ;;
bitwise)
    # 3h: W = 3 with the exact sums made on the host (DDPIPE_CUDA_XSUM=0),
    # the same bytes; its time beside 3's says what the device's sums save
    for w in 1 2 3 3h; do
        t0=$(date +%s.%N)
        env DDPIPE_CUDA_XSUM=$([ "$w" = 3h ] && echo 0 || echo 1) \
            "$DD" train --data "idx:$FMNIST/t10k" --limit 384 --model wideresnet \
            --channels 8,16,32,64 --workers "${w%h}" --global-batch-size 96 --chunk 16 --sync-bn \
            --lr 0.05 --momentum 0.9 --epochs 1 --seed 0 --device cuda \
            --out "$OUT/bitwise-w$w" --overwrite --quiet > "$OUT/bitwise-w$w.out" 2>&1 ||
            { tail -n 20 "$OUT/bitwise-w$w.out"; echo "FAIL: the W = $w bitwise job failed"; exit 1; }
        [ -s "$OUT/bitwise-w$w/model.safetensors" ] ||
            { echo "FAIL: W = $w: no model.safetensors"; exit 1; }
        echo "bitwise W = $w: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s the job"
    done
    for w in 2 3 3h; do
        cmp -s "$OUT/bitwise-w1/model.safetensors" "$OUT/bitwise-w$w/model.safetensors" ||
            { echo "FAIL: bitwise training: W = $w's model.safetensors differs from W = 1's"; exit 1; }
    done
    echo "bitwise training on cuda: W = 1, 2, 3 (and 3 with the host's sums) the same model.safetensors ($(sha256sum < "$OUT/bitwise-w1/model.safetensors" | cut -c1-16))"
    ;;
nccl)
    v=${NCCL_VERSION_CODE:-0}
    [ "$v" -ge 23003 ] || {
        echo "NOT RUN: NCCL ${NCCL_VERSION_CODE:-unknown} refuses two ranks on one GPU (needs >= 2.30.3: NCCL_VERSION_CODE 23003; scripts/gpu-nccl.sh brings one)"
        exit 77
    }
    for path in nccl ring; do
        if [ "$path" = nccl ]; then
            set -- env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0
        else
            set -- env DDPIPE_NCCL=0
        fi
        "$@" "$DD" train --data "idx:$FMNIST/t10k" --limit 1024 --model wideresnet \
            --channels 8,16,32,64 --workers 2 --batch-size 64 --lr 0.05 --momentum 0.9 \
            --epochs 1 --seed 0 --device cuda --out "$OUT/nccl-$path" --overwrite --verbose \
            > "$OUT/nccl-$path.out" 2>&1 ||
            { tail -n 20 "$OUT/nccl-$path.out"; echo "FAIL: the $path job failed"; exit 1; }
    done
    grep -q "NCCL communicator of 2 ranks" "$OUT"/nccl-nccl/logs/gpud*.log ||
        { echo "FAIL: the NCCL run's gpuds made no NCCL communicator"; exit 1; }
    # the pass recorded in segments, the buckets' NCCL calls between them
    # (docs/CUDA.md "NCCL's buckets and the recorded pass"): said, not judged
    grep -h "training pass recorded\|of the training pass failed" "$OUT"/nccl-nccl/logs/gpud*.log |
        sed 's/^/nccl job: /' | head -n 4
    if grep -q "NCCL communicator" "$OUT"/nccl-ring/logs/gpud*.log; then
        echo "FAIL: DDPIPE_NCCL=0 still made an NCCL communicator"; exit 1
    fi
    python3 - "$OUT/nccl-nccl/model.safetensors" "$OUT/nccl-ring/model.safetensors" <<'PY'
import json, struct, sys
def load(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n]); h.pop("__metadata__", None)
    out = {}
    for k, t in h.items():
        if t["dtype"] == "F32":
            a, b = t["data_offsets"]
            out[k] = struct.unpack("<%df" % ((b - a) // 4), raw[8 + n + a:8 + n + b])
    return out
x, y = load(sys.argv[1]), load(sys.argv[2])
assert x.keys() == y.keys(), "different tensors"
d = max((abs(p - q) / max(1.0, abs(q)), k) for k in x for p, q in zip(x[k], y[k]))
print("nccl vs ring: largest weight difference %.3g (%s)" % d)
sys.exit(0 if d[0] <= 1e-4 else 1)
PY
    ;;
bf16)
    train="idx:$FMNIST/train" val="idx:$FMNIST/t10k"
    if [ ! -e "$FMNIST/train-images-idx3-ubyte.gz" ] && [ ! -e "$FMNIST/train-images-idx3-ubyte" ]; then
        # only the test set at hand (a device call carries 64 MiB): its
        # first 8,000 images train, its last 2,000 validate
        python3 - "$FMNIST" "$OUT/split" <<'PY'
import gzip, os, struct, sys
src, out = sys.argv[1], sys.argv[2]
def read(name):
    p = os.path.join(src, name)
    return (gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read())
img, lab = read("t10k-images-idx3-ubyte"), read("t10k-labels-idx1-ubyte")
_, n, rows, cols = struct.unpack(">IIII", img[:16])
px = rows * cols
for name, a, b in (("train", 0, 8000), ("val", 8000, n)):
    with open("%s-%s-images-idx3-ubyte" % (out, name), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, b - a, rows, cols) + img[16 + a * px:16 + b * px])
    with open("%s-%s-labels-idx1-ubyte" % (out, name), "wb") as f:
        f.write(struct.pack(">II", 0x801, b - a) + lab[8 + a:8 + b])
PY
        train="idx:$OUT/split-train" val="idx:$OUT/split-val"
        echo "no training set at $FMNIST: the course trains on t10k's first 8,000 images, validates on its last 2,000"
    fi
    seeds=${E2E_COURSE_SEEDS:-0 1} dev=${E2E_DEVICE:-cuda}
    rm -f "$OUT/demo-fp32.final" "$OUT/demo-bf16.final"
    for seed in $seeds; do
        for prec in fp32 bf16; do
            run="$OUT/demo-$prec-$seed"
            "$DD" train --data "$train" --limit 12000 --val "$val" \
                --model wideresnet --channels 8,16,32,64 --workers 2 --batch-size 64 \
                --lr 0.05 --momentum 0.9 --epochs 10 --lr-schedule cosine --t-max 10 \
                --seed "$seed" --device "$dev" --precision "$prec" --out "$run" --overwrite --quiet
            echo "demo course $prec seed $seed: $(awk -F, '$3 == "val"' "$run/metrics.csv" | wc -l)" \
                 "epochs, val top-1 by epoch: $(awk -F, '$3 == "val" { printf "%s ", $6 }' \
                 "$run/metrics.csv")(final $(last_top1 "$run" val))"
            last_top1 "$run" val >> "$OUT/demo-$prec.final"
        done
    done
    a=$(mean_of "$OUT/demo-fp32.final") b=$(mean_of "$OUT/demo-bf16.final")
    rm -f "$OUT/demo-fp32.final" "$OUT/demo-bf16.final"
    echo "demo course final val top-1, mean over seeds $seeds: fp32 $a, bf16 $b (bar: bf16 reaches" \
         "fp32's within 0.5 points)"
    at_least "$b" "$a" 0.005 ||
        { echo "FAIL: bf16's val top-1 $b is more than 0.5 points under fp32's $a"; exit 1; }
    ;;
jpeg)
    n=${E2E_JPEGS:-8192} dev=${E2E_DEVICE:-cuda} py=${PY:-python3} b=${E2E_BATCH:-256}
    mode=${E2E_TORCH_MODE:-amp}
    data=$OUT/jpeg-500x375-$n
    if [ ! -d "$data" ]; then   # 8 generators at once, then one ImageFolder
        rm -rf "$data.parts"
        for i in 0 1 2 3 4 5 6 7; do
            "$BIN/ddpipe-mkjpeg" --synthetic $((n / 8)) "$data.parts/$i" --size 500x375 \
                --classes 4 --quality 90 --seed "$i" >/dev/null &
        done
        wait
        for part in "$data.parts"/*; do
            for cls in "$part"/*; do
                mkdir -p "$data.tmp/${cls##*/}"
                for f in "$cls"/*; do mv "$f" "$data.tmp/${cls##*/}/${part##*/}-${f##*/}"; done
            done
        done
        rm -rf "$data.parts"
        mv "$data.tmp" "$data"
    fi
    echo "data: $(find "$data" -type f | wc -l) JPEGs, $(du -sk "$data" | cut -f1) KiB"
    env -u LD_LIBRARY_PATH "$py" scripts/export_torchvision.py --pretrained-arch resnet18 "$OUT/resnet18-init.safetensors" >/dev/null ||
        { echo "FAIL: exporting ResNet-18's init weights with $py"; exit 1; }
    # the 4 folders as ImageNet's first 4 outputs (the torch side's ImageFolder labels)
    ls "$data" | awk '{ print $0, NR - 1 }' > "$OUT/jpeg-classes.txt"   # folder index
    # jpeg_job NAME CMD ARGS...: ddpipe CMD (eval, train) of ResNet-18 on
    # the JPEGs (the init weights, the folders' classes, $dev, bf16) into
    # $OUT/NAME, its output in $OUT/NAME.log, JPEG_ENV (VAR=VALUE, may be
    # empty) in its environment; the job's exit status
    jpeg_job() {
        name=$1 cmd=$2
        shift 2
        env ${JPEG_ENV:+"$JPEG_ENV"} "$DD" "$cmd" --data "$data" --model resnet18 \
            --weights "$OUT/resnet18-init.safetensors" --classes "$OUT/jpeg-classes.txt" \
            --device "$dev" --precision bf16 "$@" --out "$OUT/$name" --overwrite --quiet \
            > "$OUT/$name.log" 2>&1
    }
    # jpeg_lines NAME PRECISION: the job's two bench lines, its whole job
    # and its steady rate after the first result (summary.json)
    jpeg_lines() {
        s=$OUT/$1/summary.json
        echo "ddpipe-cuda resnet18 e2e-jpeg img/s=$(field "$s" images_per_sec) images=$n workers=1 batch=$b precision=$2 device=$dev wall_s=$(field "$s" wall_seconds)"
        v=$(field "$s" steady_images_per_sec)
        echo "ddpipe-cuda resnet18 e2e-jpeg img/s=${v:-0} images=$n workers=1 batch=$b precision=$2-steady device=$dev first_result_s=$(field "$s" first_result_seconds)"
    }
    t0=$(date +%s.%N)
    jpeg_job jpeg-ddpipe eval --workers 1 --batch-size "$b" --loader-threads "$(nproc)" ||
        { echo "FAIL: ddpipe eval: $(tail -n 3 "$OUT/jpeg-ddpipe.log")"; exit 1; }
    t1=$(date +%s.%N)
    d=$(field "$OUT/jpeg-ddpipe/summary.json" images_per_sec)
    ds=$(field "$OUT/jpeg-ddpipe/summary.json" steady_images_per_sec)
    t=$(env -u LD_LIBRARY_PATH "$py" bench/e2e_jpeg_torch.py --data "$data" --workers 16 --batch "$b" --mode "$mode" | tail -n 1)
    t2=$(date +%s.%N)
    case "$t" in "torch resnet18 e2e-jpeg img/s="*) ;; *) echo "FAIL: the PyTorch side: $t"; exit 1 ;; esac
    jpeg_lines jpeg-ddpipe bf16
    echo "$t"
    # where the start-up went: one line each from gpud's log
    grep -h -o -E "ready in [0-9.]+s|first batch: .*|cuda backend: [0-9]+ cuDNN graph plans.*" \
        "$OUT/jpeg-ddpipe/logs/"gpud*.log 2>/dev/null | sed 's/^/e2e-jpeg gpud: /' || true
    # the same job on the engines a tuning run chose and its serialized
    # plans (E2E_CUDNN_PLANS: gpu-check's tuned bf16 eval, the same shapes):
    # the start-up without kernel compilation, and tuned engines' steady rate
    if [ -n "${E2E_CUDNN_PLANS:-}" ] && [ -s "$E2E_CUDNN_PLANS" ]; then
        JPEG_ENV=DDPIPE_CUDNN_PLANS=$E2E_CUDNN_PLANS jpeg_job jpeg-ddpipe-plans eval \
            --workers 1 --batch-size "$b" --loader-threads "$(nproc)" ||
            { echo "FAIL: ddpipe eval with the plans file: $(tail -n 3 "$OUT/jpeg-ddpipe-plans.log")"; exit 1; }
        jpeg_lines jpeg-ddpipe-plans bf16-plans
        grep -h -o -E "first batch: .*|cuda backend: [0-9]+ cuDNN graph plans.*" \
            "$OUT/jpeg-ddpipe-plans/logs/"gpud*.log 2>/dev/null | sed 's/^/e2e-jpeg gpud (plans file): /' || true
    fi
    # --decode gpu (docs/CUDA.md "Decoding on the GPU"): the files go to
    # gpud (--wire jpeg), nvJPEG decodes them and the resize runs on the
    # device; E2E_DECODE_GPU=0 skips it. Without an nvJPEG gpud can load
    # (DDPIPE_NVJPEG_LIB, the library path, /opt/nvjpeg-13) it is NOT RUN.
    if [ "${E2E_DECODE_GPU:-1}" != 0 ]; then
        if jpeg_job jpeg-ddpipe-gpudec eval --workers 1 --batch-size "$b" --wire jpeg \
            --decode gpu --loader-threads "$(nproc)"; then
            jpeg_lines jpeg-ddpipe-gpudec bf16-decode-gpu
            grep -h -o -E "decode gpu: .*|first batch: .*" "$OUT/jpeg-ddpipe-gpudec/logs/"gpud*.log 2>/dev/null |
                sed 's/^/e2e-jpeg gpud (--decode gpu): /' || true
            # the same predictions from 1 and 2 workers (each decodes its own batches)
            k=$(( n < 1024 ? n : 1024 ))
            for w in 1 2; do
                jpeg_job "jpeg-gpudec-w$w" eval --workers "$w" --batch-size 64 --limit "$k" \
                    --wire jpeg --decode gpu --predictions all ||
                    { echo "FAIL: --decode gpu with $w workers: $(tail -n 3 "$OUT/jpeg-gpudec-w$w.log")"; exit 1; }
            done
            if cmp -s "$OUT/jpeg-gpudec-w1/predictions.csv" "$OUT/jpeg-gpudec-w2/predictions.csv"; then
                echo "PASS: --decode gpu: predictions.csv of $k images equal with 1 and 2 workers"
            else
                echo "FAIL: --decode gpu: predictions.csv of $k images differs between 1 and 2 workers"; exit 1
            fi
            # batches of 32 against 64: nvJPEG decodes batches of 50 or fewer
            # with another Huffman path; whether their pixels agree (a
            # sample's result then does not depend on --batch-size either)
            jpeg_job jpeg-gpudec-b32 eval --workers 1 --batch-size 32 --limit "$k" --wire jpeg \
                --decode gpu --predictions all &&
                if cmp -s "$OUT/jpeg-gpudec-w1/predictions.csv" "$OUT/jpeg-gpudec-b32/predictions.csv"; then
                    echo "INFO: --decode gpu: batches of 32 and 64 give the same predictions.csv"
                else
                    echo "INFO: --decode gpu: batches of 32 and 64 give different predictions.csv (nvJPEG's two paths differ)"
                fi
            # training from the files: random crops and flips on the device
            if jpeg_job jpeg-gpudec-train train --limit "$k" --augment crop-flip --crop 224 \
                --workers 1 --batch-size 64 --epochs 1 --lr 0.01 --wire jpeg --decode gpu; then
                echo "PASS: --decode gpu training: $(tail -n 1 "$OUT/jpeg-gpudec-train.log")"
            else
                echo "FAIL: --decode gpu training: $(tail -n 3 "$OUT/jpeg-gpudec-train.log")"; exit 1
            fi
            # the GPU's JPEG engines (DDPIPE_NVJPEG_BACKEND=hardware), where it has them
            if JPEG_ENV=DDPIPE_NVJPEG_BACKEND=hardware jpeg_job jpeg-ddpipe-gpudec-hw eval \
                --workers 1 --batch-size "$b" --wire jpeg --decode gpu --loader-threads "$(nproc)"; then
                jpeg_lines jpeg-ddpipe-gpudec-hw bf16-decode-gpu-hw
                grep -h -o -E "decode gpu: .*" "$OUT/jpeg-ddpipe-gpudec-hw/logs/"gpud*.log 2>/dev/null |
                    sed 's/^/e2e-jpeg gpud (--decode gpu): /' || true
            else
                echo "INFO: --decode gpu with DDPIPE_NVJPEG_BACKEND=hardware did not run: $(grep -h -o "DDPIPE_NVJPEG_BACKEND=hardware: [^;]*" "$OUT/jpeg-ddpipe-gpudec-hw/logs/"gpud*.log 2>/dev/null | head -n 1)"
            fi
        elif grep -q "cannot load nvJPEG" "$OUT/jpeg-ddpipe-gpudec/logs/"gpud*.log 2>/dev/null; then
            echo "NOTRUN: --decode gpu: $(grep -h -o "cannot load nvJPEG ([^)]*)" "$OUT/jpeg-ddpipe-gpudec/logs/"gpud*.log | head -n 1)"
        else
            echo "FAIL: ddpipe eval --decode gpu: $(tail -n 3 "$OUT/jpeg-ddpipe-gpudec.log")"; exit 1
        fi
    fi
    # the host's decode ceiling: ddpipe's loader alone, same files and threads
    if [ -x "$BIN/loader_bench" ]; then
        l=$("$BIN/loader_bench" "$data" --threads "$(nproc)" --epochs 1 --resize 256 --crop 224 2>&1 |
            sed -n 's/.*: \([0-9.]*\) img\/s.*/\1/p' | tail -n 1)
        if [ -n "$l" ]; then
            echo "ddpipe-cuda resnet18 e2e-jpeg img/s=$l images=$n workers=0 batch=$b precision=loader-only device=cpu threads=$(nproc)"
        fi
    fi
    # whole processes, each from its command to its exit: ddpipe's four
    # daemons' start and end; python's imports, model, cuDNN tuning
    # (t2 - t1 is the python command alone: its bench line came back at t2)
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v n="$n" 'BEGIN {
        printf "e2e-jpeg whole commands: ddpipe eval %.2f s (%.1f img/s), python %.2f s (%.1f img/s)\n", b - a, n / (b - a), c - b, n / (c - b) }'
    # the two whole commands as bench lines, so that the record has their
    # ratio: the like-for-like end to end (each side's start-up in it)
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v n="$n" -v bt="$b" -v dev="$dev" -v mode="$mode" 'BEGIN {
        printf "ddpipe-cuda resnet18 e2e-jpeg img/s=%.1f images=%d workers=1 batch=%d precision=bf16-whole-command device=%s\n", n / (b - a), n, bt, dev
        printf "torch resnet18 e2e-jpeg img/s=%.1f images=%d workers=16 batch=%d mode=%s-whole-command device=%s\n", n / (c - b), n, bt, mode, dev }'
    awk -v a="$d" -v m="${ds:-0}" -v t="$t" -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN { sub(/.*img\/s=/, "", t); sub(/ .*/, "", t);
        printf "end to end from JPEG: ddpipe / PyTorch DataLoader + channels_last + AMP = %.2fx whole commands, %.2fx steady, %.2fx ddpipe'"'"'s whole job against the peer after its warm-up (bar >= 2x)\n", (t2 - t1) / (t1 - t0), m / t, a / t }'
    ;;
*) echo "gpu-e2e: eval, train, bitwise, nccl, bf16 or jpeg, not '$WHAT'" >&2; exit 2 ;;
esac

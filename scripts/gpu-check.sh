#!/bin/sh
# Every GPU check of the cuda backend (issue 6, docs/CUDA.md), from a clean
# clone on a machine with an NVIDIA GPU, offline:
#   scripts/gpu-check.sh [--debs DIR | --bundle FILE] [--build DIR] [--out DIR]
#                        [--quick] [--no-cpu-suite] [--fmnist DIR]
#     --debs DIR     install missing Debian build deps from the .debs in DIR
#                    (scripts/install-deps.sh --offline DIR) before building
#     --bundle FILE  no build here: unpack FILE (scripts/gpu-bundle.sh, made
#                    where the deps are) and run its tree; for GPU machines
#                    without ddpipe's Debian libraries
#     --build DIR    build directory (default build-gpu; configured Release,
#                    -DDDPIPE_CUDA=ON, no sanitizers)
#     --out DIR      where logs and results go (default $BUILD/gpu-check)
#     --quick        benches with 3 timed iterations instead of 10
#     --no-cpu-suite skip the CPU test suite (it needs the test deps)
#     --fmnist DIR   Fashion-MNIST IDX files (default /usr/share/datasets/
#                    fashion-mnist) for the end-to-end jobs
# env: PY (python with torch + CUDA, default /usr/bin/python3 then python3),
#      CUDAToolkit_ROOT (default /usr/local/cuda), JOBS (default nproc),
#      GPU_TEST_TIMEOUT (seconds per GPU test, default 150),
#      COMPILE_S (bound on the torch.compile eval peer, default 150),
#      GPU_CHECK_RECORD_DIR (where the JSON record goes, default bench/gpu;
#      tests/integration/test_gpu_check_dry.py points it elsewhere).
# Steps: configure + build, ctest -L '^gpu$' (a skipped test counts as FAIL),
# ddpipe eval and train end to end with --device cuda against --device cpu,
# the host<->device bytes a cuda training step counts against the plan
# (parameters/gradients 0, BatchNorm = bench/step_bytes; step-bytes.json),
# the CPU test suite, ddpipe vs PyTorch ResNet-18 eval/train at batch 256
# (fp32, tf32, bf16, fp16; PyTorch eager fp32 and channels-last + AMP; last
# of all, its eval under torch.compile, mode cl-bf16-compile), ResNet-50's
# bf16 training step against PyTorch's and its per-op device profile, the
# bf16 eval and training step on cuDNN engines chosen by timing
# (DDPIPE_CUDNN_TUNE=1: what tuning gains, what determinism costs), per-op
# device timing of the bf16 and fp32 passes (DDPIPE_CUDA_PROFILE=1, their
# summary lines kept), the end-to-end JPEG bench and the bf16 demo course,
# the host CPU's native bf16 training (AMX
# there: the cpu backend's 16-bit activations, bit for bit and timed), then
# A/Bs measured before: CUDA graphs off (DDPIPE_CUDA_GRAPHS=0), cuDNN's
# graph API off (DDPIPE_CUDNN_GRAPH=0), the legacy calls' benchmark
# (DDPIPE_CUDA_ALGO=find), the NCCL 2-process job where the machine's NCCL
# allows it, and last PyTorch's eval under torch.compile
# (ordered by what the next decision needs: the budget drops the last
# first). Prints a summary and writes one JSON record of the
# run to bench/gpu/<UTC date>-<short sha>.json (a rerun the same day at the
# same commit replaces it): the machine (GPU, driver, CUDA, cuDNN, NCCL,
# PyTorch), every check with pass/fail/not-run and its reason, every bench
# with ddpipe's and PyTorch's img/s from this run and their ratio, graphs
# on/off, the profile; exit 1 if any step failed. Without a GPU it says so
# and exits 1 at once. Budget: GPU_CHECK_BUDGET seconds (default 420): a
# step that would start later is NOT RUN, a running one stops 60 s after it,
# so the record is written within 8 minutes.
set -u
cd "$(dirname "$0")/.."
DEBS= BUNDLE= BUILD=build-gpu OUT= ITERS=10 CPU_SUITE=1
FMNIST=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
    case "$1" in
        --debs) DEBS=$2; shift ;;
        --build) BUILD=$2; shift ;;
        --out) OUT=$2; shift ;;
        --bundle) BUNDLE=$2; shift ;;
        --quick) ITERS=3 ;;
        --no-cpu-suite) CPU_SUITE=0 ;;
        --fmnist) FMNIST=$2; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "gpu-check: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
. scripts/gpu-bundle-env.sh   # bundle_env, nccl_loaded
if [ -n "$BUNDLE" ]; then
    # the tree sits at the path it was built at; its libraries beside it
    bundle_env "$BUNDLE" || { echo "gpu-check: no usable bundle" >&2; exit 2; }
fi
OUT=${OUT:-$BUILD/gpu-check}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
STEPS=$OUT/steps.tsv   # STATUS<tab>STEP<tab>DETAIL<tab>SECONDS, for the JSON record
: > "$SUMMARY"
: > "$STEPS"
fails=0
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# The time budget (GPU_CHECK_BUDGET seconds, default 420): a step that would
# start past it is NOT RUN (its reason says so) and a running one is stopped
# 60 s after it, so the summary and the JSON record are always written inside
# a device call's window; the checks come first, the longest benches last.
BUDGET=${GPU_CHECK_BUDGET:-420}
T0=$(date +%s)

note() {   # note STATUS STEP DETAIL (with the seconds since the start: where the budget went)
    printf '%-8s %-40s %s\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$(printf '%s' "$3" | tr '\t\n' '  ')" \
        "$(($(date +%s) - T0))" >> "$STEPS"
    [ "$1" = FAIL ] && fails=$((fails + 1))
    return 0
}

# budget_left NAME: 0 while time is left; else notes NAME as NOT RUN, 1
budget_left() {
    used=$(($(date +%s) - T0))
    [ "$used" -lt "$BUDGET" ] && return 0
    note NOTRUN "$1" "time budget: ${used} s used of ${BUDGET} s (GPU_CHECK_BUDGET)"
    return 1
}

# bench_line LOG: a bench's result line (a backend's closing log line can
# follow it), else the log's last line
bench_line() {
    grep -E '^(ddpipe-cuda|torch) ' "$1" 2>/dev/null | tail -n 1 | grep . || tail -n 1 "$1"
}

# step NAME LOG CMD...: run, record PASS/FAIL with the log's result line (a
# command, not a shell function, is stopped when the budget's grace ends)
step() {
    name=$1 log=$OUT/$2; shift 2
    budget_left "$name" || return 0
    echo "== $name" >&2
    left=$((BUDGET + 60 - ($(date +%s) - T0)))
    case "$(command -v "$1")" in
        /*) set -- timeout "$left" "$@" ;;
    esac
    if "$@" > "$log" 2>&1; then
        note PASS "$name" "$(bench_line "$log")"
    else
        note FAIL "$name" "see $log: $(bench_line "$log")"
    fi
}

# --- machine
if ! nvidia-smi -L > "$OUT/nvidia-smi.txt" 2>&1; then
    note FAIL "nvidia-smi" "no GPU visible: $(tail -n 1 "$OUT/nvidia-smi.txt")"
    echo "gpu-check: no GPU on this machine (nvidia-smi failed): nothing checked, no record written" >&2
    exit 1
fi
note INFO "devices" "$(tr '\n' ';' < "$OUT/nvidia-smi.txt")"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> "$OUT/nvidia-smi.txt" 2>&1

# --- dependencies
if [ -n "$DEBS" ]; then
    step "install-deps --offline" install-deps.log scripts/install-deps.sh --offline "$DEBS"
fi
for f in nccl.h cudnn.h; do
    [ -e "${CUDAToolkit_ROOT:-/usr/local/cuda}/include/$f" ] ||
        note WARN "$f" "not under ${CUDAToolkit_ROOT:-/usr/local/cuda}/include (cmake searches further)"
done

# --- build
if [ -z "$BUNDLE" ]; then
    step "configure (DDPIPE_CUDA=ON, Release)" configure.log \
        cmake -S . -B "$BUILD" -DDDPIPE_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        ${CUDAToolkit_ROOT:+-DCUDAToolkit_ROOT=$CUDAToolkit_ROOT}
    step "build (all targets)" build.log cmake --build "$BUILD" -j "$JOBS"
else
    note INFO "bundle" "$BUNDLE unpacked into $BUILD; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "$LD_LIBRARY_PATH" > "$OUT/ldpath"
fi
# built with NCCL: the cache says so, or (a bundle carries no CMakeCache.txt)
# its NCCL test's program is there (CMake builds it only with NCCL)
grep -q '^NCCL_LIBRARY:FILEPATH=/' "$BUILD/CMakeCache.txt" 2>/dev/null ||
    grep -q "NCCL ON" "$OUT/configure.log" 2>/dev/null ||
    [ -x "$BUILD/tests/gpud/cuda/test_cuda_nccl" ] ||
    note WARN "NCCL" "not found: gpud_cuda_nccl is not built"
# The NCCL gpud loads (a bundle's own first: scripts/nccl-build.sh) and its
# version by ncclGetVersion, which decides the two-ranks-on-one-GPU steps;
# the header's version where it cannot be asked
NCCL_LOADED=$(nccl_loaded "$BUILD/bin/gpud")
if [ -n "$NCCL_LOADED" ]; then
    echo "$NCCL_LOADED" > "$OUT/nccl-loaded"
    note INFO "NCCL loaded" "${NCCL_LOADED#* } (version code ${NCCL_LOADED%% *}; two ranks on one GPU from 23003)"
    NCCL_LOADED=${NCCL_LOADED%% *}
else
    NCCL_LOADED=$(sed -n 's/^#define NCCL_VERSION_CODE *\([0-9]*\).*/\1/p' \
        "${CUDAToolkit_ROOT:-/usr/local/cuda}/include/nccl.h" /usr/include/nccl.h 2>/dev/null | head -n 1)
    note INFO "NCCL loaded" "not asked (no libnccl gpud resolves answered): the header's version code ${NCCL_LOADED:-unknown} decides"
fi
# The nvJPEG gpud's --decode gpu loads (gpud_cuda_decode, the e2e JPEG
# job's bf16-decode-gpu run): one found on the machine, exported for them
NVJPEG_LIB=$(nvjpeg_find)
if [ -n "$NVJPEG_LIB" ]; then
    export DDPIPE_NVJPEG_LIB="$NVJPEG_LIB"
    echo "$NVJPEG_LIB" > "$OUT/nvjpeg-lib"
    note INFO "nvJPEG" "$NVJPEG_LIB (--decode gpu)"
else
    note INFO "nvJPEG" "none found (bundle, /opt/nvjpeg-13, pip's nvidia-nvjpeg, torchvision.libs): --decode gpu's steps are NOT RUN; scripts/gpu-nccl.sh --nvjpeg LIB carries one"
fi

# why_failed TEST: its failed CHECK lines (and the gradients it names) from
# the ctest log's output of TEST, so the record says why without the log
why_failed() {
    r=$(awk -v t="$1" '$0 ~ "Test +#[0-9]+: " t " " { on = 1; next }
                       on && /^ *Start +[0-9]+: / { on = 0 }
                       on && (/CHECK\(.*failed/ || /^  grad .* of the arena/)' \
            "$OUT/ctest-gpu.log" | head -n 8 | tr '\n' ';')
    echo "${r:-no CHECK line}; see $OUT/ctest-gpu.log"
}

# --- GPU tests: a skip on a GPU machine means the check did not run
# Bounded twice: a hung test (a collective that never completes) is stopped
# after GPU_TEST_TIMEOUT s, and the whole ctest at the budget's end, so one
# hang cannot eat the device call and leave no record.
echo "== ctest -L ^gpu$" >&2
GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-150}
left=$((BUDGET + 60 - ($(date +%s) - T0)))
(cd "$BUILD" && timeout "$left" ctest -L '^gpu$' --output-on-failure \
    --timeout "$GPU_TEST_TIMEOUT") > "$OUT/ctest-gpu.log" 2>&1
for t in $(cd "$BUILD" && ctest -L '^gpu$' -N | sed -n 's/^ *Test *#[0-9]*: *//p'); do
    line=$(grep -E " $t \.+" "$OUT/ctest-gpu.log" | tail -n 1)
    case "$line" in
        *Passed*) note PASS "ctest $t" "passed" ;;
        *Skipped*)
            if [ "$t" = gpud_cuda_decode ] && [ -z "${DDPIPE_NVJPEG_LIB:-}" ]; then
                note NOTRUN "ctest $t" "no nvJPEG on this machine (scripts/gpu-nccl.sh --nvjpeg carries one)"
            else
                note FAIL "ctest $t" "skipped on a GPU machine"   # nccl: 1 rank on 1 GPU
            fi ;;
        *Timeout*) note FAIL "ctest $t" "timed out after $GPU_TEST_TIMEOUT s: see $OUT/ctest-gpu.log" ;;
        "") note NOTRUN "ctest $t" "not reached: the ctest run was stopped at the time budget" ;;
        *) note FAIL "ctest $t" "$(why_failed "$t")" ;;
    esac
done
# A failing 16-bit training test run again with one mechanism off at a time
# (CUDA graphs; cuDNN graphs, the legacy convolution calls instead; the
# 16-bit NHWC activations): which one the failure follows,
# in the record without another device call
if grep -qE " gpud_cuda_bf16 \.+.*Failed" "$OUT/ctest-gpu.log"; then
    for knob in DDPIPE_CUDA_GRAPHS=0 DDPIPE_CUDNN_GRAPH=0 DDPIPE_HALF_ACTIVATIONS=0; do
        step "gpud_cuda_bf16 again, $knob" "bisect-bf16-$knob.log" \
            env "$knob" DDPIPE_SRC="$(pwd)" timeout "$GPU_TEST_TIMEOUT" "$BUILD/tests/gpud/cuda/test_cuda_bf16"
        grep -E '^bf16 training|^  grad ' "$OUT/bisect-bf16-$knob.log" | head -n 4 |
            sed "s/^/$knob: /" >> "$SUMMARY"
    done
fi

# --- end to end: all four daemons, --device cuda against --device cpu
if [ -e "$FMNIST/t10k-images-idx3-ubyte.gz" ] || [ -e "$FMNIST/t10k-images-idx3-ubyte" ]; then
    step "e2e eval --device cuda vs cpu" e2e-eval.log \
        sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" eval
    step "e2e train --device cuda vs cpu" e2e-train.log \
        sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" train
else
    note NOTRUN "e2e eval/train" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
fi

# --- host<->device bytes of a cuda training step at world 1: what the
# backend counted (gpud --verbose "step bytes" lines) against the plan
# (bench/step_bytes, from the model's graph): parameters/gradients 0 (the
# arenas are device memory) and bn = the plan's BatchNorm bytes, every step;
# the figures go to step-bytes.json
step_bytes_check() {
    d=$OUT/step-bytes
    "$BUILD/bin/ddpipe" train --data "idx:$FMNIST/t10k" --limit 256 --model wideresnet \
        --channels 8,16,32,64 --workers 1 --batch-size 64 --lr 0.05 --epochs 1 --seed 0 \
        --device cuda --out "$d" --overwrite --verbose || { echo "FAIL: the training job"; return 1; }
    wrn=$("$BUILD/bench/step_bytes" --arch wideresnet --channels 8,16,32,64 --classes 10 \
        --batch 64 --size 28 | tail -n 1)
    plan=$(echo "$wrn" | sed -n 's/^step_bytes .* bn=\([0-9]*\) .*/\1/p')
    plan_out=$(echo "$wrn" | sed -n 's/^step_bytes .* out=\([0-9]*\) .*/\1/p')
    r18=$("$BUILD/bench/step_bytes" | tail -n 1)
    # one "PARAMS:BN:OUT" per step line
    counted=$(cat "$d"/logs/gpud*.log | sed -n \
        's/.*step bytes host<->backend.* out \([0-9]*\), parameters\/gradients \([0-9]*\), bn \([0-9]*\).*/\2:\3:\1/p' |
        tr '\n' ' ')
    echo "planned per step: parameters/gradients 0, bn ${plan:-none}, out ${plan_out:-none}" \
         "(loss + top-5 ids); counted per step (parameters:bn:out): ${counted:-none}"
    echo "resnet18 plan: $r18"
    n=0 bad=0 params= bns= outs=
    for c in $counted; do
        n=$((n + 1))
        p=${c%%:*} rest=${c#*:}
        b=${rest%%:*} o=${rest#*:}
        params="$params${params:+,}$p" bns="$bns${bns:+,}$b" outs="$outs${outs:+,}$o"
        [ "$p" = 0 ] && [ "$b" = "$plan" ] && [ "$o" = "$plan_out" ] || bad=$((bad + 1))
    done
    field() { echo "$r18" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
    printf '{\n  "job": "wideresnet 8,16,32,64, batch 64, 1x28x28, cuda, world 1",\n  "planned_params_per_step": 0,\n  "planned_bn_per_step": %s,\n  "planned_out_per_step": %s,\n  "counted_params_per_step": [%s],\n  "counted_bn_per_step": [%s],\n  "counted_out_per_step": [%s],\n  "resnet18_b256_planned_bn": %s,\n  "resnet18_b256_planned_batch_in": %s,\n  "resnet18_b256_planned_out": %s,\n  "resnet18_b256_planned_total": %s\n}\n' \
        "${plan:-null}" "${plan_out:-null}" "$params" "$bns" "$outs" "$(field bn)" "$(field batch_in)" "$(field out)" \
        "$(field total)" > "$OUT/step-bytes.json"
    [ -n "$plan" ] && [ -n "$plan_out" ] && [ "$n" -gt 0 ] && [ "$bad" -eq 0 ] ||
        { echo "FAIL: $bad of $n steps counted other than parameters/gradients 0, bn $plan, out $plan_out"; return 1; }
    echo "counted = planned on all $n steps (parameters/gradients 0, bn $plan, out $plan_out), figures in $OUT/step-bytes.json"
}
# --- the same job's training pass as one CUDA graph: real cuDNN and cuBLAS
# calls (forward, backward data and filter) and the WideResNet's dropout
# (its sample keys on the device) recorded once and replayed; a capture
# the device refuses is logged as a warning and the pass runs op by op
pass_recorded_check() {
    logs=$(cat "$OUT"/step-bytes/logs/gpud*.log 2>/dev/null)
    rec=$(printf '%s\n' "$logs" | grep -c 'training pass recorded')
    bad=$(printf '%s\n' "$logs" | grep -E 'training pass failed|of the training pass failed' | head -n 1)
    echo "recordings of the training pass: $rec${bad:+; $bad}"
    [ "$rec" -ge 1 ] && [ -z "$bad" ] ||
        { echo "FAIL: the training pass was not recorded and replayed (${bad:-no recording logged})"; return 1; }
    echo "the training pass (dropout included) recorded and replayed on the device"
}
if [ -e "$FMNIST/t10k-images-idx3-ubyte.gz" ] || [ -e "$FMNIST/t10k-images-idx3-ubyte" ]; then
    step "step bytes: cuda counted = planned" step-bytes.log step_bytes_check
    step "training pass as one CUDA graph" pass-recorded.log pass_recorded_check
else
    note NOTRUN "step bytes: cuda counted = planned" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
    note NOTRUN "training pass as one CUDA graph" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
fi

# --- the rest of the suite (CPU), with the cuda backend linked in
if [ "$CPU_SUITE" = 1 ] && [ -f "$BUILD/bundle-gpu-only" ]; then
    note NOTRUN "ctest (CPU suite)" "the bundle holds the device calls' programs only (scripts/gpu-bundle.sh --gpu-only)"
elif [ "$CPU_SUITE" = 1 ]; then
    echo "== ctest -LE ^gpu$" >&2
    if (cd "$BUILD" && ctest -LE '^gpu$' -j "$JOBS" --timeout 300) > "$OUT/ctest-cpu.log" 2>&1; then
        note PASS "ctest (CPU suite)" "$(grep 'tests passed' "$OUT/ctest-cpu.log")"
    else
        note FAIL "ctest (CPU suite)" "$(grep 'tests passed' "$OUT/ctest-cpu.log"); see $OUT/ctest-cpu.log"
    fi
else
    note NOTRUN "ctest (CPU suite)" "--no-cpu-suite"
fi

# --- benchmarks: ddpipe cuda vs PyTorch, ResNet-18, batch 256
PY=${PY:-}
if [ -z "$PY" ]; then
    for p in /usr/bin/python3 python3; do
        if env -u LD_LIBRARY_PATH "$p" -c 'import torch, torchvision; assert torch.cuda.is_available()' 2>/dev/null; then
            PY=$p; break
        fi
    done
fi
BENCH=$OUT/bench.txt
: > "$BENCH"
for what in eval train; do
    # bf16: eval as the inference plan, train on bf16 NHWC activations
    # (cuda_train16.c: bf16 tensor-core convolutions; docs/CUDA.md "bf16
    # training"); its peer is autocast bf16
    # fp16 trains with dynamic loss scaling (docs/FP16.md) and evaluates as
    # the inference plan in fp16 (BatchNorm folded, as bf16's); its peer is
    # cl-amp (autocast float16, + GradScaler in training)
    precs="fp32 tf32 bf16 fp16" modes="eager cl-amp cl-bf16"
    for prec in $precs; do
        step "bench ddpipe $what $prec" "bench-ddpipe-$what-$prec.log" \
            "$BUILD/bench/cuda_resnet18" "$what" --batch 256 --iters "$ITERS" --precision "$prec"
        bench_line "$OUT/bench-ddpipe-$what-$prec.log" >> "$BENCH"
    done
    if [ -n "$PY" ]; then
        for mode in $modes; do
            step "bench torch $what $mode" "bench-torch-$what-$mode.log" \
                env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py "$what" --batch 256 --iters "$ITERS" --mode "$mode"
            bench_line "$OUT/bench-torch-$what-$mode.log" >> "$BENCH"
        done
    else
        note NOTRUN "bench torch $what" "no python with torch + CUDA (set PY=...)"
    fi
done

# --- the ResNet-50 training step in bf16 (the issue's second training bar)
# against PyTorch's channels_last + autocast bf16, right after ResNet-18's
# (about 25 s on the H200 of 2026-11-30; the A/Bs, the JPEG job and the
# course come after it, so a budget cut drops them first); fewer
# iterations (a step is about 4x ResNet-18's)
step "bench ddpipe resnet50 train bf16" bench-ddpipe-resnet50-train-bf16.log \
    "$BUILD/bench/cuda_resnet18" train --arch resnet50 --batch 256 --iters 5 --precision bf16
bench_line "$OUT/bench-ddpipe-resnet50-train-bf16.log" >> "$BENCH"
if [ -n "$PY" ]; then
    step "bench torch resnet50 train cl-bf16" bench-torch-resnet50-train-cl-bf16.log \
        env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py train --arch resnet50 --batch 256 --iters 5 --mode cl-bf16
    bench_line "$OUT/bench-torch-resnet50-train-cl-bf16.log" >> "$BENCH"
fi

# where the device time of a pass goes (per op kind, cudaEvents; graphs are
# off meanwhile): the fp32 eval forward, and the bf16 training step's forward
# and backward (the bar's step: which kernels to make faster next)
profile_step() {   # what precision [arch: resnet18, the default, unnamed in the tags]
    parch=${3:-resnet18} ptag="$1 $2"
    [ "$parch" = resnet18 ] || ptag="$parch $ptag"
    echo "== bench ddpipe $ptag DDPIPE_CUDA_PROFILE=1" >&2
    plog=$OUT/bench-ddpipe-$(echo "$ptag" | tr ' ' '-')-profile.log
    budget_left "bench ddpipe $ptag profile" || return 0
    if DDPIPE_CUDA_PROFILE=1 "$BUILD/bench/cuda_resnet18" "$1" --arch "$parch" --batch 256 \
            --iters 3 --precision "$2" > "$plog" 2>&1 && grep -q 'cuda profile graph' "$plog"; then
        note PASS "bench ddpipe $ptag profile" "$(grep 'cuda profile graph' "$plog" | tail -n 1 | sed 's/.*cuda profile //')"
    else
        note FAIL "bench ddpipe $ptag profile" "no 'cuda profile graph' line; see $plog: $(tail -n 1 "$plog")"
    fi
    # (with the convolution backward's split into its data and filter gradients)
    grep -E 'cuda profile (graph|conv backward)' "$plog" | sed "s/.*cuda profile /$ptag: /" >> "$OUT/profile.txt"
    # the convolution algorithms cuDNN's heuristics gave (logged with the profile)
    grep 'cuda conv ' "$plog" | sed "s/.*cuda conv /$ptag conv: /" >> "$OUT/profile.txt"
}
: > "$OUT/profile.txt"
# ResNet-50's step (its bar was the furthest, 0.64x on 2026-11-30): where
# its device time goes, per op kind, in this call (gpu-probe's kernel list
# comes only in a later call, if time is left)
profile_step train bf16 resnet50
# variant_step STEP LOG SUFFIX what precision VAR=VALUE...: the ddpipe bench
# (ResNet-18, batch 256) with those variables, its bench line kept as
# precision=PRECISION-SUFFIX beside the default's (an A/B of one mechanism)
variant_step() {
    vname=$1 vlog=$2 vsuffix=$3 vwhat=$4 vprec=$5
    shift 5
    step "$vname" "$vlog" env "$@" "$BUILD/bench/cuda_resnet18" "$vwhat" --batch 256 \
        --iters "$ITERS" --precision "$vprec"
    grep '^ddpipe-cuda resnet18 ' "$OUT/$vlog" | tail -n 1 |
        sed "s/precision=$vprec/precision=$vprec-$vsuffix/" >> "$BENCH"
}
# --- cuDNN engines chosen by timing (docs/CUDA.md "Tuned engines"): the
# bar's two passes with DDPIPE_CUDNN_TUNE=1, their plans written to a file;
# the run's img/s is on the tuned engines, and its "cuda conv tune:" line
# says what a pass's convolutions cost on them, on heuristics' first
# deterministic engines (the default) and on the fastest of all,
# nondeterministic ones allowed (what determinism costs). The lines grepped
# here and in profile_step are checked to print by bench_cuda_lines_emu
# (the same bench on the kernel emulator, in the CPU suite)
tuned_step() {   # what precision
    variant_step "bench ddpipe $1 $2 tuned" "bench-ddpipe-$1-$2-tuned.log" tuned "$1" "$2" \
        DDPIPE_CUDNN_TUNE=1 DDPIPE_CUDNN_TUNE_MAX="${TUNE_MAX:-6}" \
        DDPIPE_CUDNN_TUNE_SECONDS="${TUNE_SECONDS:-3}" DDPIPE_CUDNN_PLANS="$OUT/cudnn-plans-$1-$2.txt"
    grep 'cuda conv tune: ' "$OUT/bench-ddpipe-$1-$2-tuned.log" | tail -n 1 |
        sed "s/.*cuda conv tune: /$1 $2 tune: /" >> "$OUT/profile.txt"
    # each shape: the chosen engine, heuristics' first deterministic one, the fastest of all
    grep 'cuda conv tune [a-z0-9]' "$OUT/bench-ddpipe-$1-$2-tuned.log" |
        sed "s/.*cuda conv tune /$1 $2 tune shape: /" >> "$OUT/profile.txt"
}
tuned_step train bf16
tuned_step eval bf16
# PyTorch under ddpipe's rule: cuDNN's deterministic algorithms only
# (cudnn.deterministic; its benchmark then times only those: the peer of
# the tuned engines above)
if [ -n "$PY" ]; then
    for what in train eval; do
        step "bench torch $what cl-bf16-det" "bench-torch-$what-cl-bf16-det.log" \
            env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py "$what" --batch 256 --iters "$ITERS" --mode cl-bf16-det
        bench_line "$OUT/bench-torch-$what-cl-bf16-det.log" >> "$BENCH"
    done
fi
# the 16-bit BatchNorm's passes all forward (DDPIPE_CUDA_BN_ORDER=0)
# against alternating, each starting on what the pass before left in L2
# (the default): what the order saves of a training step
variant_step "bench ddpipe train bf16 bn order fwd" \
    bench-ddpipe-train-bf16-bnfwd.log bn-order-fwd train bf16 DDPIPE_CUDA_BN_ORDER=0
# ... and its backward reading the ReLU's output (DDPIPE_CUDA_BN_MASK=0)
# instead of the signs its forward stored as bits (the default)
variant_step "bench ddpipe train bf16 bn mask off" \
    bench-ddpipe-train-bf16-bnmaskoff.log bn-mask-off train bf16 DDPIPE_CUDA_BN_MASK=0
# the bf16 eval with its convolutions on the legacy calls + the epilogue
# kernel (DDPIPE_CUDNN_GRAPH=0) against the fused graphs (the default): do
# the runtime-fusion engines beat a precompiled convolution and a separate
# epilogue?
variant_step "bench ddpipe eval bf16 cudnn graph off" \
    bench-ddpipe-eval-bf16-nocudnngraph.log cudnn-graph-off eval bf16 DDPIPE_CUDNN_GRAPH=0
# each batch written, run and read in turn (DDPIPE_EVAL_OVERLAP=0) against
# the next one staged while one runs (the default, as gpud's eval job):
# what the input overlap gains (docs/CUDA.md "The input path")
variant_step "bench ddpipe eval bf16 in turn" \
    bench-ddpipe-eval-bf16-inturn.log inturn eval bf16 DDPIPE_EVAL_OVERLAP=0
# the same for training: each step's batch written after the step before
# ended (DDPIPE_TRAIN_OVERLAP=0) against staged while it runs (the default,
# as gpud's trainer)
variant_step "bench ddpipe train bf16 in turn" \
    bench-ddpipe-train-bf16-inturn.log inturn train bf16 DDPIPE_TRAIN_OVERLAP=0
# the training forward without its fusions (DDPIPE_TRAIN_FUSE=0: BatchNorm,
# add and ReLU as three passes at each residual block's end, docs/CUDA.md
# "bf16 training") against fused (the default)
variant_step "bench ddpipe train bf16 unfused" \
    bench-ddpipe-train-bf16-unfused.log unfused train bf16 DDPIPE_TRAIN_FUSE=0
# fp16 eval on the tape (DDPIPE_FP16_EVAL=tape: autocast's rounding points on
# the 16-bit table) against its inference plan (the default since
# 2026-12-01): what the fold and the fused convolutions gain in fp16
variant_step "bench ddpipe eval fp16 tape" \
    bench-ddpipe-eval-fp16-tape.log tape eval fp16 DDPIPE_FP16_EVAL=tape

profile_step train bf16
# the bf16 eval's fused plan (the bar's eval: 0.51x cl-bf16 on 2026-11-29)
profile_step eval bf16
# --- end to end from 500x375 JPEGs through all four daemons against a
# PyTorch DataLoader (16 PIL workers) + channels_last + AMP (issue 30's bar:
# >= 2x); its bench lines join the record's "e2e-jpeg" figures (ddpipe's
# whole job, "bf16", its rate after the first result, "bf16-steady", and
# the loader alone on the host's cores, "loader-only": gpu-e2e.sh says
# why), gpud's start-up lines the record's "e2e_jpeg_startup"
if [ -n "$PY" ]; then
    # (again on the tuned bf16 eval's plans file, its serialized plans
    # loaded: the start-up without kernel compilation)
    step "bench e2e-jpeg ddpipe vs DataLoader" e2e-jpeg.log \
        env PY="$PY" E2E_CUDNN_PLANS="$OUT/cudnn-plans-eval-bf16.txt" \
        sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" jpeg
    grep -E '^(ddpipe-cuda|torch) resnet18 e2e-jpeg ' "$OUT/e2e-jpeg.log" >> "$BENCH"
    # --decode gpu's run inside it: its workers' check, or why it did not run
    sed -n -E 's/^(PASS|NOTRUN|INFO): (--decode gpu.*)/\1 \2/p' "$OUT/e2e-jpeg.log" |
        while read -r st rest; do note "$st" "e2e-jpeg --decode gpu" "$rest"; done
    sed -n -E 's/^e2e-jpeg (gpud|gpud \(plans file\)|gpud \(--decode gpu\)|whole commands): /e2e jpeg: \1: /p' "$OUT/e2e-jpeg.log" >> "$OUT/profile.txt"
else
    note NOTRUN "bench e2e-jpeg ddpipe vs DataLoader" "no python with torch + CUDA (set PY=...)"
fi
# (t10k alone will do: gpu-e2e.sh then trains on its first 8,000 images)
if [ -e "$FMNIST/t10k-images-idx3-ubyte.gz" ] || [ -e "$FMNIST/t10k-images-idx3-ubyte" ]; then
    step "demo course cuda bf16 vs fp32 (val top-1)" e2e-bf16.log \
        sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" bf16
else
    note NOTRUN "demo course cuda bf16 vs fp32 (val top-1)" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
fi

# --- the host CPU (AMX on these machines): the cpu backend's native bf16
# training on 16-bit activations (docs/BF16.md "16-bit activations"), bit
# for bit against its fp32 buffers, then a ResNet-18 step in its variants
# and PyTorch's autocast, same run: cpu-host.txt, the record's cpu_host
CPUH=$OUT/cpu-host.txt
: > "$CPUH"
step "cpu host: native bf16 on 16-bit activations" cpu-half-store.log \
    env DDPIPE_SRC="$PWD" "$BUILD/tests/gpud/test_half_store" cpu
cpu_bench() {   # cpu_bench TAG VAR=VALUE...: one bf16 train step line, tagged
    tag=$1; shift
    budget_left "cpu host train bf16 $tag" || return 0
    env "$@" timeout 120 "$BUILD/bench/train_resnet18" --bf16 --batch 32 --threads "$(nproc)" \
        --iters 3 --warmup 1 2>&1 | grep 'img/s' | sed "s|^|$tag: |" >> "$CPUH"
}
cpu_bench default
cpu_bench native-any-layout DDPIPE_BF16_LAYOUT=any
cpu_bench native-fp32-buffers DDPIPE_HALF_ACTIVATIONS=0
cpu_bench emulated DDPIPE_BF16=emulated
if [ -n "$PY" ] && budget_left "cpu host torch train bf16"; then
    timeout 120 "$PY" bench/train_resnet18_torch.py --bf16 --batch 32 --threads "$(nproc)" \
        --iters 3 --warmup 1 2>&1 | grep 'img/s' | sed 's|^|torch-autocast: |' >> "$CPUH"
fi
note INFO "cpu host bf16 train" "$(grep -c img/s "$CPUH") lines in $CPUH"
# --- measured on 2026-11-29 and not the next decision: after the
# ResNet-50 bar and the host CPU's figures, so the budget drops them first
# --- bf16 training on the fp32 buffers of before (DDPIPE_HALF_ACTIVATIONS=0:
# TF32 convolutions on bf16 values, the engine rounding every activation),
# beside the bf16 NHWC activations above: what the 16-bit buffers gain
variant_step "bench ddpipe train bf16 fp32 buffers" \
    bench-ddpipe-train-bf16-f32buf.log fp32-buffers train bf16 DDPIPE_HALF_ACTIVATIONS=0

# fp16 runs the same 16-bit NHWC table as bf16: their gap is cuDNN's
profile_step train fp16
profile_step eval fp32
# bf16 training with the legacy convolution calls (DDPIPE_CUDNN_GRAPH=0)
# against their cuDNN graphs (the default, above)
variant_step "bench ddpipe train bf16 cudnn graph off" \
    bench-ddpipe-train-bf16-nocudnngraph.log cudnn-graph-off train bf16 DDPIPE_CUDNN_GRAPH=0
# bf16 training with the legacy calls' algorithms cuDNN's benchmark ranks
# first (DDPIPE_CUDA_ALGO=find; the cuDNN graphs off) against its heuristics'
# above
variant_step "bench ddpipe train bf16 algo find" \
    bench-ddpipe-train-bf16-find.log algo-find train bf16 DDPIPE_CUDA_ALGO=find DDPIPE_CUDNN_GRAPH=0

# --- CUDA graphs off vs on (on: the fp32 eval above), and where the time
# of an eval forward goes (per op kind, cudaEvents; graphs are off then)
variant_step "bench ddpipe eval fp32 graphs off" \
    bench-ddpipe-eval-fp32-nographs.log graphs-off eval fp32 DDPIPE_CUDA_GRAPHS=0
# cuDNN's graph API for the fused eval conv off (DDPIPE_CUDNN_GRAPH=0: the
# legacy conv + epilogue kernel; on: the fp32 eval above)
variant_step "bench ddpipe eval fp32 cudnn graph off" \
    bench-ddpipe-eval-fp32-nocudnngraph.log cudnn-graph-off eval fp32 DDPIPE_CUDNN_GRAPH=0
# the fp32 training convolutions as cuDNN graphs (the default) against
# their legacy calls
variant_step "bench ddpipe train fp32 cudnn graph off" \
    bench-ddpipe-train-fp32-nocudnngraph.log cudnn-graph-off train fp32 DDPIPE_CUDNN_GRAPH=0
# --- bitwise training (--chunk) with 1, 2, 3 gpuds: the same bytes (after
# the bars: a real cuDNN's engines, process by process)
if [ -e "$FMNIST/t10k-images-idx3-ubyte.gz" ] || [ -e "$FMNIST/t10k-images-idx3-ubyte" ]; then
    step "e2e bitwise training W = 1, 2, 3" e2e-bitwise.log \
        sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" bitwise
else
    note NOTRUN "e2e bitwise training W = 1, 2, 3" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
fi
# --- what this script cannot check yet (docs/CUDA.md, "Not yet verified")
# two gpuds on one GPU over NCCL against the ring (gpu-e2e.sh nccl; 77: the
# machine's NCCL refuses two ranks on one device)
if [ -e "$FMNIST/t10k-images-idx3-ubyte.gz" ] || [ -e "$FMNIST/t10k-images-idx3-ubyte" ]; then
    NCCL_VERSION_CODE=$NCCL_LOADED
    export NCCL_VERSION_CODE
    if budget_left "gpud + NCCL 2-process training"; then
        timeout $((BUDGET + 60 - ($(date +%s) - T0))) \
            sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" nccl > "$OUT/e2e-nccl.log" 2>&1
        rc=$?
    else
        rc=-1
    fi
    case $rc in
        -1) ;;
        0) note PASS "gpud + NCCL 2-process training" "$(tail -n 1 "$OUT/e2e-nccl.log")" ;;
        77) note NOTRUN "gpud + NCCL 2-process training" "$(tail -n 1 "$OUT/e2e-nccl.log")" ;;
        *) note FAIL "gpud + NCCL 2-process training" "see $OUT/e2e-nccl.log: $(tail -n 1 "$OUT/e2e-nccl.log")" ;;
    esac
else
    note NOTRUN "gpud + NCCL 2-process training" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
fi
# --- last, as the issue asks it "if it fits the window": the eval bar's
# peer under torch.compile (inductor, default mode); its compilation
# (compile_s in its line) bounded by COMPILE_S seconds
if [ -n "$PY" ]; then
    step "bench torch eval cl-bf16-compile" bench-torch-eval-cl-bf16-compile.log \
        timeout "${COMPILE_S:-150}" env -u LD_LIBRARY_PATH "$PY" bench/cuda_resnet18_torch.py eval \
        --batch 256 --iters "$ITERS" --mode cl-bf16-compile
    bench_line "$OUT/bench-torch-eval-cl-bf16-compile.log" >> "$BENCH"
fi
# --- one JSON record of the run (python3 writes it; the inputs are files):
# bench/gpu/DATE-SHA.json as issue 30 names it
RECORD_DIR=${GPU_CHECK_RECORD_DIR:-bench/gpu}
RECORD=$RECORD_DIR/$(date -u +%Y-%m-%d)-$(git rev-parse --short HEAD 2>/dev/null || echo unknown).json
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] &&
    commit="$commit+dirty"
mkdir -p "$RECORD_DIR"
if python3 - "$RECORD" "$STEPS" "$BENCH" "$OUT/step-bytes.json" "$STARTED" "$commit" \
        "${CUDAToolkit_ROOT:-/usr/local/cuda}" "$fails" "${PY:-}" "$OUT/profile.txt" <<'PYEOF'
import datetime, glob, json, os, re, subprocess, sys
out, steps, bench, sb, started, commit, cuda_root, fails, py, profile = sys.argv[1:11]

def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""

def smi(q):
    v = run("nvidia-smi", "--query-gpu=" + q, "--format=csv,noheader").splitlines()
    return v[0].strip() if v else None

def cudnn_version():
    for h in [cuda_root + "/include/cudnn_version.h", "/usr/include/cudnn_version.h"] + \
             glob.glob("/usr/include/*/cudnn_version.h") + \
             glob.glob("/usr/local/lib/python3*/dist-packages/nvidia/cudnn/include/cudnn_version.h"):
        try:
            t = open(h).read()
        except OSError:
            continue
        v = [re.search(r"#define CUDNN_%s\s+(\d+)" % k, t) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
        if all(v):
            return ".".join(m.group(1) for m in v)
    return None

def cudnn_loaded():
    """the cuDNN the backend loaded, from its log line in the bench logs"""
    for log in sorted(glob.glob(os.path.join(os.path.dirname(bench), "bench-ddpipe-*.log"))):
        try:
            m = re.search(r"cuDNN (\d+\.\d+\.\d+) loaded", open(log, errors="replace").read())
        except OSError:
            continue
        if m:
            return m.group(1)
    return None

def nccl_loaded():
    """the NCCL gpud loads: its version (ncclGetVersion) and path"""
    try:
        code, path = open(os.path.join(os.path.dirname(bench), "nccl-loaded")).read().split()[:2]
        c = int(code)
    except (OSError, ValueError):
        return None
    return {"version": "%d.%d.%d" % (c // 10000, c // 100 % 100, c % 100), "path": path}

def nvjpeg_found():
    """the nvJPEG --decode gpu loads (nvjpeg_find): its version (nvjpegGetProperty) and path"""
    try:
        path = open(os.path.join(os.path.dirname(bench), "nvjpeg-lib")).read().strip()
        import ctypes
        lib = ctypes.CDLL(path)
        v = [ctypes.c_int(0) for _ in range(3)]
        if any(lib.nvjpegGetProperty(i, ctypes.byref(v[i])) != 0 for i in range(3)):
            return {"version": None, "path": path}
        return {"version": "%d.%d.%d" % tuple(x.value for x in v), "path": path}
    except (OSError, AttributeError):
        return None

def nccl_version():
    for h in [cuda_root + "/include/nccl.h", "/usr/include/nccl.h"] + \
             glob.glob("/usr/local/lib/python3*/dist-packages/nvidia/nccl/include/nccl.h"):
        try:
            t = open(h).read()
        except OSError:
            continue
        v = [re.search(r"#define NCCL_%s\s+(\d+)" % k, t) for k in ("MAJOR", "MINOR", "PATCH")]
        if all(v):
            return ".".join(m.group(1) for m in v)
    return None

def torch_versions():
    # the peer's own stack (its wheel may carry other CUDA/cuDNN/NCCL builds)
    if not py:
        return None
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    try:
        r = subprocess.run([py, "-c", "import torch, json; n = torch.cuda.nccl.version() "
                            "if torch.cuda.is_available() else None; print(json.dumps({"
                            "'version': torch.__version__, 'cuda': torch.version.cuda, "
                            "'cudnn': torch.backends.cudnn.version(), 'nccl': "
                            "'.'.join(map(str, n)) if isinstance(n, tuple) else n}))"],
                           capture_output=True, text=True, timeout=120, env=env)
        return json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        return None

def cuda_version():
    m = re.search(r"release ([\d.]+)", run(cuda_root + "/bin/nvcc", "--version"))
    if m:
        return m.group(1)
    m = re.search(r"CUDA Version:\s*([\d.]+)", run("nvidia-smi"))
    return m.group(1) if m else None

rec = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "started": started,
    "git_commit": commit,
    "gpu": smi("name"),
    "gpu_count": len([l for l in run("nvidia-smi", "-L").splitlines() if l.startswith("GPU ")]),
    "driver": smi("driver_version"),
    "cuda": cuda_version(),
    "cudnn": cudnn_version(),
    "cudnn_loaded": cudnn_loaded(),
    "nccl": nccl_version(),
    "nccl_loaded": nccl_loaded(),
    "nvjpeg": nvjpeg_found(),
    "pytorch": torch_versions(),
    "failed_steps": int(fails),
    "steps": [],
    "bench": {},
}
for line in open(steps):
    f = line.rstrip("\n").split("\t")
    if len(f) in (3, 4):
        # result: pass / fail / not-run for checks; info / warn lines are context;
        # at_s: seconds since the start when it was noted (a step's time is
        # the difference from the step before)
        result = {"PASS": "pass", "FAIL": "fail", "NOTRUN": "not-run"}.get(f[0], f[0].lower())
        s = {"step": f[1], "result": result, "reason": f[2]}
        if len(f) == 4 and f[3].isdigit():
            s["at_s"] = int(f[3])
        rec["steps"].append(s)

# bench lines: "ddpipe-cuda <arch> <what> img/s=X ... precision=P" and
# "torch <arch> <what> img/s=X ... mode=M"; keyed "<what>" for resnet18
# (the record's old keys), "<arch> <what>" for the others
figs = {}
for line in open(bench) if os.path.exists(bench) else []:
    kv = dict(re.findall(r"(\S+)=(\S+)", line))
    w = line.split()
    if len(w) < 3 or "img/s" not in kv:
        continue
    who = {"ddpipe-cuda": "ddpipe", "torch": "torch"}.get(w[0])
    mode = kv.get("precision") if who == "ddpipe" else kv.get("mode")
    if who and mode:
        key = w[2] if w[1] == "resnet18" else "%s %s" % (w[1], w[2])
        figs.setdefault(key, {})["%s %s" % (who, mode)] = {
            "img_s": float(kv["img/s"]), "best_img_s": float(kv["best_img/s"]) if "best_img/s" in kv else None}
for what, f in figs.items():
    ratios = {}
    for d, dv in f.items():
        for t, tv in f.items():
            if d.startswith("ddpipe ") and t.startswith("torch ") and tv["img_s"] > 0:
                ratios["%s / %s" % (d, t)] = round(dv["img_s"] / tv["img_s"], 3)
    rec["bench"][what] = {"img_s": f, "ratios": ratios}
# CUDA graphs: the fp32 eval with graphs on (default) and off, same run
ev = rec["bench"].get("eval", {}).get("img_s", {})
on, off = ev.get("ddpipe fp32"), ev.get("ddpipe fp32-graphs-off")
rec["cuda_graphs_eval_fp32"] = {
    "on_img_s": on["img_s"] if on else None, "off_img_s": off["img_s"] if off else None,
    "on_over_off": round(on["img_s"] / off["img_s"], 3) if on and off and off["img_s"] > 0 else None}
lg = ev.get("ddpipe fp32-cudnn-graph-off")
rec["cudnn_graph_eval_fp32"] = {
    "on_img_s": on["img_s"] if on else None, "off_img_s": lg["img_s"] if lg else None,
    "on_over_off": round(on["img_s"] / lg["img_s"], 3) if on and lg and lg["img_s"] > 0 else None}
tr = rec["bench"].get("train", {}).get("img_s", {})
t32, t32l = tr.get("ddpipe fp32"), tr.get("ddpipe fp32-cudnn-graph-off")
rec["cudnn_graph_train_fp32"] = {
    "on_img_s": t32["img_s"] if t32 else None, "off_img_s": t32l["img_s"] if t32l else None,
    "on_over_off": round(t32["img_s"] / t32l["img_s"], 3) if t32 and t32l and t32l["img_s"] > 0 else None}
e16, e16l = ev.get("ddpipe bf16"), ev.get("ddpipe bf16-cudnn-graph-off")
rec["cudnn_graph_eval_bf16"] = {
    "on_img_s": e16["img_s"] if e16 else None, "off_img_s": e16l["img_s"] if e16l else None,
    "on_over_off": round(e16["img_s"] / e16l["img_s"], 3) if e16 and e16l and e16l["img_s"] > 0 else None}
h16, f32b = tr.get("ddpipe bf16"), tr.get("ddpipe bf16-fp32-buffers")
tlg = tr.get("ddpipe bf16-cudnn-graph-off")
rec["cudnn_graph_train_bf16"] = {
    "on_img_s": h16["img_s"] if h16 else None, "off_img_s": tlg["img_s"] if tlg else None,
    "on_over_off": round(h16["img_s"] / tlg["img_s"], 3) if h16 and tlg and tlg["img_s"] > 0 else None}
rec["half_activations_train_bf16"] = {
    "bf16_nhwc_img_s": h16["img_s"] if h16 else None, "fp32_buffers_img_s": f32b["img_s"] if f32b else None,
    "nhwc_over_fp32_buffers": round(h16["img_s"] / f32b["img_s"], 3) if h16 and f32b and f32b["img_s"] > 0 else None}
# cuDNN engines by timing (DDPIPE_CUDNN_TUNE) against heuristics' first
# deterministic ones (the default), same run
tuned = {}
for what in ("train", "eval"):
    f = rec["bench"].get(what, {}).get("img_s", {})
    d, tn = f.get("ddpipe bf16"), f.get("ddpipe bf16-tuned")
    tuned["%s_bf16" % what] = {
        "heuristics_img_s": d["img_s"] if d else None, "tuned_img_s": tn["img_s"] if tn else None,
        "tuned_over_heuristics": round(tn["img_s"] / d["img_s"], 3) if d and tn and d["img_s"] > 0 else None}
rec["cudnn_tuned"] = tuned
plines = [l.strip() for l in open(profile)] if os.path.exists(profile) else []
for key, tag in (("cuda_profile_eval_fp32", "eval fp32: "), ("cuda_profile_eval_bf16", "eval bf16: "),
                 ("cuda_profile_train_bf16", "train bf16: "),
                 ("cuda_profile_train_fp16", "train fp16: "),
                 ("cuda_profile_resnet50_train_bf16", "resnet50 train bf16: "),
                 ("cuda_conv_algos_resnet50_train_bf16", "resnet50 train bf16 conv: "),
                 ("cuda_conv_algos_eval_bf16", "eval bf16 conv: "),
                 ("cuda_conv_algos_train_bf16", "train bf16 conv: "),
                 ("cuda_conv_algos_train_fp16", "train fp16 conv: "),
                 ("cudnn_tune_train_bf16", "train bf16 tune: "),
                 ("cudnn_tune_eval_bf16", "eval bf16 tune: "),
                 ("cudnn_tune_shapes_train_bf16", "train bf16 tune shape: "),
                 ("cudnn_tune_shapes_eval_bf16", "eval bf16 tune shape: "),
                 ("e2e_jpeg_startup", "e2e jpeg: ")):
    rec[key] = [l[len(tag):] for l in plines if l.startswith(tag)]
cpuh = os.path.join(os.path.dirname(bench), "cpu-host.txt")
rec["cpu_host"] = [l.strip() for l in open(cpuh)] if os.path.exists(cpuh) else []
if os.path.exists(sb):
    try:
        rec["step_bytes"] = json.load(open(sb))
    except ValueError:
        rec["step_bytes"] = None
with open(out, "w") as fh:
    json.dump(rec, fh, indent=2)
    fh.write("\n")
PYEOF
then
    note INFO "record" "$RECORD"
else
    note WARN "record" "writing $RECORD failed"
fi

echo
echo "gpu-check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(head -n 1 "$OUT/nvidia-smi.txt"))"
cat "$SUMMARY"
echo
echo "benchmarks (for bench/RESULTS.md):"
cat "$BENCH"
[ "$fails" -eq 0 ] || { echo "gpu-check: $fails step(s) failed" >&2; exit 1; }

#!/bin/sh
# The NCCL device call (docs/CUDA.md "NCCL in gpud"): gpud's NCCL path with
# two ranks on the machine's one GPU, on an NCCL >= 2.30.3 carried to it
# (the machines' own came with PyTorch's wheel, 2.28.3; the bundle, the
# source tree and the t10k files leave no room for it in gpu-check's call,
# so it comes in the next one, the bundle and t10k still there):
#   scripts/gpu-nccl.sh --bundle FILE [--nccl LIB] [--nvjpeg LIB] [--fmnist DIR] [--out DIR]
# --nccl LIB: libnccl.so.2 from scripts/nccl-build.sh (or LIB.xz).
# --nvjpeg LIB: libnvjpeg.so.13 (scripts/install-deps.sh's /opt/nvjpeg-13,
# or LIB.xz) for --decode gpu, where the machine has none gpu-check finds:
# gpud_cuda_decode, then gpu-e2e.sh jpeg on $DECODE_JPEGS (4096) images,
# PyTorch's DataLoader beside it, its bench lines into nccl.txt (each
# bounded by DECODE_STEP_S, 240). One of --nccl, --nvjpeg at least.
# - the NCCL gpud loads (ncclGetVersion of the library it resolves): LIB's;
# - gpud_cuda_nccl: a one-rank communicator, then two ranks on the one GPU
#   (their float sums, host and device, exact on both; rank 0 fails, not
#   hangs, when rank 1 dies);
# - gpud_cuda_collective: gpud's NCCL path (generations, abort, two
#   training steps' gradients) on one rank;
# - scripts/gpu-e2e.sh nccl: two gpuds training over NCCL on the one GPU
#   against the same job on the ZeroMQ ring, weights within 1e-4.
# Lines PASS / FAIL / NOTRUN go to DIR/nccl.txt (default nccl), the logs
# into DIR/logs.tar.gz. Each step is bounded (NCCL_STEP_S, 150). Exit 1 if
# any step failed.
set -u
cd "$(dirname "$0")/.."
BUNDLE= LIB= NVJPEG= OUT=nccl FMNIST=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
    case "$1" in
        --bundle) BUNDLE=$2; shift ;;
        --nccl) LIB=$2; shift ;;
        --nvjpeg) NVJPEG=$2; shift ;;
        --fmnist) FMNIST=$2; shift ;;
        --out) OUT=$2; shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "gpu-nccl: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$BUNDLE" ] && [ -n "$LIB$NVJPEG" ] ||
    { echo "gpu-nccl: --bundle FILE (scripts/gpu-bundle.sh) and --nccl LIB (scripts/nccl-build.sh) or --nvjpeg LIB" >&2; exit 2; }
. scripts/gpu-bundle-env.sh
bundle_env "$BUNDLE" || exit 2
mkdir -p "$OUT/logs" "$OUT/lib"
LIBDIR=$(cd "$OUT/lib" && pwd)
R=$OUT/nccl.txt
: > "$R"
S=${NCCL_STEP_S:-150}
fails=0
say() {   # say STATUS STEP DETAIL
    printf '%-7s %-32s %s\n' "$1" "$2" "$3" | tee -a "$R"
    [ "$1" = FAIL ] && fails=$((fails + 1))
    return 0
}

say INFO "machine" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"

# unpack LIB (or LIB.xz) into LIBDIR as NAME
carry() {
    case "$1" in
        *.xz) xz -dc "$1" > "$LIBDIR/$2" ;;
        *) cp -L "$1" "$LIBDIR/$2" ;;
    esac
}

if [ -n "$NVJPEG" ]; then
    D=${DECODE_STEP_S:-240}
    if carry "$NVJPEG" libnvjpeg.so.13; then
        export DDPIPE_NVJPEG_LIB="$LIBDIR/libnvjpeg.so.13"
        (cd "$BUILD" && timeout "$D" ctest -R '^gpud_cuda_decode$' --output-on-failure -V) \
            > "$OUT/logs/gpud_cuda_decode.log" 2>&1
        rc=$?
        line=$(grep -E 'decode gpu: nvJPEG|mean diff|CHECK|all checks passed' \
            "$OUT/logs/gpud_cuda_decode.log" | head -n 3 | tr '\n' ' ')
        grep -o -E 'decode bench: .*' "$OUT/logs/gpud_cuda_decode.log" | sed 's/^/BENCH   /' | tee -a "$R"
        if [ $rc -eq 0 ] && ! grep -q 'Skipped\|Not Run' "$OUT/logs/gpud_cuda_decode.log"; then
            say PASS "gpud_cuda_decode" "$line"
        else
            say FAIL "gpud_cuda_decode" "exit $rc: $line"
        fi
        env PY="${PY:-python3}" E2E_JPEGS="${DECODE_JPEGS:-4096}" timeout "$D" \
            sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" jpeg > "$OUT/logs/e2e-jpeg.log" 2>&1
        rc=$?
        cp "$OUT"/e2e/jpeg-ddpipe-gpudec/logs/gpud*.log "$OUT/logs/" 2>/dev/null
        grep -E '^(ddpipe-cuda|torch) resnet18 e2e-jpeg |^end to end|^e2e-jpeg gpud \(--decode gpu\)|^INFO: --decode gpu' \
            "$OUT/logs/e2e-jpeg.log" | sed 's/^/BENCH   /' | tee -a "$R"
        # each of its --decode gpu checks (workers, training) a line; a
        # failed run (it stops at its first failure) says why
        sed -n -E 's/^(PASS|NOTRUN): --decode gpu(.*)/\1\t\2/p' "$OUT/logs/e2e-jpeg.log" > "$OUT/dec.txt"
        while IFS="$(printf '\t')" read -r st rest; do
            say "$st" "e2e-jpeg --decode gpu" "${rest#: }"
        done < "$OUT/dec.txt"
        if [ $rc -ne 0 ] || [ ! -s "$OUT/dec.txt" ]; then
            say FAIL "e2e-jpeg --decode gpu" "exit $rc: $(tail -n 1 "$OUT/logs/e2e-jpeg.log")"
        fi
    else
        say FAIL "nvjpeg library" "cannot read $NVJPEG"
    fi
fi
if [ -z "$LIB" ]; then
    tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs
    [ "$fails" -eq 0 ]
    exit
fi

carry "$LIB" libnccl.so.2 || { say FAIL "nccl library" "cannot read $LIB"; exit 1; }
export LD_LIBRARY_PATH="$LIBDIR:$LD_LIBRARY_PATH"
loaded=$(nccl_loaded "$BUILD/bin/gpud")
code=${loaded%% *} lib=${loaded#* }
case "$lib" in
    "$LIBDIR"/*) say PASS "nccl loaded" "$lib, version code ${code:-unknown}" ;;
    *) say FAIL "nccl loaded" "gpud resolves ${lib:-no libnccl}, not $LIB (version code ${code:-unknown})" ;;
esac
export NCCL_VERSION_CODE=${code:-0}

for t in gpud_cuda_nccl gpud_cuda_collective; do
    (cd "$BUILD" && timeout "$S" ctest -R "^$t\$" --output-on-failure -V) > "$OUT/logs/$t.log" 2>&1
    rc=$?
    line=$(grep -E 'two ranks on one GPU|all checks passed|CHECK\(|rank [01]|skipped' \
        "$OUT/logs/$t.log" | head -n 3 | tr '\n' ' ')
    if grep -q 'Skipped\|Not Run' "$OUT/logs/$t.log"; then
        say FAIL "$t" "skipped on a GPU machine: $line"
    elif [ $rc -eq 0 ]; then
        say PASS "$t" "$line"
    else
        say FAIL "$t" "exit $rc: $line"
    fi
done

if [ -e "$FMNIST/t10k-images-idx3-ubyte.gz" ] || [ -e "$FMNIST/t10k-images-idx3-ubyte" ]; then
    timeout "$S" sh scripts/gpu-e2e.sh "$BUILD/bin" "$FMNIST" "$OUT/e2e" nccl > "$OUT/logs/e2e-nccl.log" 2>&1
    rc=$?
    cp "$OUT"/e2e/nccl-*/logs/gpud*.log "$OUT/logs/" 2>/dev/null
    case $rc in
        0) say PASS "gpud + NCCL 2-process training" "$(tail -n 1 "$OUT/logs/e2e-nccl.log")" ;;
        77) say NOTRUN "gpud + NCCL 2-process training" "$(tail -n 1 "$OUT/logs/e2e-nccl.log")" ;;
        *) say FAIL "gpud + NCCL 2-process training" "exit $rc: $(tail -n 1 "$OUT/logs/e2e-nccl.log")" ;;
    esac
else
    say NOTRUN "gpud + NCCL 2-process training" "no Fashion-MNIST at $FMNIST (--fmnist DIR)"
fi
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs
[ "$fails" -eq 0 ]

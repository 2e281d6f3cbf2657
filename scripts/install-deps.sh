#!/bin/sh
# Install the Debian packages ddpipe builds, runs and tests with.
# Idempotent: packages already present are skipped, apt-get runs only when
# something is missing.
#   scripts/install-deps.sh            build + run deps
#   scripts/install-deps.sh --test     also the test oracles (PyTorch, Pillow, sklearn, supervisor)
#   scripts/install-deps.sh --download DIR   fetch every .deb (with dependencies) into DIR
#   scripts/install-deps.sh --offline DIR    install from the .debs in DIR, no network
# (--test combines with --download/--offline)
# Besides the .debs: oneDNN 3.2 (gpud's cpu backend), which Debian 12 does
# not package (it has 2.6): Intel's CPU-only, GNU-OpenMP wheels from PyPI
# (onednn-cpu-gomp, onednn-devel-cpu-gomp 2023.2.0), checked against their
# SHA-256 and unpacked into $ONEDNN_PREFIX (default /opt/onednn-3.2), where
# CMake looks (DDPIPE_ONEDNN_ROOT). GNU OpenMP, because gpud and the whole
# toolchain use it: one OpenMP runtime per process, no two thread pools.
# Where a CUDA toolkit is installed (nvcc): nvJPEG 13 for gpud's --decode
# gpu, which the CUDA image here lacks: NVIDIA's nvidia-nvjpeg wheel from
# PyPI, checked against its SHA-256, its header and library unpacked into
# $NVJPEG_PREFIX (default /opt/nvjpeg-13), where CMake looks
# (DDPIPE_NVJPEG_ROOT). Optional: without it the build leaves --decode gpu
# out and says so.
set -eu

BUILD="build-essential cmake pkg-config git libzmq3-dev libczmq-dev libmsgpack-dev \
libturbojpeg0-dev libjpeg62-turbo-dev libcairo2-dev libfontconfig-dev zlib1g-dev libpng-dev \
libtiff-dev libwebp-dev libgif-dev \
fonts-dejavu-core dataset-fashion-mnist libmicrohttpd-dev libsodium-dev libjansson-dev \
dpkg-dev gzip python3 python3-pip ca-certificates"
TEST="clang libclang-rt-14-dev python3 python3-torch python3-torchvision python3-pil \
python3-numpy python3-sklearn python3-zmq python3-msgpack python3-yaml supervisor valgrind curl \
chromium chromium-driver python3-selenium slurm-wlm munge"

mode=build
with_test=0
dir=
while [ $# -gt 0 ]; do
    case "$1" in
        --test) with_test=1 ;;
        --download) mode=download; dir="$2"; shift ;;
        --offline) mode=offline; dir="$2"; shift ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "install-deps: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

want="$BUILD"
[ "$with_test" = 1 ] && want="$BUILD $TEST"

SUDO=
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

missing() {
    out=
    for p in $want; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || out="$out $p"
    done
    echo "$out"
}

# ---- oneDNN 3.2 from PyPI ----------------------------------------------------
ONEDNN_PREFIX=${ONEDNN_PREFIX:-/opt/onednn-3.2}
ONEDNN_WHEELS="onednn_cpu_gomp-2023.2.0-py2.py3-none-manylinux1_x86_64.whl 2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb
onednn_devel_cpu_gomp-2023.2.0-py2.py3-none-manylinux1_x86_64.whl 9763c69e8c907e119056bd52ad918ca84ac9ba939d130a99dfa95ccca3e5e284"

onednn_present() {
    [ -f "$ONEDNN_PREFIX/include/oneapi/dnnl/dnnl.h" ] && [ -e "$ONEDNN_PREFIX/lib/libdnnl.so.3" ]
}

# Fetch the two wheels into $1 (pip download: PyPI's index, no install).
onednn_download() {
    mkdir -p "$1"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
        -d "$1" onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 ||
        { echo "install-deps: could not download oneDNN 3.2 from PyPI (pip download" \
               "onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0); check the network" \
               "or pass --offline DIR with the two wheels in DIR" >&2; exit 1; }
}

# Check the wheels in $1 and unpack them into $ONEDNN_PREFIX.
onednn_unpack() {
    set -- "$1" $ONEDNN_WHEELS
    src=$1
    shift
    unz=$(mktemp -d)
    while [ $# -ge 2 ]; do
        [ -f "$src/$1" ] || { echo "install-deps: $src/$1 missing" >&2; exit 1; }
        echo "$2  $src/$1" | sha256sum -c --quiet - ||
            { echo "install-deps: $src/$1 does not match its SHA-256; delete it and retry" >&2; exit 1; }
        python3 -m zipfile -e "$src/$1" "$unz"
        shift 2
    done
    $SUDO mkdir -p "$ONEDNN_PREFIX/lib" "$ONEDNN_PREFIX/include"
    $SUDO cp -r "$unz"/onednn_devel_cpu_gomp-*.data/data/include/. "$ONEDNN_PREFIX/include/"
    # a wheel holds three copies of the library (no links in a zip): keep one
    $SUDO cp "$unz"/onednn_cpu_gomp-*.data/data/lib/libdnnl.so.3.2 "$ONEDNN_PREFIX/lib/"
    $SUDO ln -sf libdnnl.so.3.2 "$ONEDNN_PREFIX/lib/libdnnl.so.3"
    $SUDO ln -sf libdnnl.so.3 "$ONEDNN_PREFIX/lib/libdnnl.so"
    $SUDO cp "$unz"/onednn_cpu_gomp-*.data/data/share/doc/onednn/LICENSE \
        "$unz"/onednn_cpu_gomp-*.data/data/share/doc/onednn/THIRD-PARTY-PROGRAMS "$ONEDNN_PREFIX/"
    rm -rf "$unz"
    echo "install-deps: oneDNN 3.2 in $ONEDNN_PREFIX"
}

onednn_install() {
    onednn_present && return 0
    if [ "$mode" = offline ]; then
        onednn_unpack "$dir"
    else
        # shell functions share their variables: the download folder has a name
        # of its own, not onednn_unpack's
        dl=$(mktemp -d)
        onednn_download "$dl"
        onednn_unpack "$dl"
        rm -rf "$dl"
    fi
}

# ---- nvJPEG 13 from PyPI (only where CUDA is) -------------------------------
NVJPEG_PREFIX=${NVJPEG_PREFIX:-/opt/nvjpeg-13}
NVJPEG_WHEEL="nvidia_nvjpeg-13.3.2.43-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
NVJPEG_SHA=27f9c4a25a73f1d1ad35c342c8d657c8ff43e23877f338ef15fb2602ac2e5aa8

have_cuda() {
    command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]
}

nvjpeg_download() {
    mkdir -p "$1"
    python3 -m pip download -q --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 -d "$1" nvidia-nvjpeg==13.3.2.43 ||
        { echo "install-deps: could not download nvJPEG from PyPI (pip download" \
               "nvidia-nvjpeg==13.3.2.43); gpud's --decode gpu is left out of the build" >&2
          return 1; }
}

# Check the wheel in $1 and unpack its header and library into $NVJPEG_PREFIX.
nvjpeg_unpack() {
    [ -f "$1/$NVJPEG_WHEEL" ] || { echo "install-deps: $1/$NVJPEG_WHEEL missing;" \
        "--decode gpu is left out of the build" >&2; return 1; }
    echo "$NVJPEG_SHA  $1/$NVJPEG_WHEEL" | sha256sum -c --quiet - ||
        { echo "install-deps: $1/$NVJPEG_WHEEL does not match its SHA-256; delete it and" \
               "retry" >&2; exit 1; }
    unz=$(mktemp -d)
    python3 -m zipfile -e "$1/$NVJPEG_WHEEL" "$unz"
    $SUDO mkdir -p "$NVJPEG_PREFIX/include" "$NVJPEG_PREFIX/lib"
    $SUDO cp "$unz/nvidia/cu13/include/nvjpeg.h" "$NVJPEG_PREFIX/include/"
    $SUDO cp "$unz/nvidia/cu13/lib/libnvjpeg.so.13" "$NVJPEG_PREFIX/lib/"
    $SUDO cp "$unz"/nvidia_nvjpeg-*.dist-info/licenses/License.txt "$NVJPEG_PREFIX/"
    rm -rf "$unz"
    echo "install-deps: nvJPEG 13.3.2 in $NVJPEG_PREFIX"
}

nvjpeg_install() {
    have_cuda || return 0
    [ -f "$NVJPEG_PREFIX/include/nvjpeg.h" ] && [ -f "$NVJPEG_PREFIX/lib/libnvjpeg.so.13" ] &&
        return 0
    if [ "$mode" = offline ]; then
        nvjpeg_unpack "$dir" || true
    else
        dl=$(mktemp -d)
        if nvjpeg_download "$dl"; then
            nvjpeg_unpack "$dl" || true
        fi
        rm -rf "$dl"
    fi
}

case "$mode" in
download)
    mkdir -p "$dir"
    $SUDO apt-get update -q
    # every package and its whole dependency closure, so a bare machine can install offline
    deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances $want | grep '^[a-zA-Z0-9]' | sort -u)
    (cd "$dir" && apt-get download $deps 2>/dev/null || true)
    echo "install-deps: $(ls "$dir"/*.deb | wc -l) packages in $dir"
    onednn_download "$dir"
    nvjpeg_download "$dir" || true
    ;;
offline)
    m=$(missing)
    if [ -n "$m" ]; then
        $SUDO dpkg -i "$dir"/*.deb || $SUDO apt-get -o Dir::Cache::archives="$dir" -y --no-download -f install
    fi
    onednn_install
    nvjpeg_install
    ;;
*)
    m=$(missing)
    if [ -z "$m" ]; then
        echo "install-deps: all packages present"
    else
        echo "install-deps: installing$m"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -q
        $SUDO apt-get install -y -q --no-install-recommends $m
    fi
    onednn_install
    nvjpeg_install
    ;;
esac

#!/bin/sh
# Install the Debian packages ddpipe builds, runs and tests with.
# Idempotent: packages already present are skipped, apt-get runs only when
# something is missing.
#   scripts/install-deps.sh            build + run deps
#   scripts/install-deps.sh --test     also the test oracles (PyTorch, Pillow, sklearn, supervisor)
#   scripts/install-deps.sh --download DIR   fetch every .deb (with dependencies) into DIR
#   scripts/install-deps.sh --offline DIR    install from the .debs in DIR, no network
# (--test combines with --download/--offline)
set -eu

BUILD="build-essential cmake pkg-config git libzmq3-dev libczmq-dev libmsgpack-dev \
libturbojpeg0-dev libjpeg62-turbo-dev libdnnl-dev libcairo2-dev libfontconfig-dev zlib1g-dev libpng-dev \
libtiff-dev libwebp-dev libgif-dev \
fonts-dejavu-core dataset-fashion-mnist libmicrohttpd-dev libsodium-dev libjansson-dev \
dpkg-dev gzip"
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

case "$mode" in
download)
    mkdir -p "$dir"
    $SUDO apt-get update -q
    # every package and its whole dependency closure, so a bare machine can install offline
    deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances $want | grep '^[a-zA-Z0-9]' | sort -u)
    (cd "$dir" && apt-get download $deps 2>/dev/null || true)
    echo "install-deps: $(ls "$dir"/*.deb | wc -l) packages in $dir"
    ;;
offline)
    m=$(missing)
    [ -z "$m" ] && { echo "install-deps: all packages present"; exit 0; }
    $SUDO dpkg -i "$dir"/*.deb || $SUDO apt-get -o Dir::Cache::archives="$dir" -y --no-download -f install
    ;;
*)
    m=$(missing)
    if [ -z "$m" ]; then
        echo "install-deps: all packages present"
        exit 0
    fi
    echo "install-deps: installing$m"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends $m
    ;;
esac

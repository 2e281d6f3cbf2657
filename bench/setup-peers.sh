#!/bin/sh
# The second PyTorch peer of the CPU benchmarks: PyTorch 2.15.0 and
# torchvision 0.29.2 in a virtual environment, bench/.peers/torch-2.15
# (ignored by git). A benchmark dependency only: no test needs it. The first
# peer stays Debian's PyTorch 1.13 / torchvision 0.14 (/usr/bin/python3,
# python3-torch); bench/peers.sh picks both up, every bench that compares
# with PyTorch runs both in the same run.
#
#   bench/setup-peers.sh          install (a second run only checks: seconds)
#   FORCE=1 bench/setup-peers.sh  remove the environment and install anew
#
# What is installed, and why this much: PyPI serves torch 2.15.0 for Linux
# only as the CUDA build (a 539 MB wheel whose Requires-Dist pins
# cuda-toolkit 13.2.2, cuDNN, NCCL, NVSHMEM, cuSPARSELt, triton). Installed
# with --no-deps and only its pure-Python dependencies it does not import:
# libtorch.so links libtorch_cuda.so, which needs libcufile, libcusparseLt,
# libnvshmem_host, cuBLAS, cuDNN, ... at load time, even to run on the CPU
# ("ImportError: libcufile.so.0: cannot open shared object file"). So this
# installs the wheels' full declared dependency set as pip resolves it
# (2.9 GB downloaded, 5.4 GB on disk; about 2 minutes on a 2-core box), which
# pip check accepts and which needs no CUDA driver: nothing here touches a
# GPU, and after `import torch` no library outside the environment but the
# system's libc, libstdc++ and friends is mapped. A hand-picked
# subset (no triton, cuSOLVER, cuda-bindings) would save about 0.5 GB of the
# 2.9 but break on the next pin change; disk is cheap, a broken peer is not.
# The CPU work runs on the oneDNN built into libtorch_cpu (printed below:
# torch 2.15.0+cu132 has oneDNN 3.13.3; Debian's 1.13 has 2.6.3).
#
# Needs /usr/bin/python3 (3.11) with venv: python3-venv is apt-get installed
# when missing (as root). Downloads from PyPI with the ordinary pip client
# (--no-cache-dir: the wheels would double the disk used).
set -eu
cd "$(dirname "$0")/.."
VENV=bench/.peers/torch-2.15
TORCH=2.15.0
VISION=0.29.2
t0=$(date +%s)

check() {   # the installed peer, or exit 1
    "$VENV/bin/python" - "$TORCH" "$VISION" <<'EOF'
import sys
import torch, torchvision
want_t, want_v = sys.argv[1], sys.argv[2]
got_t, got_v = torch.__version__.split("+")[0], torchvision.__version__.split("+")[0]
if (got_t, got_v) != (want_t, want_v):
    sys.exit("torch %s / torchvision %s, want %s / %s" % (got_t, got_v, want_t, want_v))
if not torch.backends.mkldnn.is_available():
    sys.exit("torch.backends.mkldnn.is_available() is False")
# a little CPU work through oneDNN: one ResNet-18 forward and a conv backward
m = torchvision.models.resnet18(weights=None).eval()
with torch.no_grad():
    y = m(torch.randn(1, 3, 64, 64))
assert y.shape == (1, 1000), y.shape
c = torch.nn.Conv2d(3, 8, 3)
c(torch.randn(2, 3, 16, 16)).sum().backward()
print("torch %s, torchvision %s, mkldnn available: %s, cuda available: %s (not used)" % (
    torch.__version__, torchvision.__version__, torch.backends.mkldnn.is_available(),
    torch.cuda.is_available()))
print("\n".join(torch.__config__.show().splitlines()[:8]))
EOF
}

if [ "${FORCE:-0}" = 1 ]; then
    rm -rf "$VENV"
fi
if [ -x "$VENV/bin/python" ] && msg=$(check 2>&1); then
    echo "setup-peers: torch $TORCH already in $VENV"
    echo "$msg"
else
    if command -v dpkg >/dev/null && ! dpkg -s python3-venv >/dev/null 2>&1; then
        echo "setup-peers: installing python3-venv"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
    fi
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    /usr/bin/python3 -m venv "$VENV"
    "$VENV/bin/pip" install --no-cache-dir --disable-pip-version-check -q \
        "torch==$TORCH" "torchvision==$VISION"
    "$VENV/bin/pip" check
    check
    echo "setup-peers: installed, $(du -sh "$VENV" | cut -f1) in $VENV"
fi
echo "setup-peers: $(( $(date +%s) - t0 )) s"
echo "python: $(pwd)/$VENV/bin/python"

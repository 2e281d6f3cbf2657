#!/bin/sh
# Install what is missing, build, and run a real job: Fashion-MNIST test set
# (10,000 images) evaluated by a WideResNet through all four daemons with two
# workers. Ends with the metrics and a run directory in runs/demo.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
build/bin/ddpipe eval --data idx:/usr/share/datasets/fashion-mnist/t10k \
    --model wideresnet --channels 16,32,64,128 --weights demo/wrn-fmnist.safetensors \
    --workers 2 --batch-size 64 --predictions topk --out runs/demo --overwrite "$@"
echo "run directory: runs/demo ($(ls runs/demo | tr '\n' ' '))"

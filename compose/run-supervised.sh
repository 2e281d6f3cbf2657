#!/bin/sh
# Run one ddpipe job under supervisord with defaults for every variable of
# compose/supervisord.conf; any of them can be overridden from the environment.
#   compose/run-supervised.sh            (Fashion-MNIST demo, 2 workers)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
: "${DDPIPE_BIN:=$root/build/bin}"
: "${DDPIPE_OUT:=$root/runs/supervised}"
: "${DDPIPE_DATA:=idx:/usr/share/datasets/fashion-mnist/t10k}"
: "${DDPIPE_MODEL:=wideresnet}"
: "${DDPIPE_WEIGHTS:=$root/demo/wrn-fmnist.safetensors}"
: "${DDPIPE_MODEL_ARGS:=--channels 16,32,64,128 --in-channels 1}"
: "${DDPIPE_LOADER_ARGS:=--channels 1}"
: "${DDPIPE_WORKERS:=2}"
: "${DDPIPE_BATCH:=64}"
: "${DDPIPE_PORT:=5560}"
: "${DDPIPE_REDUCER:=tcp://127.0.0.1:$DDPIPE_PORT}"
: "${DDPIPE_EVENTS:=tcp://127.0.0.1:$((DDPIPE_PORT + 1))}"
: "${DDPIPE_LOADER:=tcp://127.0.0.1:$((DDPIPE_PORT + 2))}"
: "${DDPIPE_TAP:=tcp://127.0.0.1:$((DDPIPE_PORT + 3))}"
export DDPIPE_BIN DDPIPE_OUT DDPIPE_DATA DDPIPE_MODEL DDPIPE_WEIGHTS DDPIPE_MODEL_ARGS \
    DDPIPE_LOADER_ARGS DDPIPE_WORKERS DDPIPE_BATCH DDPIPE_REDUCER DDPIPE_EVENTS DDPIPE_LOADER DDPIPE_TAP
mkdir -p "$DDPIPE_OUT/logs"
exec supervisord -n -c "$here/supervisord.conf"

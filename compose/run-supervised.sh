#!/bin/sh
# Run one ddpipe job under supervisord with defaults for every variable of
# compose/supervisord.conf; any of them can be overridden from the environment.
# Returns when the job has ended, with reducerd's exit status (0 the job
# finished; 3 reducerd restarted and the job's state was lost; else failed),
# after stopping supervisord and every daemon.
#   compose/run-supervised.sh                                  (Fashion-MNIST demo, 2 workers)
#   DDPIPE_MODEL=resnet18 DDPIPE_DATA=/data/val DDPIPE_WEIGHTS=r18.safetensors compose/run-supervised.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
# From the source tree: build/bin and runs/ there. Installed (the .deb puts
# this in /usr/share/ddpipe/compose): the daemons on PATH, runs/ here.
if [ -x "$root/build/bin/gpud" ] || ! command -v gpud >/dev/null 2>&1; then
    : "${DDPIPE_BIN:=$root/build/bin}"
    : "${DDPIPE_OUT:=$root/runs/supervised}"
else
    : "${DDPIPE_BIN:=$(dirname "$(command -v gpud)")}"
    : "${DDPIPE_OUT:=$PWD/runs/supervised}"
fi
: "${DDPIPE_DATA:=idx:/usr/share/datasets/fashion-mnist/t10k}"
: "${DDPIPE_MODEL:=wideresnet}"
# Per-model defaults apply only to variables that are unset: an empty value
# (DDPIPE_MODEL_ARGS=) means "no extra flags".
case "$DDPIPE_MODEL" in
wideresnet)
    : "${DDPIPE_WEIGHTS=$root/demo/wrn-fmnist.safetensors}"
    : "${DDPIPE_MODEL_ARGS=--channels 16,32,64,128 --in-channels 1}"
    : "${DDPIPE_LOADER_ARGS=--channels 1}" ;;
*)
    : "${DDPIPE_MODEL_ARGS=}"
    : "${DDPIPE_LOADER_ARGS=--resize 256 --crop 224 --channels 3}" ;;
esac
if [ -z "${DDPIPE_WEIGHTS:-}" ]; then
    echo "run-supervised.sh: set DDPIPE_WEIGHTS to the $DDPIPE_MODEL safetensors file" >&2
    exit 2
fi
# The job's identity (docs/SECURITY.md "Job identity"): every daemon reads
# DDPIPE_JOB; another job's daemons (same CURVE keys or not) are refused,
# and a restarted reducerd knows its earlier peers by it. Drawn per run.
: "${DDPIPE_JOB:=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
: "${DDPIPE_WORKERS:=2}"
: "${DDPIPE_BATCH:=64}"
: "${DDPIPE_PORT:=5560}"
: "${DDPIPE_REDUCER:=tcp://127.0.0.1:$DDPIPE_PORT}"
: "${DDPIPE_EVENTS:=tcp://127.0.0.1:$((DDPIPE_PORT + 1))}"
: "${DDPIPE_LOADER:=tcp://127.0.0.1:$((DDPIPE_PORT + 2))}"
: "${DDPIPE_TAP:=tcp://127.0.0.1:$((DDPIPE_PORT + 3))}"
: "${DDPIPE_METRICS_HTTP:=127.0.0.1:$((DDPIPE_PORT + 4))}"
export DDPIPE_JOB DDPIPE_BIN DDPIPE_OUT DDPIPE_DATA DDPIPE_MODEL DDPIPE_WEIGHTS DDPIPE_MODEL_ARGS \
    DDPIPE_LOADER_ARGS DDPIPE_WORKERS DDPIPE_BATCH DDPIPE_REDUCER DDPIPE_EVENTS DDPIPE_LOADER \
    DDPIPE_TAP DDPIPE_METRICS_HTTP
# A previous run's results must never look like this run's: refuse, or with
# DDPIPE_OVERWRITE=1 move the whole previous run directory aside first.
for f in summary.json predictions.csv metrics.csv classification_report.txt; do
    [ -e "$DDPIPE_OUT/$f" ] || continue
    if [ "${DDPIPE_OVERWRITE:-0}" = 1 ]; then
        old="$DDPIPE_OUT.previous-$(date +%Y%m%dT%H%M%S)"
        mv "$DDPIPE_OUT" "$old"
        echo "run-supervised.sh: the previous run in $DDPIPE_OUT moved to $old" >&2
    else
        echo "run-supervised.sh: $DDPIPE_OUT holds a previous run ($f): set DDPIPE_OVERWRITE=1" \
             "to move it aside, or choose another DDPIPE_OUT" >&2
        exit 2
    fi
    break
done
mkdir -p "$DDPIPE_OUT/logs"
log="$DDPIPE_OUT/logs/supervisord.log"
: >"$log"
conf="$here/supervisord.conf"
# supervisorctl's socket sits next to the conf: installed read-only, run a copy
if [ ! -w "$here" ]; then
    cp "$here/supervisord.conf" "$DDPIPE_OUT/supervisord.conf"
    conf="$DDPIPE_OUT/supervisord.conf"
fi
ctl() { supervisorctl -c "$conf" "$@"; }

supervisord -n -c "$conf" &
sup=$!
stop() {
    ctl shutdown >/dev/null 2>&1 || kill "$sup" 2>/dev/null || true
    wait "$sup" 2>/dev/null || true
}
trap 'stop; exit 130' INT TERM

# Unexpected exits of program $1 (supervisord's log): a daemon that failed
# this often (e.g. wrong weights) will not get better by restarting, however
# long each run took - supervisord's own FATAL needs each run to end within
# startsecs, which supervisord.conf sets to 0 (a daemon may finish its job
# in under a second: an exit then must not count as a failed start).
crashes() { grep -c "exited: $1 (exit status [0-9]*; not expected)" "$log" || true; }
gave_up() {
    [ "$(crashes reducerd)" -ge 4 ] && return 0
    [ "$(crashes loaderd)" -ge 4 ] && return 0
    w=0
    while [ $w -lt "$DDPIPE_WORKERS" ]; do
        [ "$(crashes "gpud_$w")" -ge 4 ] || return 1
        w=$((w + 1))
    done
    return 0
}

# The job has ended when reducerd stays down: EXITED (an expected exit: 0 or
# 3) or FATAL (it kept crashing). The daemons bound every wait, so this ends.
# A job whose loaderd or every gpud gave up (FATAL, or crashed 4 times)
# cannot finish: that ends it too, as a failure.
state=""
while kill -0 "$sup" 2>/dev/null; do
    status=$(ctl status 2>/dev/null) || true
    state=$(printf '%s\n' "$status" | awk '$1 == "reducerd" {print $2}')
    case "$state" in EXITED|FATAL) break ;; esac
    if printf '%s\n' "$status" | grep -q '^loaderd  *FATAL' ||
        { printf '%s\n' "$status" | grep -q '^gpud:' &&
          ! printf '%s\n' "$status" | grep '^gpud:' | grep -qv FATAL; } || gave_up; then
        state=GAVEUP
        break
    fi
    sleep 1
done
# the others follow reducerd's STOP (bounded by their own timeouts)
i=0
[ "$state" != GAVEUP ] || i=120
while [ $i -lt 120 ] && ctl status 2>/dev/null | grep -v '^reporterd' | grep -Eq 'RUNNING|STARTING|BACKOFF'; do
    sleep 1
    i=$((i + 1))
done
rc=$(sed -n 's/.*exited: reducerd (exit status \([0-9]*\);.*/\1/p' "$log" | tail -n 1)
stop
trap - INT TERM
if [ "$state" = FATAL ] || [ "$state" = GAVEUP ]; then
    echo "run-supervised.sh: the job failed: a daemon kept crashing (supervisorctl FATAL," \
         "or 4 unexpected exits);" \
         "see $DDPIPE_OUT/logs/" >&2
    exit 1
fi
[ -n "$rc" ] || rc=1
[ "$rc" -eq 0 ] || echo "run-supervised.sh: the job failed (reducerd exit $rc); see $DDPIPE_OUT/logs/" >&2
exit "$rc"

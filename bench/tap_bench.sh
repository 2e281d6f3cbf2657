#!/bin/sh
# Tap benchmark: does watching a job slow it down? The demo eval (WideResNet
# 16,32,64,128 on Fashion-MNIST t10k, 2 workers, --predictions so the big
# per-sample chunks cross the tap too) runs alternately with 0 and with N
# monitors (bench/tap_bench_sub.py: python3-zmq, decodes every event)
# subscribed to reporterd's tap; the job's wall time is compared.
#
#   bench/tap_bench.sh [BUILD_DIR] [REPS] [MONITORS]
#
# BUILD_DIR: a build without sanitizers (default build). Defaults: 3 reps,
# 10 monitors. Monitors start (and finish importing zmq) before the job, so
# their start-up is not counted against it. monitors_cpu_s is the CPU the N
# monitors used in all (start-up included); load1 the machine's 1-minute
# load average after the job (on a shared machine, the noise).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
reps=${2:-3}
mons=${3:-10}
py=/usr/bin/python3
work=$(mktemp -d /tmp/ddpipe-tapbench.XXXXXX)
trap 'rm -rf "$work"' EXIT

job() { # $1 = out dir, $2 = tap endpoint; prints the wall seconds of the job
    /usr/bin/time -f %e -o "$work/time" "$build/bin/ddpipe" eval \
        --data idx:/usr/share/datasets/fashion-mnist/t10k --model wideresnet \
        --channels 16,32,64,128 --weights "$root/demo/wrn-fmnist.safetensors" \
        --workers 2 --predictions --quiet --out "$1" --tap "$2" > /dev/null
    cat "$work/time"
}

echo "rep monitors wall_s monitors_cpu_s load1 events_per_monitor"
for r in $(seq 1 "$reps"); do
    for n in 0 "$mons"; do
        out="$work/run-$r-$n"
        tap="ipc://$work/tap-$r-$n"
        i=0
        while [ "$i" -lt "$n" ]; do
            /usr/bin/time -f "%U %S" -o "$work/cpu-$r-$n-$i" \
                $py "$here/tap_bench_sub.py" "$tap" 120 > "$work/sub-$r-$n-$i" &
            i=$((i + 1))
        done
        [ "$n" -gt 0 ] && sleep 5
        t=$(job "$out" "$tap")
        wait
        ev=$(cat "$work"/sub-"$r"-"$n"-* 2>/dev/null | awk '{s = s $2 " "} END {print s}')
        cpu=$(cat "$work"/cpu-"$r"-"$n"-* 2>/dev/null | awk '{s += $1 + $2} END {printf "%.2f", s}')
        load=$(cut -d' ' -f1 /proc/loadavg)
        echo "$r $n $t $cpu $load ${ev:--}"
    done
done

#!/bin/sh
# Elastic training (docs/ELASTIC.md, issue 13): what a lost rank costs, and
# what the per-step commit costs a job that loses none.
#
#   bench/elastic_bench.sh AFTER_BUILD [BEFORE_BUILD]
#   RUNS=3 N=6144 G=128 WS="3 2" bench/elastic_bench.sh build-rel build-before
#   RECOVERY=0 bench/elastic_bench.sh build-rel build-before    (the cost only)
#
# recovery  `ddpipe train` of W ranks (WideResNet 8,16,32,64, global batch G,
#           one thread per rank) where rank 1 SIGKILLs itself before step
#           FAULT (--fault 1:FAULT). Measured from the victim's "dying before
#           the step" log line to the first step of generation 1 a survivor
#           commits ("step S (epoch e, generation 1)", --verbose), so the redone
#           step's own compute is in it; W = 3 -> 2 and 2 -> 1, with the default
#           timeouts (--worker-timeout 10, --ring-timeout 60) and with
#           --ring-timeout 1. One step's time without failures is printed beside
#           it (the run's mean step time before the fault).
# cost      with BEFORE_BUILD (a build of the code before the commit existed):
#           the train_scaling.sh job (N images, G, 2 epochs, W = 2, one thread
#           each) RUNS times with each build, alternating, on the same machine;
#           reducerd's train img/s of the last epoch, mean and each run.
set -eu

cd "$(dirname "$0")/.."
AFTER=${1:?usage: bench/elastic_bench.sh AFTER_BUILD [BEFORE_BUILD]}
BEFORE=${2:-}
RUNS=${RUNS:-3}
N=${N:-6144}
G=${G:-128}
RN=${RN:-2048}
FAULT=${FAULT:-6}
DATA=${DATA:-idx:/usr/share/datasets/fashion-mnist/train}
PY=/usr/bin/python3

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"

# recovery W EXTRA...: prints "death -> first committed step of generation 1" seconds
recovery() {
    w=$1
    shift
    out="$dir/rec-w$w-$$-$(date +%s%N)"
    "$AFTER/bin/ddpipe" train --data "$DATA" --limit "$RN" --model wideresnet --channels 8,16,32,64 \
        --workers "$w" --global-batch-size "$G" --epochs 1 --lr 0.05 --momentum 0.9 --seed 1 \
        --threads 1 --loader-threads 1 --quiet --verbose --fault "1:$FAULT" "$@" --out "$out" \
        >"$out.txt" 2>&1 || { echo "W=$w $* failed:" >&2; tail -20 "$out.txt" >&2; exit 1; }
    $PY - "$out/logs" "$FAULT" <<'EOF'
import datetime, glob, re, sys
logs, fault = sys.argv[1], int(sys.argv[2])
def t(line):
    return datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").timestamp()
death, first, steps = None, None, []
for path in glob.glob(logs + "/gpud.*.log"):
    for line in open(path, errors="replace"):
        if "reached: dying before the step" in line:
            death = t(line)
        m = re.search(r"step (\d+) \(epoch \d+, generation (\d+)\)", line)
        if m and m.group(2) == "1" and (first is None or t(line) < first):
            first = t(line)
        if m and m.group(2) == "0" and path.endswith("gpud.0.log"):
            steps.append(t(line))
step = (steps[-1] - steps[0]) / (len(steps) - 1) if len(steps) > 1 else float("nan")
print("%.2f %.2f" % (first - death, step))
EOF
}

[ "${RECOVERY:-1}" = 1 ] && echo && \
    echo "| ranks | timeouts | death -> first committed step of the survivors (s) | one step (s) |" &&
    echo "|---|---|---|---|"
[ "${RECOVERY:-1}" = 1 ] || WS=" "
for w in ${WS:-3 2}; do
    for t in default "--ring-timeout 1"; do
        if [ "$t" = default ]; then set --; else set -- $t; fi
        r=$(recovery "$w" "$@")
        echo "| $w -> $((w - 1)) | $t | ${r% *} | ${r#* } |"
    done
done

[ -n "$BEFORE" ] || exit 0
# cost: the same failure-free job with each build, alternating
cost() {
    out="$dir/cost-$(basename "$1")-$2"
    "$1/bin/ddpipe" train --data "$DATA" --limit "$N" --model wideresnet --channels 8,16,32,64 \
        --workers 2 --global-batch-size "$G" --epochs 2 --lr 0.05 --momentum 0.9 --seed 1 \
        --threads 1 --loader-threads 1 --quiet --out "$out" >"$out.txt" 2>&1 || {
        echo "$1 failed:" >&2; tail -20 "$out.txt" >&2; exit 1; }
    awk -F, '$3 == "train" { v = $8 } END { print v }' "$out/metrics.csv"
}
b="" a=""
for i in $(seq "$RUNS"); do
    b="$b $(cost "$BEFORE" "$i")"
    a="$a $(cost "$AFTER" "$i")"
done
echo
echo "| build | train img/s (last epoch), each run | mean |"
echo "|---|---|---|"
for side in before after; do
    if [ $side = before ]; then v=$b; else v=$a; fi
    echo "$side $v" | awk '{ s = 0; l = ""; for (i = 2; i <= NF; i++) { s += $i;
        l = l sprintf(" %.1f", $i) }; printf "| %s |%s | %.1f |\n", $1, l, s / (NF - 1) }'
done
echo "$b|$a" | awk -F'|' '{ nb = split($1, x, " "); na = split($2, y, " "); sb = sa = 0;
    for (i = 1; i <= nb; i++) sb += x[i]; for (i = 1; i <= na; i++) sa += y[i];
    printf "commit cost: %.2f %% of train img/s\n", 100 * (1 - (sa / na) / (sb / nb)) }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

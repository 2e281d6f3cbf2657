#!/bin/sh
# The loader against the machine's decode limit (>= 90 %: docs/DESIGN.md
# "Quality bars"), in the same run, and against torchvision's DataLoader with as many workers as
# cores (issue 14: >= 2.2x):
#   decode_limit  read + libjpeg-turbo DCT-scaled decode on T threads, nothing else
#   loader_bench  ddpipe's loader library: read, decode, Resize, CenterCrop, batches
#   loaderd_load  a real loaderd daemon handing its batches over ZeroMQ to
#                 simulated gpud ranks that ack at once (sockets, ISSUED, tokens)
#   loader_torch  torchvision ImageFolder + DataLoader(num_workers=T), uint8,
#                 under every PyTorch peer (bench/peers.sh: Debian's 1.13 and
#                 the 2.15 of bench/setup-peers.sh; PEERS=1.13 for one), once
#                 after the rounds; one ratio per peer
# The three ddpipe/limit runs are interleaved ROUNDS times and the median
# of each is reported, because the machine is shared: wall-clock img/s
# (what the target is about) and CPU ms per image (steadier under load).
#
#   bench/loader_limit.sh [BUILD_DIR] [IMAGES] [THREADS] [ROUNDS]
#   env: SIZE=500x375 RESIZE=32 CROP=16 (the issue's loading-bound job)
#
# BUILD_DIR: a Release build (bench/decode_limit, bench/loaderd_load,
# bin/loader_bench, bin/loaderd, bin/ddpipe-mkjpeg).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/peers.sh"
peers_init "$(dirname "$here")"
build=${1:-build}
images=${2:-3840}
threads=${3:-$(nproc)}
rounds=${4:-3}
size=${SIZE:-500x375}
resize=${RESIZE:-32}
crop=${CROP:-16}
for tool in bench/decode_limit bench/loaderd_load bin/loader_bench bin/loaderd bin/ddpipe-mkjpeg; do
  [ -x "$build/$tool" ] || { echo "loader_limit: $build/$tool missing; build first" >&2; exit 1; }
done
data=$(mktemp -d "${TMPDIR:-/tmp}/ddpipe-loaderlimit.XXXXXX")
trap 'rm -rf "$data"' EXIT
"$build/bin/ddpipe-mkjpeg" --synthetic "$images" "$data" --size "$size" --classes 4 --quality 90 >/dev/null
echo "$images synthetic $size JPEGs (q90), Resize($resize) CenterCrop($crop), $threads threads," \
     "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "CPU flags: $(grep -o -w -E 'avx512[a-z_0-9]*|amx[a-z_]*|avx2|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"

num() { sed -n "s#.*[^0-9.]\([0-9.]*\) $1.*#\1#p" | head -1; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$data/limit" ; : >"$data/lib" ; : >"$data/daemon"
: >"$data/limit.cpu" ; : >"$data/lib.cpu" ; : >"$data/daemon.cpu"
i=0
while [ "$i" -lt "$rounds" ]; do
  out=$("$build/bench/decode_limit" "$data" --threads "$threads" --resize "$resize" --epochs 1)
  echo "$out" | num "img/s" >>"$data/limit"; echo "$out" | num "CPU ms/img" >>"$data/limit.cpu"
  out=$("$build/bin/loader_bench" "$data" --threads "$threads" --resize "$resize" --crop "$crop" \
        --epochs 1 --dct 1)
  echo "$out" | num "img/s" >>"$data/lib"; echo "$out" | num "CPU ms/img" >>"$data/lib.cpu"
  out=$("$build/bench/loaderd_load" "$build/bin/loaderd" "$data" --ranks "$threads" --batch 32 \
        --window 4 --threads "$threads" --resize "$resize" --crop "$crop")
  echo "$out" | num "samples/s" >>"$data/daemon"
  echo "$out" | sed -n 's/.* \([0-9.]*\) us per sample.*/\1/p' | awk '{print $1 / 1000}' >>"$data/daemon.cpu"
  i=$((i + 1))
done
lim=$(median <"$data/limit"); limc=$(median <"$data/limit.cpu")
printf '%-34s %10s %12s %14s %12s\n' "" "img/s" "CPU ms/img" "of the limit" "CPU ratio"
printf '%-34s %10s %12s %14s %12s\n' "decode limit (read + decode)" "$lim" "$limc" "100 %" "1.00"
for k in lib daemon; do
  r=$(median <"$data/$k"); c=$(median <"$data/$k.cpu")
  name=$([ "$k" = lib ] && echo "ddpipe loader library" || echo "loaderd daemon (sockets)")
  printf '%-34s %10s %12s %14s %12s\n' "$name" "$r" "$c" \
    "$(awk -v a="$r" -v b="$lim" 'BEGIN {printf "%.1f %%", 100 * a / b}')" \
    "$(awk -v a="$c" -v b="$limc" 'BEGIN {printf "%.2f", a / b}')"
done
peers_describe
d=$(median <"$data/daemon")
line=""
for p in $PEER_LABELS; do
  tv=$("$(peer_py "$p")" "$here/loader_torch.py" "$data" --threads "$threads" --epochs 1 \
       --resize "$resize" --crop "$crop" --to uint8)
  tvr=$(echo "$tv" | num "img/s")
  tvc=$(echo "$tv" | num "CPU ms/img")
  echo "torchvision $p DataLoader ($threads workers, uint8): $tvr img/s, $tvc CPU ms/img;" \
       "loaderd / torchvision $p: $(awk -v a="$d" -v b="$tvr" 'BEGIN {printf "%.2fx", a / b}')"
  line="$line${line:+  }$(awk -v a="$d" -v b="$tvr" -v p="$p" 'BEGIN {printf "vs torch %s: %.2fx", p, a / b}')"
done
echo "$line   (loaderd daemon img/s / torchvision DataLoader img/s)"

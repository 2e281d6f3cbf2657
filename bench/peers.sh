# The PyTorch peers of the CPU benchmarks, sourced (". bench/peers.sh") by
# every bench that compares with PyTorch: each runs all the peers chosen
# here in the same run, interleaved with ddpipe, and prints one ratio per
# peer ("vs torch 1.13: 1.52x  vs torch 2.15: 1.31x").
#
#   PEERS="1.13 2.15"   the default: 1.13 is Debian's (/usr/bin/python3,
#                       python3-torch), 2.15 the virtual environment made by
#                       bench/setup-peers.sh (bench/.peers/torch-2.15); when
#                       that is missing the bench says so and goes on with
#                       1.13 alone
#   PEERS=1.13          one of them; PEERS=2.15 fails if it is not installed
#   PEERS="1.13 x=/some/python"   LABEL=PYTHON: any other python with torch
#   PY=/some/python     (the old knob, when PEERS is unset) that python alone,
#                       labelled with its torch's major.minor version
#
# After peers_init ROOT: $PEER_LABELS (the labels, in order) and
# peer_py LABEL (its python); peers_describe prints one line per peer.

PEERS_VENV_REL=bench/.peers/torch-2.15

peers_init() {   # ROOT: the repository root
    _root=$1
    PEER_LABELS=""
    PEER_SPECS=""
    _default=0
    if [ -n "${PEERS:-}" ]; then
        _want=$PEERS
    elif [ -n "${PY:-}" ]; then
        _v=$("$PY" -c 'import torch; print(".".join(torch.__version__.split(".")[:2]))') ||
            { echo "peers: PY=$PY has no torch" >&2; exit 1; }
        _want="$_v=$PY"
    else
        _want="1.13 2.15"
        _default=1
    fi
    for _p in $_want; do
        case "$_p" in
            *=*) _label=${_p%%=*}; _py=${_p#*=} ;;
            1.13) _label=1.13; _py=/usr/bin/python3 ;;
            2.15) _label=2.15; _py=$_root/$PEERS_VENV_REL/bin/python ;;
            *) echo "peers: unknown peer '$_p' (1.13, 2.15 or LABEL=PYTHON)" >&2; exit 2 ;;
        esac
        if [ ! -x "$_py" ]; then
            if [ "$_default" = 1 ] && [ "$_label" = 2.15 ]; then
                echo "torch 2.15 peer not installed: run bench/setup-peers.sh" >&2
                continue
            fi
            echo "peers: torch $_label: $_py not found" \
                 "$([ "$_label" = 2.15 ] && echo '(run bench/setup-peers.sh)')" >&2
            exit 1
        fi
        PEER_LABELS="$PEER_LABELS${PEER_LABELS:+ }$_label"
        PEER_SPECS="$PEER_SPECS${PEER_SPECS:+ }$_label=$_py"
    done
    [ -n "$PEER_LABELS" ] || { echo "peers: no PyTorch peer" >&2; exit 1; }
}

peer_py() {   # LABEL -> its python
    for _s in $PEER_SPECS; do
        [ "${_s%%=*}" = "$1" ] && { echo "${_s#*=}"; return 0; }
    done
    echo "peers: no peer '$1'" >&2
    return 1
}

peers_describe() {   # one line per peer: label, python, torch, torchvision, oneDNN
    for _l in $PEER_LABELS; do
        "$(peer_py "$_l")" - "$_l" "$(peer_py "$_l")" <<'EOF'
import re, sys
import torch
try:
    import torchvision
    tv = torchvision.__version__
except Exception:
    tv = "-"
m = re.search(r"(oneDNN|MKL-DNN) v[0-9.]+", torch.__config__.show())
print("peer torch %s: %s, torch %s, torchvision %s, mkldnn %s, %s" % (
    sys.argv[1], sys.argv[2], torch.__version__, tv, torch.backends.mkldnn.is_available(),
    "oneDNN " + m.group(0).split(" v")[1] if m else "oneDNN ?"))
EOF
    done
}

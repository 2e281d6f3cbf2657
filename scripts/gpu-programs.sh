#!/bin/sh
# The programs the device scripts (scripts/gpu-*.sh) run from a build
# tree, one path relative to the tree a line, sorted: each "$BUILD/bench/...",
# "$BUILD/tests/..." or "$BUILD/bin/..." (also written ${BUILD}), and
# gpu-e2e.sh's "$BIN/NAME" as bin/NAME.
#   scripts/gpu-programs.sh [--required]
# --required: not those only looked for ([ -x "$BUILD/..." ]: gpud_cuda_nccl's
# program, built only with NCCL).
# One list for gpu-bundle.sh --gpu-only (what a device call's bundle keeps)
# and it_gpu_bundle (each required one is built here, so a renamed target
# fails here and not in a device call).
set -eu
REQUIRED=0
case "${1:-}" in
    --required) REQUIRED=1 ;;
    '') ;;
    *) sed -n '2,11p' "$0"; exit 2 ;;
esac
# the device scripts but this one (its comments name the forms)
scripts=$(ls "$(dirname "$0")"/gpu-*.sh | grep -v '/gpu-programs\.sh$')
{
    # shellcheck disable=SC2086 # the paths have no blanks (scripts/gpu-*.sh)
    grep -ohE '(-x ")?\$\{?BUILD\}?/(bench|tests|bin)/[A-Za-z0-9_/-]*[A-Za-z0-9_]' $scripts |
        if [ "$REQUIRED" = 1 ]; then grep -v '^-x "' || true; else cat; fi |
        sed 's|^.*BUILD}\{0,1\}/||'
    # shellcheck disable=SC2086
    grep -ohE '\$\{?BIN\}?/[A-Za-z0-9_-]*[A-Za-z0-9_]' $scripts | sed 's|^.*/|bin/|'
} | sort -u

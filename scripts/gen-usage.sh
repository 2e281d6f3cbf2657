#!/bin/sh
# Regenerates docs/USAGE.md from the option tables the programs parse:
# builds ddpipe in BUILD_DIR (default build; configured here if it is not
# yet) and runs `ddpipe __docs --markdown docs/USAGE.md`. Commit the result;
# the test cli_usage_md fails while the committed file is stale.
#
#   scripts/gen-usage.sh [BUILD_DIR]
# (the same as: cmake --build BUILD_DIR --target usage_md)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" >/dev/null
fi
cmake --build "$build" --target usage_md

#!/bin/sh
# The ThreadSanitizer build: install what is missing, build build-tsan with
# -fsanitize=thread (-DDDPIPE_TSAN=ON) and run the integration tests there
# (ctest label "tsan"). A test fails on any TSan report of any process it
# started; tests/tsan.supp silences third-party libraries only. Exits
# non-zero when any test fails; extra arguments go to ctest.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPIPE_WERROR=ON -DDDPIPE_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)"
cd build-tsan
ctest -L tsan --output-on-failure --timeout 1800 -j"$(nproc)" "$@"

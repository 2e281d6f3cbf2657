#!/bin/sh
# Install what is missing (test oracles too), build with -Werror and
# ASan+UBSan, and run the whole test suite with ctest. Exits non-zero when
# any test fails.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPIPE_WERROR=ON -DDDPIPE_SANITIZE=ON >/dev/null
cmake --build build-test -j"$(nproc)"
cd build-test
ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@"

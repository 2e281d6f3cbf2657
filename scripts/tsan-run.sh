#!/bin/sh
# Run one test of the ThreadSanitizer build (ctest label "tsan") and fail
# when any process it started wrote a TSan report: daemons run in the
# background and tests do not always read their exit status, so each
# report goes to a file (log_path) under DIR, which is checked afterwards.
# usage: scripts/tsan-run.sh DIR COMMAND [ARG...]
set -u
dir=$1
shift
rm -rf "$dir"
mkdir -p "$dir"
TSAN_OPTIONS="${TSAN_OPTIONS:-}:log_path=$dir/tsan"
export TSAN_OPTIONS
"$@"
rc=$?
reports=$(find "$dir" -type f -name 'tsan.*' | sort)
if [ -n "$reports" ]; then
    n=$(cat $reports | grep -c '^WARNING: ThreadSanitizer:')
    for f in $reports; do
        echo "---- $f"
        cat "$f"
    done
    echo "FAIL: $n ThreadSanitizer report(s) in $(echo "$reports" | wc -l) process(es)" \
         "(suppressions: tests/tsan.supp, only for third-party frames)"
    [ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"

#!/bin/sh
# cpus_available under a real cgroup CPU quota: a child cgroup limited to
# one CPU (cgroup v1 cpu.cfs_quota_us, or v2 cpu.max), this script's
# subshell moved into it, `test_cpus --print` must say 1 where the affinity
# mask allows 2 or more. Needs root and a writable cgroup hierarchy; skips
# (77) otherwise. The cgroup is removed on every exit path.
#   cpus_cgroup.sh TEST_CPUS_BINARY
set -u
BIN=$1
[ "$(id -u)" = 0 ] || { echo "cpus_cgroup: not root; skipped"; exit 77; }
[ "$(nproc)" -ge 2 ] || { echo "cpus_cgroup: one CPU, a cap cannot show; skipped"; exit 77; }
name=ddpipe-test-cpus-$$
if [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    parent=/sys/fs/cgroup/cpu
    dir=$parent/$name
    mkdir "$dir" 2>/dev/null || { echo "cpus_cgroup: cannot create a v1 cgroup; skipped"; exit 77; }
    set_quota() { echo 100000 > "$dir/cpu.cfs_period_us" && echo 100000 > "$dir/cpu.cfs_quota_us"; }
elif [ -e /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    parent=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
    dir=$parent/$name
    mkdir "$dir" 2>/dev/null || { echo "cpus_cgroup: cannot create a v2 cgroup; skipped"; exit 77; }
    set_quota() { echo "100000 100000" > "$dir/cpu.max"; }
else
    echo "cpus_cgroup: no writable cgroup cpu controller; skipped"; exit 77
fi
cleanup() { rmdir "$dir" 2>/dev/null; }
trap cleanup EXIT
set_quota || { echo "cpus_cgroup: cannot set the quota; skipped"; exit 77; }
free=$("$BIN" --print)
# the subshell joins the cgroup, runs the binary, and ends (leaving it empty)
capped=$(sh -c "echo \$\$ > '$dir/cgroup.procs' && exec '$BIN' --print") ||
    { echo "cpus_cgroup: cannot join the cgroup; skipped"; exit 77; }
echo "cpus_cgroup: $free CPUs outside, $capped under a 1-CPU quota ($dir)"
[ "$free" -ge 2 ] || { echo "cpus_cgroup: FAIL: $free CPUs outside the cgroup, want >= 2"; exit 1; }
[ "$capped" = 1 ] || { echo "cpus_cgroup: FAIL: $capped under the quota, want 1"; exit 1; }

/* cpus — how many CPUs this process may use, for the daemons' "every core"
 * defaults: the affinity mask (taskset, cpusets: docker --cpuset-cpus,
 * Kubernetes' static CPU manager) capped by the cgroup CPU quota (docker
 * --cpus, a Kubernetes CPU limit, a systemd CPUQuota), rounded up.
 * sysconf(_SC_NPROCESSORS_ONLN) counts the machine's cores, so a container
 * limited to 4 CPUs on a 64-core node started 64 threads a daemon and was
 * throttled. */
#ifndef DDP_COMMON_CPUS_H
#define DDP_COMMON_CPUS_H

/* This process's CPUs (>= 1). Reads /proc/self/cgroup and the cgroup files
 * under /sys/fs/cgroup (v2 cpu.max, v1 cpu.cfs_quota_us); where none can be
 * read, the affinity mask alone. */
long cpus_available(void);

/* The ranks sharing this host's CPUs, for a rank's "every core" defaults
 * (gpuds started side by side by supervisord or torchrun would each take
 * every CPU): DDPIPE_LOCAL_WORLD_SIZE, else LOCAL_WORLD_SIZE (torchrun's);
 * 1 when neither is set (*from NULL), -1 when the one set is not a count
 * 1..4096 (*from names it). Not Slurm's task counts: srun usually binds
 * each task to its own CPUs already, which the affinity mask shows. */
long cpus_local_world(const char **from);

/* CPUS split evenly over LOCAL ranks, at least 1 each (pure). */
long cpus_per_rank(long cpus, long local);

/* A count 1..4096 from TEXT (digits only), else -1 (pure). */
long cpus_parse_count(const char *text);

/* The pieces, pure (tested): a cgroup v2 cpu.max text ("max 100000": 0,
 * no limit; "150000 100000": 1.5 CPUs; unparsable: 0) ... */
double cpus_quota_v2(const char *cpu_max);
/* ... cgroup v1's cfs quota and period in microseconds (quota -1: 0) ... */
double cpus_quota_v1(long quota_us, long period_us);
/* ... and the rule: the affinity count capped by the quota rounded up
 * (quota 0: no cap), at least 1. */
long cpus_from(long affinity, double quota);

#endif

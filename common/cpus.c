/* cpus — the CPUs this process may use (cpus.h). */
#include "common/cpus.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double cpus_quota_v2(const char *cpu_max)
{
    long long quota, period;
    if (!cpu_max || sscanf(cpu_max, "%lld %lld", &quota, &period) != 2 || quota <= 0 ||
        period <= 0)
        return 0.0;   /* "max ...", or nothing usable: no limit */
    return (double)quota / (double)period;
}

double cpus_quota_v1(long quota_us, long period_us)
{
    return quota_us > 0 && period_us > 0 ? (double)quota_us / (double)period_us : 0.0;
}

long cpus_from(long affinity, double quota)
{
    long n = affinity > 0 ? affinity : 1;
    if (quota > 0.0) {
        double q = ceil(quota);
        if (q < (double)n)
            n = (long)q;
    }
    return n > 0 ? n : 1;
}

long cpus_parse_count(const char *text)
{
    long n = 0;
    if (!text || !*text)
        return -1;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9' || (n = n * 10 + (*c - '0')) > 4096)
            return -1;
    }
    return n >= 1 ? n : -1;
}

long cpus_per_rank(long cpus, long local)
{
    long n = local > 1 ? cpus / local : cpus;
    return n > 0 ? n : 1;
}

long cpus_local_world(const char **from)
{
    static const char *const vars[] = {"DDPIPE_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE"};
    *from = NULL;
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            *from = vars[i];
            return cpus_parse_count(v);
        }
    }
    return 1;
}

static long affinity_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* The first line of PATH into buf; 0 or -1. */
static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

/* The smallest quota of ROOT/CG/FILE and of each ancestor up to ROOT (a
 * limit anywhere above applies). v1: FILE is cpu.cfs_quota_us beside
 * cpu.cfs_period_us. 0 when none. */
static double quota_up(const char *root, const char *cg, int v1)
{
    char dir[4096], path[4200], line[128];
    if (snprintf(dir, sizeof dir, "%s%s", root, strcmp(cg, "/") == 0 ? "" : cg) >=
        (int)sizeof dir)
        return 0.0;
    size_t rl = strlen(root);
    double best = 0.0;
    for (;;) {
        double q = 0.0;
        if (!v1) {
            snprintf(path, sizeof path, "%s/cpu.max", dir);
            if (read_line(path, line, sizeof line) == 0)
                q = cpus_quota_v2(line);
        } else {
            char pl[128];
            snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
            int a = read_line(path, line, sizeof line);
            snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
            if (a == 0 && read_line(path, pl, sizeof pl) == 0)
                q = cpus_quota_v1(atol(line), atol(pl));
        }
        if (q > 0.0 && (best == 0.0 || q < best))
            best = q;
        char *slash = strlen(dir) > rl ? strrchr(dir + rl, '/') : NULL;   /* the parent */
        if (!slash)
            break;   /* ROOT itself was the last */
        *slash = '\0';
    }
    return best;
}

/* The quota of this process's cgroup: v2 ("0::PATH") or v1's cpu
 * controller ("N:cpu,cpuacct:PATH"). */
static double cgroup_quota(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0.0;
    char line[4096];
    double q = 0.0;
    while (q == 0.0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctl = c1 + 1, *cg = c2 + 1;
        if (*ctl == '\0') {
            q = quota_up("/sys/fs/cgroup", cg, 0);
            continue;
        }
        char ctls[256];
        snprintf(ctls, sizeof ctls, ",%s,", ctl);
        if (strstr(ctls, ",cpu,")) {
            q = quota_up("/sys/fs/cgroup/cpu", cg, 1);
            if (q == 0.0)
                q = quota_up("/sys/fs/cgroup/cpu,cpuacct", cg, 1);
        }
    }
    fclose(f);
    return q;
}

long cpus_available(void)
{
    return cpus_from(affinity_count(), cgroup_quota());
}

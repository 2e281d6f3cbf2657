/* test_cpus — the CPUs a process may use (common/cpus.c): the cgroup quota
 * parsers, the capping rule, a rank's share (the local world size), and
 * the affinity mask of this very process
 * (narrowed to one CPU with sched_setaffinity, then restored). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpus.h"
#include "tests/gpud/tcheck.h"

static void test_parsers(void)
{
    CHECK(cpus_quota_v2("max 100000\n") == 0.0, "max");
    CHECK(cpus_quota_v2("150000 100000\n") == 1.5, "1.5");
    CHECK(cpus_quota_v2("400000 100000") == 4.0, "4");
    CHECK(cpus_quota_v2("") == 0.0 && cpus_quota_v2(NULL) == 0.0, "empty");
    CHECK(cpus_quota_v2("garbage") == 0.0 && cpus_quota_v2("100000 0") == 0.0, "garbage");
    CHECK(cpus_quota_v1(-1, 100000) == 0.0, "v1 unlimited");
    CHECK(cpus_quota_v1(50000, 100000) == 0.5, "v1 half");
    CHECK(cpus_quota_v1(200000, 0) == 0.0, "v1 no period");
}

static void test_rule(void)
{
    static const struct {
        long affinity;
        double quota;
        long want;
    } cases[] = {{16, 0.0, 16}, {16, 1.5, 2}, {2, 4.0, 2}, {16, 0.5, 1},
                 {64, 4.0, 4},  {0, 0.0, 1},  {8, 8.0, 8}, {8, 7.01, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long got = cpus_from(cases[i].affinity, cases[i].quota);
        CHECK(got == cases[i].want, "affinity %ld quota %g: %ld, want %ld", cases[i].affinity,
              cases[i].quota, got, cases[i].want);
    }
}

/* A rank's share: counts, the division, and the variables in order. */
static void test_local_world(void)
{
    static const char *const bad[] = {"0", "-2", "2x", " 2", "4097", "1e3", "99999999999999999999"};
    CHECK(cpus_parse_count("1") == 1 && cpus_parse_count("16") == 16, "counts");
    CHECK(cpus_parse_count("4096") == 4096 && cpus_parse_count("007") == 7, "4096, 007");
    CHECK(cpus_parse_count("") == -1 && cpus_parse_count(NULL) == -1, "empty");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(cpus_parse_count(bad[i]) == -1, "'%s' accepted", bad[i]);
    static const long split[][3] = {{16, 1, 16}, {16, 2, 8}, {16, 3, 5}, {2, 4, 1},
                                    {1, 1, 1},   {64, 8, 8}, {8, 0, 8}};
    for (size_t i = 0; i < sizeof split / sizeof *split; i++)
        CHECK(cpus_per_rank(split[i][0], split[i][1]) == split[i][2], "%ld / %ld: %ld",
              split[i][0], split[i][1], cpus_per_rank(split[i][0], split[i][1]));
    const char *from = "x";
    unsetenv("DDPIPE_LOCAL_WORLD_SIZE");
    unsetenv("LOCAL_WORLD_SIZE");
    CHECK(cpus_local_world(&from) == 1 && from == NULL, "none set");
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    CHECK(cpus_local_world(&from) == 4 && strcmp(from, "LOCAL_WORLD_SIZE") == 0, "torchrun's");
    setenv("DDPIPE_LOCAL_WORLD_SIZE", "2", 1);
    CHECK(cpus_local_world(&from) == 2 && strcmp(from, "DDPIPE_LOCAL_WORLD_SIZE") == 0,
          "ours first");
    setenv("DDPIPE_LOCAL_WORLD_SIZE", "two", 1);
    CHECK(cpus_local_world(&from) == -1 && strcmp(from, "DDPIPE_LOCAL_WORLD_SIZE") == 0,
          "a bad one is an error, not the next variable");
    setenv("DDPIPE_LOCAL_WORLD_SIZE", "", 1);
    CHECK(cpus_local_world(&from) == 4, "empty is unset");
    unsetenv("DDPIPE_LOCAL_WORLD_SIZE");
    unsetenv("LOCAL_WORLD_SIZE");
}

/* This process pinned to one CPU may use one. */
static void test_affinity(void)
{
    cpu_set_t old, one;
    if (sched_getaffinity(0, sizeof old, &old) != 0) {
        fprintf(stderr, "sched_getaffinity failed; affinity case not run\n");
        return;
    }
    long before = cpus_available();
    CHECK(before >= 1 && before <= CPU_COUNT(&old), "available %ld of %d in the mask", before,
          CPU_COUNT(&old));
    int cpu = 0;
    while (!CPU_ISSET(cpu, &old))
        cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity");
    CHECK(cpus_available() == 1, "pinned to cpu %d: %ld", cpu, cpus_available());
    sched_setaffinity(0, sizeof old, &old);
    CHECK(cpus_available() == before, "restored: %ld, was %ld", cpus_available(), before);
}

/* --print: this process's CPUs, for cpus_cgroup.sh (run inside a cgroup
 * with a quota). */
int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        printf("%ld\n", cpus_available());
        return 0;
    }
    test_parsers();
    test_rule();
    test_local_world();
    test_affinity();
    return tc_done("test_cpus");
}

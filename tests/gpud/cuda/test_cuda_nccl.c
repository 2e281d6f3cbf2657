/* gpud_cuda_nccl (GPU): two ranks, one process each, on two GPUs (or on
 * one, below), sum arrays with
 * nccl_ar_sum (host) and nccl_ar_sum_device; every rank must end with the
 * exact sums. Then rank 1 exits without joining the next all-reduce and
 * rank 0 must fail within its timeout with a message, not hang.
 * The parent spawns itself twice (exec: no CUDA state crosses a fork); rank
 * 0 publishes the NCCL id through a file, as reducerd's WELCOME would.
 * With one CUDA device: a one-rank communicator first (valid on any
 * NCCL): its non-blocking init, the float sums (host and device) and the
 * double sum through NCCL leave the values as they were, then finalize and
 * destroy, and an aborted communicator refuses the next sum; then, where
 * the loaded NCCL is >= 2.30.3, the two ranks on that one device
 * (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL_NVLS_ENABLE=0). On the kernel
 * emulator (gpud_cuda_nccl_emu: tests/gpud/cuemu/fake_nccl.c, ranks as
 * processes exchanging files) both, the two ranks on its one device.
 * Exits 77 without a CUDA device. */
#include <cuda_runtime.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpud/cuda/cuda_backend.h"
#include "gpud/cuda/cuda_nccl.h"
#include "../tcheck.h"

extern char **environ;

enum { NF = 100003 };   /* odd size: no chunk divides it */

static int read_id(const char *path, char *id)
{
    for (int i = 0; i < 600; i++) {   /* up to 60 s */
        FILE *f = fopen(path, "r");
        if (f) {
            int ok = fgets(id, NCCL_AR_ID_LEN, f) && strlen(id) == NCCL_AR_ID_LEN - 1;
            fclose(f);
            if (ok)
                return 0;
        }
        usleep(100000);
    }
    return -1;
}

static int rank_main(int rank, const char *idfile)
{
    char id[NCCL_AR_ID_LEN], err[512] = "", tmp[1100];
    if (rank == 0) {
        REQUIRE(nccl_ar_make_id(id, sizeof id, err, sizeof err) == 0, "%s", err);
        snprintf(tmp, sizeof tmp, "%s.tmp", idfile);
        FILE *f = fopen(tmp, "w");
        REQUIRE(f && fputs(id, f) >= 0 && fclose(f) == 0 && rename(tmp, idfile) == 0, "id file");
    } else {
        REQUIRE(read_id(idfile, id) == 0, "rank 1: no id from rank 0");
    }
    /* on the emulator both ranks share its one device (tests/gpud/cuemu/fake_nccl.c) */
    nccl_ar_t *ar = nccl_ar_new(rank, 2, id, rank % cuda_device_count(), 60000, err, sizeof err);
    REQUIRE(ar, "rank %d: %s", rank, err);
    static float a[NF];
    for (int i = 0; i < NF; i++)
        a[i] = (float)(rank + 1) * (float)(i % 1000);
    CHECK(nccl_ar_sum(ar, a, NF, 30000, err, sizeof err) == 0, "rank %d host sum: %s", rank, err);
    for (int i = 0; i < NF; i++)
        if (a[i] != 3.0f * (float)(i % 1000)) {
            CHECK(0, "rank %d: a[%d] = %g, want %g", rank, i, (double)a[i], 3.0 * (i % 1000));
            break;
        }
    float *d = NULL;
    REQUIRE(cudaMalloc((void **)&d, NF * 4) == cudaSuccess &&
            cudaMemcpy(d, a, NF * 4, cudaMemcpyHostToDevice) == cudaSuccess, "device copy");
    CHECK(nccl_ar_sum_device(ar, d, NF, 30000, err, sizeof err) == 0, "rank %d device sum: %s",
          rank, err);
    REQUIRE(cudaMemcpy(a, d, NF * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
    CHECK(a[999] == 6.0f * 999.0f, "rank %d: device sum a[999] = %g", rank, (double)a[999]);
    cudaFree(d);
    if (rank == 1)   /* dies: leaves rank 0 alone in the next collective */
        _exit(tc_failures ? 1 : 0);
    CHECK(nccl_ar_sum(ar, a, NF, 3000, err, sizeof err) < 0, "rank 0: sum without a peer "
          "succeeded");
    printf("rank 0 with a dead peer: %s\n", err);
    nccl_ar_destroy(&ar);
    return tc_done("test_cuda_nccl rank 0");
}

/* One GPU: world 1 (the sums are copies; the calls, waits and teardown
 * are the real ones). */
static int one_rank(void)
{
    char id[NCCL_AR_ID_LEN], err[512] = "";
    REQUIRE(nccl_ar_make_id(id, sizeof id, err, sizeof err) == 0, "%s", err);
    nccl_ar_t *ar = nccl_ar_new(0, 1, id, 0, 60000, err, sizeof err);
    REQUIRE(ar, "one-rank communicator: %s", err);
    static float a[NF];
    for (int i = 0; i < NF; i++)
        a[i] = (float)(i % 1000) + 0.5f;
    CHECK(nccl_ar_sum(ar, a, NF, 30000, err, sizeof err) == 0, "one rank, host sum: %s", err);
    CHECK(a[0] == 0.5f && a[NF - 1] == (float)((NF - 1) % 1000) + 0.5f,
          "one rank, host sum changed the values: %g %g", (double)a[0], (double)a[NF - 1]);
    float *d = NULL;
    REQUIRE(cudaMalloc((void **)&d, NF * 4) == cudaSuccess &&
            cudaMemcpy(d, a, NF * 4, cudaMemcpyHostToDevice) == cudaSuccess, "device copy");
    CHECK(nccl_ar_sum_device(ar, d, NF, 30000, err, sizeof err) == 0, "one rank, device sum: %s",
          err);
    static float b[NF];
    REQUIRE(cudaMemcpy(b, d, NF * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
    CHECK(memcmp(a, b, sizeof a) == 0, "one rank, device sum changed the values");
    cudaFree(d);
    double s[3] = {1.0 / 3.0, -2.5e300, 7.0};
    CHECK(nccl_ar_sum_f64(ar, s, 3, 30000, err, sizeof err) == 0, "one rank, f64 sum: %s", err);
    CHECK(s[0] == 1.0 / 3.0 && s[1] == -2.5e300 && s[2] == 7.0,
          "one rank, f64 sum changed the values: %.17g %g %g", s[0], s[1],
          s[2]);
    nccl_ar_destroy(&ar);   /* finalize + destroy */
    CHECK(ar == NULL, "nccl_ar_destroy left the handle");

    /* aborted: the next sum fails at once with a message */
    REQUIRE(nccl_ar_make_id(id, sizeof id, err, sizeof err) == 0, "%s", err);
    ar = nccl_ar_new(0, 1, id, 0, 60000, err, sizeof err);
    REQUIRE(ar, "second one-rank communicator: %s", err);
    nccl_ar_abort(ar);
    err[0] = '\0';
    CHECK(nccl_ar_sum(ar, a, NF, 3000, err, sizeof err) < 0 && strstr(err, "aborted") != NULL,
          "a sum after abort: %s", err);
    nccl_ar_destroy(&ar);
    return tc_done("test_cuda_nccl (one rank)");
}

int main(int argc, char **argv)
{
    if (argc == 3)
        return rank_main(atoi(argv[1]), argv[2]);
    if (cuda_device_count() == 0) {
        printf("test_cuda_nccl: no CUDA device, skipped\n");
        return 77;
    }
    /* the emulator's NCCL (fake_nccl.c) takes two ranks on one device: both halves */
    int emulated = getenv("DDPIPE_TEST_EMULATED") != NULL;
    if ((cuda_device_count() == 1 || emulated) && one_rank() != 0)
        return 1;
    if (cuda_device_count() == 1 && !emulated) {
        /* NCCL from 2.30.3 takes two ranks on one device when asked (NVLS
         * off: it needs one rank a GPU); an older one refuses them */
        int v = nccl_ar_version();
        if (v < 23003) {
            printf("test_cuda_nccl: two ranks on one GPU not run: NCCL %d loaded, they need "
                   ">= 23003 (2.30.3)\n", v);
            return 0;
        }
        setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);
        setenv("NCCL_NVLS_ENABLE", "0", 0);
        printf("test_cuda_nccl: two ranks on one GPU (NCCL %d loaded)\n", v);
    }
    char idfile[256];
    snprintf(idfile, sizeof idfile, "/tmp/ddp_nccl_id_%d", (int)getpid());
    unlink(idfile);
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        char rs[8];
        snprintf(rs, sizeof rs, "%d", r);
        char *args[] = {argv[0], rs, idfile, NULL};
        REQUIRE(posix_spawn(&pid[r], argv[0], NULL, NULL, args, environ) == 0, "spawn");
    }
    for (int r = 0; r < 2; r++) {
        int st = 0;
        REQUIRE(waitpid(pid[r], &st, 0) == pid[r], "waitpid");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed (status %d)", r, st);
    }
    unlink(idfile);
    return tc_done("test_cuda_nccl");
}

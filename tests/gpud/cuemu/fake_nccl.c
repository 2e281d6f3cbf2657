/* fake_nccl — the part of NCCL gpud/cuda/cuda_nccl.c calls, for the kernel
 * emulator (device memory is host memory, cuemu.h), so that gpud's NCCL
 * path (cuda_nccl.c, gpud/collective.c, the trainer's device sum, the
 * elastic generations) runs on a machine without a GPU: the *_emu tests and
 * whole jobs of several gpud processes (tests/integration/cuda_emu_jobs.py).
 *
 * Ranks are processes of one machine. A communicator is a directory under
 * $TMPDIR (default /tmp) named by its unique id: a rank joins by writing
 * join-<rank>; an all-reduce writes the rank's values to <seq>-<rank> (a
 * temporary file renamed, so a peer never reads half of one) and is done
 * when every rank's file of that sequence number is there: the sum is then
 * made in rank order (x0 + x1 + ...) in the type's own arithmetic. An
 * abort writes `aborted`, which fails every peer's pending operation
 * (ncclRemoteError), as a dead peer does NCCL's. Non-blocking as gpud asks
 * (ncclConfig_t.blocking = 0): init and all-reduce return at once and
 * ncclCommGetAsyncError answers ncclInProgress until the peers are there,
 * so the caller's polling, timeout and cancellation are what run. With no
 * peer ever coming the operation stays in progress: the caller times out.
 *
 * Not NCCL: no ring or tree order of the sums (the tests' tolerances cover
 * it), no streams (an operation is done when the host sees it done), no
 * graph capture, host files instead of the network. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef enum { OP_NONE, OP_INIT, OP_SUM } op_t;

struct ncclComm {
    char dir[512];
    int rank, world;
    op_t op;                 /* what is in progress */
    uint64_t seq;            /* all-reduces begun */
    void *recv;              /* the pending sum's output */
    size_t count;
    ncclDataType_t type;     /* also the op: ncclAllReduce takes the max of uint32 only */
    ncclResult_t state;      /* ncclSuccess, ncclInProgress, or the failure */
    char last[768];
};

static char g_last[768];

static void set_last(ncclComm_t c, const char *fmt, const char *arg)
{
    snprintf(c ? c->last : g_last, sizeof g_last, fmt, arg);
}

static size_t type_size(ncclDataType_t t)
{
    return t == ncclDouble || t == ncclInt64 ? 8 : t == ncclFloat || t == ncclUint32 ? 4 : 0;
}

/* the header's version: the emulator's NCCL is whatever the build saw */
ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static unsigned n;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "%ld-%ld-%ld-%u", (long)getpid(),
             (long)ts.tv_sec, ts.tv_nsec, n++);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unhandled system error";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    return comm ? comm->last : g_last;
}

static int path_of(ncclComm_t c, char *out, size_t cap, const char *name)
{
    return snprintf(out, cap, "%s/%s", c->dir, name) < (int)cap ? 0 : -1;
}

static int exists(ncclComm_t c, const char *name)
{
    char p[600];
    struct stat st;
    return path_of(c, p, sizeof p, name) == 0 && stat(p, &st) == 0;
}

/* name's contents, written whole or not at all */
static int put_file(ncclComm_t c, const char *name, const void *data, size_t bytes)
{
    char p[600], tmp[640];
    if (path_of(c, p, sizeof p, name) < 0)
        return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    int ok = bytes == 0 || fwrite(data, 1, bytes, f) == bytes;
    ok &= fclose(f) == 0;
    return ok && rename(tmp, p) == 0 ? 0 : -1;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    (void)config;   /* blocking or not: every call here returns at once */
    *comm = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks || !id.internal[0]) {
        set_last(NULL, "%s", "rank, world or id out of range");
        return ncclInvalidArgument;
    }
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/ddpipe-fake-nccl-%.64s", tmp && *tmp ? tmp : "/tmp",
             id.internal);
    c->rank = rank;
    c->world = nranks;
    char join[32];
    snprintf(join, sizeof join, "join-%d", rank);
    if ((mkdir(c->dir, 0700) < 0 && errno != EEXIST) || put_file(c, join, NULL, 0) < 0) {
        set_last(NULL, "cannot write the fake communicator's directory %s", c->dir);
        free(c);
        return ncclSystemError;
    }
    c->op = OP_INIT;
    c->state = ncclInProgress;
    *comm = c;
    return ncclInProgress;
}

/* The pending operation, moved on as far as the peers allow. */
static void progress(ncclComm_t c)
{
    if (c->state != ncclInProgress)
        return;
    if (exists(c, "aborted")) {
        c->state = ncclRemoteError;
        set_last(c, "%s", "a peer aborted the communicator");
        return;
    }
    char name[64];
    for (int r = 0; r < c->world; r++) {
        if (c->op == OP_INIT)
            snprintf(name, sizeof name, "join-%d", r);
        else
            snprintf(name, sizeof name, "%llu-%d", (unsigned long long)c->seq, r);
        if (!exists(c, name))
            return;   /* still in progress */
    }
    if (c->op == OP_SUM) {
        size_t es = type_size(c->type), bytes = c->count * es;
        unsigned char *part = malloc(bytes ? bytes : 1);
        for (int r = 0; part && r < c->world; r++) {
            char p[600];
            snprintf(name, sizeof name, "%llu-%d", (unsigned long long)c->seq, r);
            FILE *f = path_of(c, p, sizeof p, name) == 0 ? fopen(p, "rb") : NULL;
            int ok = f && fread(part, 1, bytes, f) == bytes;
            if (f)
                fclose(f);
            if (!ok) {
                c->state = ncclSystemError;
                set_last(c, "cannot read a peer's values (%s)", name);
                free(part);
                return;
            }
            for (size_t i = 0; i < c->count; i++) {   /* rank order */
                if (c->type == ncclDouble) {
                    double *y = (double *)c->recv + i, x = ((double *)part)[i];
                    *y = r == 0 ? x : *y + x;
                } else if (c->type == ncclInt64) {   /* bitwise training's limbs */
                    int64_t *y = (int64_t *)c->recv + i, x = ((int64_t *)part)[i];
                    *y = r == 0 ? x : *y + x;
                } else if (c->type == ncclUint32) {  /* their tops, a max */
                    uint32_t *y = (uint32_t *)c->recv + i, x = ((uint32_t *)part)[i];
                    *y = r == 0 || x > *y ? x : *y;
                } else {
                    float *y = (float *)c->recv + i, x = ((float *)part)[i];
                    *y = r == 0 ? x : *y + x;
                }
            }
        }
        free(part);
        if (c->seq > 1) {   /* every peer read it: each wrote this sequence's file since */
            char p[600];
            snprintf(name, sizeof name, "%llu-%d", (unsigned long long)(c->seq - 1), c->rank);
            if (path_of(c, p, sizeof p, name) == 0)
                unlink(p);
        }
    }
    c->op = OP_NONE;
    c->state = ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    if (!comm)
        return ncclInvalidArgument;
    progress(comm);
    *state = comm->state;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    if (!comm || !type_size(type) || (op != ncclSum && !(op == ncclMax && type == ncclUint32)) ||
        (op == ncclSum && type == ncclUint32)) {
        if (comm)
            set_last(comm, "%s", "the fake NCCL sums floats, doubles and int64 and takes the "
                     "max of uint32 only");
        return ncclInvalidArgument;
    }
    if (comm->state != ncclSuccess) {
        set_last(comm, "%s", "an operation is in progress or the communicator failed");
        return ncclInvalidUsage;
    }
    char name[64];
    comm->seq++;
    snprintf(name, sizeof name, "%llu-%d", (unsigned long long)comm->seq, comm->rank);
    if (put_file(comm, name, send, count * type_size(type)) < 0) {
        set_last(comm, "cannot write this rank's values in %s", comm->dir);
        comm->state = ncclSystemError;
        return ncclSystemError;
    }
    comm->op = OP_SUM;
    comm->recv = recv;
    comm->count = count;
    comm->type = type;
    comm->state = ncclInProgress;
    return ncclInProgress;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return comm ? ncclSuccess : ncclInvalidArgument;
}

/* Every file of the directory whose name ends with suffix ("" all of them). */
static void remove_files(ncclComm_t c, const char *suffix)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return;
    struct dirent *e;
    char p[600];
    size_t m = strlen(suffix);
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && n > m &&
            strcmp(e->d_name + n - m, suffix) == 0 && path_of(c, p, sizeof p, e->d_name) == 0)
            unlink(p);
    }
    closedir(d);
}

/* This rank's files go and it says it left; the last rank to leave takes
 * the directory (a peer that died without leaving keeps it). */
static void leave(ncclComm_t c)
{
    char mine[32];
    snprintf(mine, sizeof mine, "-%d", c->rank);
    remove_files(c, mine);
    snprintf(mine, sizeof mine, "left+%d", c->rank);
    put_file(c, mine, NULL, 0);
    for (int r = 0; r < c->world; r++) {
        snprintf(mine, sizeof mine, "left+%d", r);
        if (!exists(c, mine))
            return;
    }
    remove_files(c, "");
    rmdir(c->dir);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    leave(comm);
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    put_file(comm, "aborted", NULL, 0);   /* the peers' pending operations fail */
    leave(comm);
    free(comm);
    return ncclSuccess;
}

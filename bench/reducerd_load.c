/* reducerd_load — drives one real reducerd with synthetic eval traffic from
 * many simulated ranks and measures how many per-sample results it takes
 * per second and what one message costs it (docs/SCALE.md).
 *
 *   reducerd_load REDUCERD [--ranks N] [--batch B] [--samples S]
 *                 [--classes C] [--block K]
 *
 * It starts REDUCERD (--workers N --reporters 0, ipc sockets in a fresh
 * directory), joins as a loader (JOIN, PLAN of S samples, the plan ack with
 * its token) and as N gpud ranks (JOIN, WELCOME with each token), encodes
 * every ISSUED and RESULT of the S/B batches up front (the driver's encode
 * cost stays out of the timed part), then sends them as fast as the sockets
 * take them, batch j to rank j % N, in blocks of K batches: the ISSUEDs of
 * block b+1 go out while the RESULTs of block b do, and block b+1's RESULTs
 * wait until reducerd has read its ISSUEDs (a re-sent PLAN, answered on the
 * loader's pipe, marks that). Without that wait a saturated reducerd reads
 * its N+1 pipes in turn, 1 ISSUED per N RESULTs, and refuses RESULTs that
 * run more than 64 per rank ahead of their ISSUED (PROTOCOL.md "Trust").
 * The clock stops at the final `metric` event; the figures
 * are checked against the plan (every sample counted once, top-1 exactly as
 * synthesized, nothing rejected) so a fast wrong run cannot pass as a rate.
 *
 * Printed: wall-clock results/s (driver and reducerd share the machine),
 * reducerd's CPU seconds from the first ISSUED to the final metric
 * (/proc/PID/stat, every thread, 10 ms ticks) as results per CPU-second and
 * CPU µs per message and ns per sample, and its whole life's (wait4: the
 * JOINs, the plan and the exit too). On a shared machine the CPU figures are the ones to compare. */
#include "common/clock.h"
#include "common/flags.h"
#include "proto/codec.h"
#include "proto/event.h"
#include "proto/wire.h"

#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    long ranks, batch, samples, classes, block;
} opts_t;

typedef struct {
    void *data;
    size_t size;
} wire_t; /* one encoded frame, sent as is */

#define JOB "bench"

static void die(const char *what)
{
    fprintf(stderr, "reducerd_load: %s (reducerd's log is in /tmp/reducerd_load.*/)\n", what);
    exit(1);
}

static int parse(int argc, char **argv, opts_t *o, const char **bin)
{
    *o = (opts_t){.ranks = 64, .batch = 256, .samples = 2000000, .classes = 1000, .block = 1024};
    if (argc < 2)
        return -1;
    *bin = argv[1];
    for (int i = 2; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -1;
        int rc = strcmp(f, "--ranks") == 0     ? flags_long("ranks", v, 1, 4096, &o->ranks)
                 : strcmp(f, "--batch") == 0   ? flags_long("batch", v, 1, DDP_MAX_BATCH, &o->batch)
                 : strcmp(f, "--samples") == 0 ? flags_long("samples", v, 1, 1L << 32, &o->samples)
                 : strcmp(f, "--classes") == 0 ? flags_long("classes", v, 5, 100000, &o->classes)
                 : strcmp(f, "--block") == 0   ? flags_long("block", v, 1, 8192, &o->block)
                                               : -1;
        if (rc != 0)
            return -1;
    }
    return 0;
}

static pid_t start_reducerd(const char *bin, const char *dir, long ranks)
{
    char bind[300], pub[300], workers[32];
    snprintf(bind, sizeof bind, "ipc://%s/r", dir);
    snprintf(pub, sizeof pub, "ipc://%s/p", dir);
    snprintf(workers, sizeof workers, "%ld", ranks);
    pid_t pid = fork();
    if (pid == 0) {
        char log[320];
        snprintf(log, sizeof log, "%s/reducerd.log", dir);
        if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0)
            _exit(127);
        execl(bin, bin, "--bind", bind, "--pub", pub, "--workers", workers, "--reporters", "0",
              "--job", JOB, "--stall-timeout", "0", (char *)NULL);
        perror("exec reducerd");
        _exit(127);
    }
    return pid;
}

static zsock_t *dealer(const char *dir, const char *identity)
{
    zsock_t *s = zsock_new(ZMQ_DEALER);
    if (!s)
        die("cannot create a DEALER");
    zsock_set_identity(s, identity);
    zsock_set_sndhwm(s, 100000); /* the driver never drops: it blocks at the HWM */
    zsock_set_linger(s, 1000);
    if (zsock_connect(s, "ipc://%s/r", dir) != 0)
        die("cannot connect to reducerd");
    return s;
}

/* The next WELCOME on s (STOP or silence for 10 s is fatal). */
static ddp_welcome_t await_welcome(zsock_t *s)
{
    zsock_set_rcvtimeo(s, 10000);
    ddp_msg_t m;
    proto_stats_t st = {0};
    for (;;) {
        int rc = proto_recv(zsock_resolve(s), NULL, &m, &st);
        if (rc < 0)
            die("no WELCOME from reducerd within 10 s");
        if (rc == 0 && m.type == DDP_WELCOME)
            return m.u.welcome;
        if (rc == 0 && m.type == DDP_STOP)
            die(m.u.stop.reason);
        ddp_msg_clear(&m);
    }
}

static void send_msg(zsock_t *s, const ddp_msg_t *m)
{
    if (proto_send(zsock_resolve(s), NULL, m) != 0)
        die("send failed");
}

static ddp_auth_t auth_of(const ddp_welcome_t *w)
{
    ddp_auth_t a = {.session = w->session};
    snprintf(a.job, sizeof a.job, "%s", JOB);
    memcpy(a.token, w->token, sizeof a.token);
    return a;
}

static wire_t take_frame(zmsg_t *z)
{
    if (!z || zmsg_size(z) != 1)
        die("encode failed");
    zframe_t *f = zmsg_first(z);
    wire_t w = {.size = zframe_size(f), .data = malloc(zframe_size(f))};
    if (!w.data)
        die("out of memory");
    memcpy(w.data, zframe_data(f), w.size);
    zmsg_destroy(&z);
    return w;
}

/* Synthetic truth: label of id, and a top-1 right for 2 ids in 3. */
static int32_t label_of(uint64_t id, long classes) { return (int32_t)((id * 7919u) % (uint64_t)classes); }
static bool right(uint64_t id) { return id % 3 != 0; }

static void encode_batch(const opts_t *o, uint64_t j, int32_t rank, const ddp_auth_t *loader,
                         const ddp_auth_t *gpud, wire_t *issued, wire_t *result)
{
    uint64_t first = j * (uint64_t)o->batch;
    uint32_t n = (uint32_t)((uint64_t)o->samples - first < (uint64_t)o->batch
                                ? (uint64_t)o->samples - first : (uint64_t)o->batch);
    static uint64_t ids[DDP_MAX_BATCH];
    static int32_t labels[DDP_MAX_BATCH], topk[DDP_MAX_BATCH * 5];
    static float loss[DDP_MAX_BATCH];
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id = first + i;
        ids[i] = id;
        labels[i] = label_of(id, o->classes);
        for (int r = 0; r < 5; r++)
            topk[i * 5 + r] = (int32_t)(((uint64_t)labels[i] + (right(id) ? r : r + 1)) %
                                        (uint64_t)o->classes);
        loss[i] = right(id) ? 0.25f : 2.0f;
    }
    ddp_msg_t m = {.type = DDP_ISSUED};
    m.u.issued = (ddp_issued_t){.seq = j + 1, .epoch = 0, .phase = DDP_PHASE_EVAL, .rank = rank,
                                .n = n, .ids = ids, .labels = labels, .auth = *loader};
    *issued = take_frame(proto_encode(&m));
    m = (ddp_msg_t){.type = DDP_RESULT};
    m.u.result = (ddp_result_t){.rank = rank, .epoch = 0, .phase = DDP_PHASE_EVAL, .seq = j + 1,
                                .n = n, .k = 5, .ids = ids, .labels = labels, .topk = topk,
                                .loss = loss, .compute_s = 0.01, .auth = *gpud};
    *result = take_frame(proto_encode(&m));
}

static void send_wire(zsock_t *s, const wire_t *w)
{
    while (zmq_send(zsock_resolve(s), w->data, w->size, 0) < 0) {
        if (errno != EINTR)
            die("zmq_send failed");
    }
}

/* ISSUED of batches [from, to), then the ping whose ack says they were read. */
static void send_issued(zsock_t *loader, const wire_t *issued, uint64_t from, uint64_t to,
                        const wire_t *ping)
{
    for (uint64_t j = from; j < to; j++)
        send_wire(loader, &issued[j]);
    send_wire(loader, ping);
}

/* CPU seconds (user + system, every thread) pid has used so far. */
static double proc_cpu(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        die("cannot read reducerd's CPU time from /proc");
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double cpu_of(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6 +
           (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6;
}

/* Waits for the final metric on sub and checks it against the plan. */
static void await_metric(zsock_t *sub, const opts_t *o, ddp_event_t *ev)
{
    zsock_set_rcvtimeo(sub, 1000);
    double deadline = clock_mono_s() + 120;
    for (;;) {
        if (clock_mono_s() > deadline)
            die("no final metric within 120 s of the last RESULT: were RESULTs refused?");
        zmsg_t *z = zmsg_recv(sub);
        if (!z)
            continue;
        char err[256];
        int rc = event_decode(z, ev, err, sizeof err);
        zmsg_destroy(&z);
        if (rc == 0 && ev->topic == EV_METRIC && ev->u.metric.final)
            break;
        if (rc == 0 && ev->topic == EV_END && ev->u.end.code != 0)
            die(ev->u.end.reason);
        if (rc == 0)
            event_clear(ev);
    }
    uint64_t want_right = 0;
    for (uint64_t id = 0; id < (uint64_t)o->samples; id++)
        want_right += right(id);
    const ev_metric_t *mt = &ev->u.metric;
    if (mt->samples != (uint64_t)o->samples || mt->correct_top1 != want_right ||
        mt->correct_top5 != want_right || mt->duplicates || mt->rejected) {
        fprintf(stderr, "reducerd_load: wrong tally: samples %llu (want %ld), top-1 %llu (want "
                "%llu), top-5 %llu, duplicates %llu, rejected %llu\n",
                (unsigned long long)mt->samples, o->samples, (unsigned long long)mt->correct_top1,
                (unsigned long long)want_right, (unsigned long long)mt->correct_top5,
                (unsigned long long)mt->duplicates, (unsigned long long)mt->rejected);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    const char *bin;
    if (parse(argc, argv, &o, &bin) != 0) {
        fprintf(stderr, "usage: reducerd_load REDUCERD [--ranks N] [--batch B] [--samples S] "
                        "[--classes C] [--block K]\n");
        return 2;
    }
    char dir[] = "/tmp/reducerd_load.XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp failed");
    zsys_set_sndhwm(100000);
    zsys_set_rcvhwm(100000);
    pid_t pid = start_reducerd(bin, dir, o.ranks);
    zsock_t *sub = zsock_new(ZMQ_SUB);
    zsock_set_subscribe(sub, "");
    zsock_set_reconnect_ivl(sub, 20);
    if (zsock_connect(sub, "ipc://%s/p", dir) != 0)
        die("cannot connect the SUB");

    /* the loader: JOIN, PLAN, the plan ack (its token) */
    zsock_t *loader = dealer(dir, "loader");
    ddp_msg_t m = {.type = DDP_JOIN};
    m.u.join = (ddp_join_t){.role = DDP_ROLE_LOADER, .pid = (uint32_t)getpid(), .want_rank = -1};
    snprintf(m.u.join.name, sizeof m.u.join.name, "loader");
    snprintf(m.u.join.host, sizeof m.u.join.host, "bench");
    send_msg(loader, &m);
    char **names = calloc((size_t)o.classes, sizeof *names);
    for (long c = 0; c < o.classes; c++) {
        names[c] = malloc(24);
        snprintf(names[c], 24, "c%ld", c);
    }
    m = (ddp_msg_t){.type = DDP_PLAN};
    m.u.plan = (ddp_plan_t){.epoch = 0, .phase = DDP_PHASE_EVAL, .n = (uint64_t)o.samples,
                            .num_classes = (uint32_t)o.classes, .class_names = names};
    snprintf(m.u.plan.dataset, sizeof m.u.plan.dataset, "synthetic");
    send_msg(loader, &m);
    ddp_welcome_t lw = await_welcome(loader);
    ddp_auth_t lauth = auth_of(&lw);

    /* N ranks: JOIN each, its WELCOME names its rank and token */
    zsock_t **gpud = calloc((size_t)o.ranks, sizeof *gpud);
    ddp_auth_t *gauth = calloc((size_t)o.ranks, sizeof *gauth);
    for (long i = 0; i < o.ranks; i++) {
        char name[32];
        snprintf(name, sizeof name, "gpud-%ld", i);
        zsock_t *s = dealer(dir, name);
        m = (ddp_msg_t){.type = DDP_JOIN};
        m.u.join = (ddp_join_t){.role = DDP_ROLE_GPUD, .pid = (uint32_t)getpid(), .want_rank = -1};
        snprintf(m.u.join.name, sizeof m.u.join.name, "%s", name);
        snprintf(m.u.join.host, sizeof m.u.join.host, "bench");
        snprintf(m.u.join.backend, sizeof m.u.join.backend, "cpu");
        send_msg(s, &m);
        ddp_welcome_t w = await_welcome(s);
        if (w.rank < 0 || w.rank >= o.ranks || gpud[w.rank])
            die("reducerd handed out an unexpected rank");
        gpud[w.rank] = s;
        gauth[w.rank] = auth_of(&w);
    }

    uint64_t nb = ((uint64_t)o.samples + (uint64_t)o.batch - 1) / (uint64_t)o.batch;
    wire_t *issued = calloc(nb, sizeof *issued), *result = calloc(nb, sizeof *result);
    size_t bytes = 0;
    for (uint64_t j = 0; j < nb; j++) {
        int32_t r = (int32_t)(j % (uint64_t)o.ranks);
        encode_batch(&o, j, r, &lauth, &gauth[r], &issued[j], &result[j]);
        bytes += issued[j].size + result[j].size;
    }
    /* the plan again, with the loader's token: reducerd answers it with a
     * plan ack on the loader's own pipe, so the ack says every ISSUED sent
     * before it has been read (what a restarted loaderd sends; no state) */
    m = (ddp_msg_t){.type = DDP_PLAN};
    m.u.plan = (ddp_plan_t){.epoch = 0, .phase = DDP_PHASE_EVAL, .n = (uint64_t)o.samples,
                            .num_classes = (uint32_t)o.classes, .class_names = names,
                            .auth = lauth};
    snprintf(m.u.plan.dataset, sizeof m.u.plan.dataset, "synthetic");
    wire_t ping = take_frame(proto_encode(&m));

    /* the driver's CPU is measured over the send loop only */
    struct rusage self0, self1;
    getrusage(RUSAGE_SELF, &self0);
    double t0 = clock_mono_s(), cpu0 = proc_cpu(pid);
    uint64_t block = (uint64_t)o.block;
    send_issued(loader, issued, 0, block < nb ? block : nb, &ping);
    await_welcome(loader);
    for (uint64_t b0 = 0; b0 < nb; b0 += block) {
        uint64_t b1 = b0 + block < nb ? b0 + block : nb;
        if (b1 < nb)   /* the next block's ISSUEDs go out while these RESULTs do */
            send_issued(loader, issued, b1, b1 + block < nb ? b1 + block : nb, &ping);
        for (uint64_t j = b0; j < b1; j++)
            send_wire(gpud[j % (uint64_t)o.ranks], &result[j]);
        if (b1 < nb)
            await_welcome(loader);
    }
    double t_sent = clock_mono_s();
    getrusage(RUSAGE_SELF, &self1);
    ddp_event_t ev;
    await_metric(sub, &o, &ev);
    double t1 = clock_mono_s(), cpu1 = proc_cpu(pid);
    event_clear(&ev);

    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("reducerd did not exit 0");
    double life = cpu_of(&ru), cpu = cpu1 - cpu0, wall = t1 - t0;
    double msgs = (double)(2 * nb);
    printf("ranks %ld  batch %ld  samples %ld  classes %ld  messages %llu (%.1f MB on the wire)\n",
           o.ranks, o.batch, o.samples, o.classes, (unsigned long long)(2 * nb), bytes / 1e6);
    printf("wall %.3f s (sent in %.3f s): %.0f results/s, %.0f messages/s\n", wall, t_sent - t0,
           o.samples / wall, msgs / wall);
    printf("reducerd CPU while driven %.2f s: %.0f results per CPU-second, %.2f us per message "
           "(ISSUED or RESULT), %.1f ns per sample (its whole life: %.2f s)\n",
           cpu, o.samples / cpu, cpu / msgs * 1e6, cpu / o.samples * 1e9, life);
    printf("driver CPU in the send loop %.3f s\n", cpu_of(&self1) - cpu_of(&self0));
    for (uint64_t j = 0; j < nb; j++) {
        free(issued[j].data);
        free(result[j].data);
    }
    free(issued);
    free(ping.data);
    free(result);
    for (long i = 0; i < o.ranks; i++)
        zsock_destroy(&gpud[i]);
    for (long c = 0; c < o.classes; c++)
        free(names[c]);
    free(names);
    free(gpud);
    free(gauth);
    zsock_destroy(&loader);
    zsock_destroy(&sub);
    char path[320];
    snprintf(path, sizeof path, "%s/reducerd.log", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/r", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/p", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}
